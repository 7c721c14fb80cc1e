package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// batchOf is a SendGrid-like batch: events from..to-1 of one delivery, each with its own plan.
func batchOf(from, to int, plan func(int) dedup.Plan) ([]dedup.Event, []dedup.Plan) {
	var evs []dedup.Event
	var plans []dedup.Plan
	for i := from; i < to; i++ {
		evs, plans = append(evs, orderEvent(i)), append(plans, plan(i))
	}
	return evs, plans
}

func outcomes(rs []dedup.Result) []dedup.Outcome {
	out := make([]dedup.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

// TestABatchClaimsEachEventOnceInOneWrite: a batch is one transaction; its redelivery, which
// overlaps it and brings one event more, runs only that event.
func TestABatchClaimsEachEventOnceInOneWrite(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			evs, plans := batchOf(1, 4, p.plan)
			rs, calls, err := e.store.CommitBatch(context.Background(), evs, plans)
			if err != nil || calls != 1 || e.counter.Calls("TransactWriteItems") != 1 {
				t.Fatalf("%v, %d calls (%d transactions), %v; want one transaction", outcomes(rs), calls, e.counter.Calls("TransactWriteItems"), err)
			}
			for i, r := range rs {
				if r.Outcome != dedup.OutcomeAccepted || r.ExpiresAt.IsZero() || e.claim(t, "shop", evs[i].ID) == nil {
					t.Fatalf("event %d: %+v, want accepted and claimed", i, r)
				}
			}
			// SendGrid's next batch repeats events 2 and 3 and brings 4.
			e.counter.Reset()
			evs, plans = batchOf(2, 5, p.plan)
			rs, calls, err = e.store.CommitBatch(context.Background(), evs, plans)
			want := []dedup.Outcome{dedup.OutcomeDuplicate, dedup.OutcomeDuplicate, dedup.OutcomeAccepted}
			if err != nil || fmt.Sprint(outcomes(rs)) != fmt.Sprint(want) {
				t.Fatalf("redelivered batch: %v, %v; want %v", outcomes(rs), err, want)
			}
			// The cancelled transaction, then event 4 alone as Commit writes it.
			if calls != 2 || e.counter.Total() != 2 {
				t.Fatalf("%d calls (%d counted), want 2", calls, e.counter.Total())
			}
			if n := e.count(t, dedup.ClaimPrefix); n != 4 {
				t.Fatalf("%d claims, want 4", n)
			}
			if p.op == "TransactWriteItems" && e.count(t, "ORDER#") != 4 {
				t.Fatalf("%d shipments, want 4: one per event", e.count(t, "ORDER#"))
			}
		})
	}
}

// TestABatchOverTheTransactionLimitIsWrittenInChunks: 150 claim-only events (one action each)
// need two transactions of at most 100 actions; 60 events of 2 actions, two of 50 and 10.
func TestABatchOverTheTransactionLimitIsWrittenInChunks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		n      int
		plan   func(int) dedup.Plan
		writes int
	}{
		{"150 claims", 150, claimOnly, 2},
		{"60 claims with a shipment each", 60, orderPlan, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			evs, plans := batchOf(0, c.n, c.plan)
			rs, calls, err := e.store.CommitBatch(context.Background(), evs, plans)
			if err != nil || calls != c.writes {
				t.Fatalf("%d calls, %v; want %d", calls, err, c.writes)
			}
			for i, r := range rs {
				if r.Outcome != dedup.OutcomeAccepted {
					t.Fatalf("event %d: %v", i, r.Outcome)
				}
			}
			if n := e.count(t, dedup.ClaimPrefix); n != c.n {
				t.Fatalf("%d claims, want %d", n, c.n)
			}
		})
	}
}

// TestOneIDTwiceInABatchIsOneEvent: DynamoDB refuses a transaction that writes one item twice;
// the batch's second copy of an id is answered as a duplicate of the first.
func TestOneIDTwiceInABatchIsOneEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	evs, plans := batchOf(1, 3, orderPlan)
	evs, plans = append(evs, orderEvent(1)), append(plans, orderPlan(1))
	rs, calls, err := e.store.CommitBatch(context.Background(), evs, plans)
	want := []dedup.Outcome{dedup.OutcomeAccepted, dedup.OutcomeAccepted, dedup.OutcomeDuplicate}
	if err != nil || fmt.Sprint(outcomes(rs)) != fmt.Sprint(want) || calls != 1 {
		t.Fatalf("%v in %d calls, %v; want %v in one", outcomes(rs), calls, err, want)
	}
	if e.count(t, dedup.ClaimPrefix) != 2 || e.count(t, "ORDER#") != 2 {
		t.Fatal("want two claims and two shipments")
	}
}

// TestABatchEventWhoseEffectIsRefusedIsAbsorbedAlone: event 2's shipment exists already (an
// earlier event shipped the order): event 2 is absorbed, the others are accepted.
func TestABatchEventWhoseEffectIsRefusedIsAbsorbedAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	if _, err := e.store.Commit(context.Background(), orderEvent(900), orderPlan(2)); err != nil { // ships ord_000002
		t.Fatal(err)
	}
	evs, plans := batchOf(1, 4, orderPlan)
	rs, _, err := e.store.CommitBatch(context.Background(), evs, plans)
	want := []dedup.Outcome{dedup.OutcomeAccepted, dedup.OutcomeAbsorbed, dedup.OutcomeAccepted}
	if err != nil || fmt.Sprint(outcomes(rs)) != fmt.Sprint(want) {
		t.Fatalf("%v, %v; want %v", outcomes(rs), err, want)
	}
	if c := e.claim(t, "shop", evs[1].ID); c == nil || len(c.Intents) != 0 {
		t.Fatalf("absorbed claim %+v: want it claimed without intents", c)
	}
	if e.count(t, "ORDER#") != 3 {
		t.Fatalf("%d shipments, want 3", e.count(t, "ORDER#"))
	}
}

// TestConcurrentCopiesOfABatchClaimEachEventOnce: SendGrid's redrive and the original batch
// arrive together; every event is accepted by exactly one of them.
func TestConcurrentCopiesOfABatchClaimEachEventOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const copies, n = 4, 20
	var mu sync.Mutex
	accepted := map[int]int{}
	var wg sync.WaitGroup
	for range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs, plans := batchOf(0, n, orderPlan)
			rs, _, err := e.store.CommitBatch(context.Background(), evs, plans)
			if err != nil && !errors.Is(err, dedup.ErrUnavailable) {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i, r := range rs {
				if r.Outcome == dedup.OutcomeAccepted {
					accepted[i]++
				}
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if accepted[i] > 1 {
			t.Fatalf("event %d accepted %d times", i, accepted[i])
		}
	}
	if e.count(t, dedup.ClaimPrefix) != n || e.count(t, "ORDER#") != n {
		t.Fatalf("%d claims, %d shipments; want %d of each", e.count(t, dedup.ClaimPrefix), e.count(t, "ORDER#"), n)
	}
}

// TestALostBatchResponseIsStillAccepted: the transaction landed, its answer was lost, the SDK
// retried: every event is still reported accepted (by the engine's token idempotency, or by
// each claim's own commit token), and nothing is written twice.
func TestALostBatchResponseIsStillAccepted(t *testing.T) {
	t.Parallel()
	lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: 1}
	e := newEnv(t, nil, awstest.WithTransport(lose))
	evs, plans := batchOf(1, 4, orderPlan)
	rs, _, err := e.store.CommitBatch(context.Background(), evs, plans)
	if err != nil || lose.Lost() != 1 {
		t.Fatalf("%v (%d lost)", err, lose.Lost())
	}
	for i, r := range rs {
		if r.Outcome != dedup.OutcomeAccepted {
			t.Fatalf("event %d: %v after a lost response, want accepted", i, r.Outcome)
		}
	}
	if e.count(t, dedup.ClaimPrefix) != 3 || e.count(t, "ORDER#") != 3 {
		t.Fatal("want three claims and three shipments")
	}
}

// TestAnInvalidEventInABatchWritesNothing names the event's index.
func TestAnInvalidEventInABatchWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	evs, plans := batchOf(1, 4, orderPlan)
	evs[2].ID = ""
	_, calls, err := e.store.CommitBatch(context.Background(), evs, plans)
	var ie *dedup.InvalidError
	if !errors.As(err, &ie) || ie.Field != "events[2].event_id" || calls != 0 {
		t.Fatalf("%v (%d calls), want an InvalidError naming events[2].event_id and no call", err, calls)
	}
	if ee, ok := errors.AsType[*dedup.EventError](err); !ok || ee.Index != 2 {
		t.Fatalf("%v: want an *EventError of index 2, which a receiver reads without parsing text", err)
	}
	// Several: each is named, in order (a receiver answers them all from one read of their
	// claims), and errors.As finds the first.
	evs[0].ID, evs[1].Source = "", "paypal"
	_, calls, err = e.store.CommitBatch(context.Background(), evs, plans)
	var at []int
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, one := range j.Unwrap() {
			if ee, ok := one.(*dedup.EventError); ok {
				at = append(at, ee.Index)
			}
		}
	}
	if ee, ok := errors.AsType[*dedup.EventError](err); !ok || ee.Index != 0 || fmt.Sprint(at) != "[0 1 2]" || calls != 0 {
		t.Fatalf("%v (%d calls): want the EventErrors of 0, 1 and 2 joined, the first found first, and no call", err, calls)
	}
	if err2 := e.store.CheckBatch(evs, plans); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("CheckBatch: %v, want CommitBatch's %v", err2, err)
	}
	if len(e.items(t)) != 0 {
		t.Fatal("an invalid batch wrote something")
	}
}

// TestBatchEventsThatTouchOneItemAreWrittenInTurn: two events of a batch updating one counter
// (SendGrid sends several events of one message) cannot share a transaction, which may touch
// an item once: they are written one after the other, and the counter counts both.
func TestBatchEventsThatTouchOneItemAreWrittenInTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	counter := func(int) dedup.Plan {
		return dedup.Plan{Effects: []dedup.Effect{dedup.UpdateEffect(map[string]types.AttributeValue{"pk": s("COUNTER#x"), "sk": s("N")},
			expression.Add(expression.Name("n"), expression.Value(1)))}}
	}
	evs, plans := batchOf(1, 4, counter)
	rs, calls, err := e.store.CommitBatch(context.Background(), evs, plans)
	if err != nil || fmt.Sprint(outcomes(rs)) != fmt.Sprint([]dedup.Outcome{dedup.OutcomeAccepted, dedup.OutcomeAccepted, dedup.OutcomeAccepted}) {
		t.Fatalf("%v, %v", outcomes(rs), err)
	}
	if calls != 3 {
		t.Fatalf("%d calls, want 3: one write per event that touches the counter", calls)
	}
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": s("COUNTER#x"), "sk": s("N")}})
	if err != nil || out.Item["n"].(*types.AttributeValueMemberN).Value != "3" {
		t.Fatalf("counter %v, %v; want 3", out.Item, err)
	}
}

// TestARedeliveredBatchWritesOnlyWhatTheLastAttemptDidNot: the attempt before claimed most of a
// large batch and its provider gave up; the redelivery must not spend a cancelled transaction
// on every chunk already claimed (that is how the first attempt ran out of time, and the retry
// would too): once a chunk comes back claimed, the rest is read, and only the unclaimed events
// are written.
func TestARedeliveredBatchWritesOnlyWhatTheLastAttemptDidNot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	none := func(int) dedup.Plan { return dedup.Plan{} }
	evs, plans := batchOf(1, 301, none) // the first attempt got three chunks in
	if _, _, err := e.store.CommitBatch(context.Background(), evs, plans); err != nil {
		t.Fatal(err)
	}
	e.counter.Reset()
	evs, plans = batchOf(1, 451, none) // the whole batch again: five chunks
	rs, calls, err := e.store.CommitBatch(context.Background(), evs, plans)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		want := dedup.OutcomeAccepted
		if i < 300 {
			want = dedup.OutcomeDuplicate
		}
		if r.Outcome != want {
			t.Fatalf("event %d: %v, want %v", i+1, r.Outcome, want)
		}
	}
	// The first chunk's cancelled transaction; the other 350 claims read in 4 BatchGetItem;
	// the 150 new events in 2 transactions. Without the read: 5 transactions, 3 of them cancelled.
	if tx, reads := e.counter.Calls("TransactWriteItems"), e.counter.Calls("BatchGetItem"); tx != 3 || reads != 4 || calls != 7 {
		t.Fatalf("%d transactions and %d batch reads (%d calls), want 3 and 4", tx, reads, calls)
	}
	if n := e.count(t, dedup.ClaimPrefix); n != 450 {
		t.Fatalf("%d claims, want 450", n)
	}
	// A redelivery of a batch wholly claimed: one cancelled transaction and the reads.
	e.counter.Reset()
	if _, _, err := e.store.CommitBatch(context.Background(), evs, plans); err != nil || e.counter.Calls("TransactWriteItems") != 1 {
		t.Fatalf("%v, %d transactions, want the first chunk's only", err, e.counter.Calls("TransactWriteItems"))
	}
}

// TestABatchChunkStaysWithinEveryTransactionLimit: no chunk of a batch may exceed DynamoDB's
// 100 actions or 4 MB (it would be refused whole, on every redelivery). The bytes count puts
// into the application's own tables, and the actions count each event's body guard.
func TestABatchChunkStaysWithinEveryTransactionLimit(t *testing.T) {
	t.Parallel()
	t.Run("12 events each putting 390 KB into an application table", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil)
		app := awstest.Table(t, e.client)
		e = newEnvWithClient(t, e, awstest.BaseTransport(), func(c *dedup.Config) {
			c.Tables = map[string]dedup.TableKeys{"app": {Name: app, PartitionKey: "pk", SortKey: "sk"}}
		})
		blob := strings.Repeat("b", 390*1024)
		evs, plans := batchOf(0, 12, func(i int) dedup.Plan {
			return dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("BLOB#%d", i)}, "sk": &types.AttributeValueMemberS{Value: "X"},
				"blob": &types.AttributeValueMemberS{Value: blob}}).In("app")}}
		})
		rs, calls, err := e.store.CommitBatch(context.Background(), evs, plans)
		if err != nil || calls != 2 {
			t.Fatalf("%d calls, %v; want 2 transactions of under 4 MB", calls, err)
		}
		for i, r := range rs {
			if r.Outcome != dedup.OutcomeAccepted {
				t.Fatalf("event %d: %v", i, r.Outcome)
			}
		}
		if n := len(awstest.Items(t, e.client, app)); n != 12 {
			t.Fatalf("%d application items, want 12", n)
		}
	})
	t.Run("40 guarded events with a shipment each: 120 actions", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil)
		evs, plans := batchOf(0, 40, orderPlan)
		for i := range evs {
			evs[i].GuardBody = true
			evs[i].Payload = []byte(fmt.Sprintf(`{"order":%d}`, i))
		}
		rs, calls, err := e.store.CommitBatch(context.Background(), evs, plans)
		if err != nil || calls != 2 {
			t.Fatalf("%d calls, %v; want 2 transactions of at most 100 actions", calls, err)
		}
		for i, r := range rs {
			if r.Outcome != dedup.OutcomeAccepted {
				t.Fatalf("event %d: %v", i, r.Outcome)
			}
		}
	})
}

// TestABatchUnderTransactionConflictRetriesAndThenGivesUp: a conflict cancels a batch's
// transaction (another writer on one of its items); the batch is retried, the events
// cancelled for the conflicting one's sake with it, and after Config.ConflictRetries it is
// unavailable with nothing written.
func TestABatchUnderTransactionConflictRetriesAndThenGivesUp(t *testing.T) {
	t.Parallel()
	// Two events of a claim and a shipment each: four actions, the first one conflicting.
	const conflict4 = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict, None, None, None]","CancellationReasons":[{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item."},{"Code":"None"},{"Code":"None"},{"Code":"None"}]}`
	for _, c := range []struct {
		name      string
		conflicts int
		calls     int
		accepted  bool
	}{
		{"a conflict that clears", 2, 3, true},
		{"a conflict that persists", -1, 3, false}, // the first call and ConflictRetries (2) more
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: c.conflicts, Status: 400, Body: conflict4}
			e := newEnvWithClient(t, newEnv(t, nil), inject, func(cfg *dedup.Config) { cfg.ConflictBackoff = time.Millisecond; cfg.ConflictRetries = 2 })
			evs, plans := batchOf(0, 2, orderPlan)
			rs, calls, err := e.store.CommitBatch(context.Background(), evs, plans)
			if calls != c.calls {
				t.Fatalf("%d calls, want %d", calls, c.calls)
			}
			if !c.accepted {
				if !errors.Is(err, dedup.ErrUnavailable) {
					t.Fatalf("%v, want ErrUnavailable", err)
				}
				if n := len(e.items(t)); n != 0 {
					t.Fatalf("%d items written, want none", n)
				}
				return
			}
			if err != nil || rs[0].Outcome != dedup.OutcomeAccepted || rs[1].Outcome != dedup.OutcomeAccepted {
				t.Fatalf("%v, %v; want both accepted", outcomes(rs), err)
			}
		})
	}
}

// TestARedeliveredBatchReadsAnyStoredExpiryAsTheClaimConditionDoes: the claims a redelivered
// batch reads ahead of its writes are judged as the claim condition judges them: one whose
// expires_at is past, in whatever number form it was stored (a fraction of a second from a
// float clock), is re-admitted by the write, never answered as a duplicate from the read.
func TestARedeliveredBatchReadsAnyStoredExpiryAsTheClaimConditionDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	none := func(int) dedup.Plan { return dedup.Plan{} }
	evs, plans := batchOf(1, 201, none)
	if _, _, err := e.store.CommitBatch(ctx, evs, plans); err != nil {
		t.Fatal(err)
	}
	expired := orderEvent(150) // in the part of the batch its redelivery reads first
	e.setExpiry(t, expired, num(fmt.Sprintf("%d.5", e.clock.Now().Unix()-100)))
	if res, err := e.store.Commit(ctx, expired, dedup.Plan{}); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatalf("alone, the expired claim's event: %+v, %v; want re-admitted by the claim condition", res, err)
	}
	// Expired again, and the whole batch redelivered.
	e.setExpiry(t, expired, num(fmt.Sprintf("%d.5", e.clock.Now().Unix()-100)))
	rs, _, err := e.store.CommitBatch(ctx, evs, plans)
	if err != nil {
		t.Fatal(err)
	}
	if got := rs[149].Outcome; got != dedup.OutcomeAccepted || e.counter.Calls("BatchGetItem") == 0 {
		t.Fatalf("in the redelivered batch (%d batch reads), the expired claim's event: %v; want re-admitted, as alone", e.counter.Calls("BatchGetItem"), got)
	}
}
