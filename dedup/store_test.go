package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// reads keeps the GetItem requests a Store sends.
type reads struct {
	dedup.API
	ins []*dynamodb.GetItemInput
}

func (r *reads) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.ins = append(r.ins, in)
	return r.API.GetItem(ctx, in, optFns...)
}

// TestProbeAnswersAHeldClaimAsCommitsDuplicate: a claim that holds the id is answered with the
// Result Commit gives that duplicate, from one eventually consistent read of a projection of the
// claim, and nothing written.
func TestProbeAnswersAHeldClaimAsCommitsDuplicate(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			ctx := context.Background()
			if _, err := e.store.Commit(ctx, orderEvent(1), p.plan(1)); err != nil {
				t.Fatal(err)
			}
			again := orderEvent(1)
			again.DeliveryID, again.Payload = "dlv_again", []byte(`{"changed":true}`)
			e.counter.Reset()
			r := &reads{API: e.counter}
			store, err := dedup.New(r, dedup.Config{Table: e.table, Sources: map[string]dedup.Retention{"shop": testRetention}, Now: e.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			probed, err := store.Probe(ctx, again)
			if err != nil || e.counter.Total() != 1 || len(r.ins) != 1 || aws.ToBool(r.ins[0].ConsistentRead) || r.ins[0].ProjectionExpression == nil {
				t.Fatalf("probe: %v in %d calls (%d reads, consistent or unprojected); want one eventually consistent read of a projection", err, e.counter.Total(), len(r.ins))
			}
			committed, err := e.store.Commit(ctx, again, p.plan(1))
			if err != nil {
				t.Fatal(err)
			}
			if probed.Outcome != dedup.OutcomeDuplicate || probed.FirstDeliveryID != "dlv_000001_a" || !probed.PayloadMismatch ||
				probed.Outcome != committed.Outcome || probed.FirstDeliveryID != committed.FirstDeliveryID ||
				!probed.FirstReceivedAt.Equal(committed.FirstReceivedAt) || probed.PayloadMismatch != committed.PayloadMismatch || probed.Calls != 1 {
				t.Fatalf("probe %+v, Commit %+v: want Commit's duplicate, in 1 call", probed, committed)
			}
		})
	}
}

// TestProbeLeavesToCommitWhatItCannotAnswer: no claim, a forged id under a body guard (whose
// guard the write then refuses), and an event Commit would refuse, which the probe refuses
// alike before any call.
func TestProbeLeavesToCommitWhatItCannotAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	if res, err := e.store.Probe(ctx, orderEvent(1)); err != nil || res.Outcome != 0 || res.Calls != 1 {
		t.Fatalf("no claim: %+v, %v; want no outcome in 1 call", res, err)
	}

	guarded := orderEvent(2)
	guarded.GuardBody = true
	if _, err := e.store.Commit(ctx, guarded, orderPlan(2)); err != nil {
		t.Fatal(err)
	}
	if res, err := e.store.Probe(ctx, guarded); err != nil || res.Outcome != dedup.OutcomeDuplicate {
		t.Fatalf("the guarded event again: %+v, %v; want duplicate", res, err)
	}
	forged := guarded
	forged.ID = "evt_forged"
	if res, err := e.store.Probe(ctx, forged); err != nil || res.Outcome != 0 {
		t.Fatalf("a forged id: %+v, %v; want no outcome", res, err)
	}
	if res, err := e.store.Commit(ctx, forged, orderPlan(2)); err != nil || res.Outcome != dedup.OutcomeReplay {
		t.Fatalf("Commit of the forged id: %+v, %v; want its guard's refusal (replay)", res, err)
	}

	e.counter.Reset()
	for _, ev := range []dedup.Event{{Source: "shop", Type: "order.paid"}, {Source: "paypal", ID: "evt_1", Type: "order.paid"}} {
		_, err := e.store.Probe(ctx, ev)
		want := e.store.Check(ev, dedup.Plan{})
		if ie := (*dedup.InvalidError)(nil); !errors.As(err, &ie) || err.Error() != want.Error() {
			t.Errorf("probe of %+v: %v, want Commit's refusal %v", ev, err, want)
		}
	}
	if e.counter.Total() != 0 {
		t.Fatalf("%d calls for events Commit refuses, want none", e.counter.Total())
	}
}

// TestProbeReadsAnyStoredExpiryAsTheClaimConditionDoes: whatever number (or other value) a
// claim's expires_at holds, as a tool or an operator may have written it (a fraction of a
// second from a float clock, a negative number, another type, none), Probe answers duplicate
// exactly when Commit's condition refuses the claim: a claim the condition treats as expired
// must never be answered as a duplicate, or the event's effects are never written.
func TestProbeReadsAnyStoredExpiryAsTheClaimConditionDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	now := e.clock.Now().Unix()
	expiries := []types.AttributeValue{
		num(fmt.Sprint(now - 100)), num(fmt.Sprint(now + 100)), num(fmt.Sprint(now)),
		num(fmt.Sprintf("%d.5", now-100)), num(fmt.Sprintf("%d.5", now+100)), num(fmt.Sprintf("%d.5", now-1)),
		num("0.5"), num("-1"), num("-1.5"), num("99999999999999999999"), num("-99999999999999999999"),
		num(fmt.Sprintf("%.9e", float64(now-100))), num(fmt.Sprintf("%.9e", float64(now+1000))),
		// Another type, worded so that no TTL deletes it: DynamoDB's TTL ignores a string, and
		// MiniStack's reaper deletes one that parses as a past time, between a Probe and a Commit.
		&types.AttributeValueMemberS{Value: fmt.Sprintf("at %d", now-100)}, nil,
	}
	for i, exp := range expiries {
		ev := orderEvent(100 + i)
		if _, err := e.store.Commit(ctx, ev, claimOnly(100+i)); err != nil {
			t.Fatal(err)
		}
		e.setExpiry(t, ev, exp)
		probed, err := e.store.Probe(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		again := ev
		again.DeliveryID = "dlv_again"
		committed, err := e.store.Commit(ctx, again, claimOnly(100+i))
		if err != nil {
			t.Fatal(err)
		}
		if (probed.Outcome == dedup.OutcomeDuplicate) != (committed.Outcome == dedup.OutcomeDuplicate) {
			t.Errorf("expires_at %s (now %d): Probe answered %v, Commit %v", show(exp), now, probed.Outcome, committed.Outcome)
		}
	}
}

// setExpiry writes exp as the expires_at of ev's claim (nil: removes it), as a tool or an
// operator might.
func (e *env) setExpiry(t *testing.T, ev dedup.Event, exp types.AttributeValue) {
	t.Helper()
	in := &dynamodb.UpdateItemInput{TableName: &e.table,
		Key: map[string]types.AttributeValue{"pk": s(dedup.ClaimKey(ev.Source, ev.ID)), "sk": s(dedup.ClaimSK)}}
	if exp == nil {
		in.UpdateExpression = aws.String("REMOVE expires_at")
	} else {
		in.UpdateExpression, in.ExpressionAttributeValues = aws.String("SET expires_at = :e"), map[string]types.AttributeValue{":e": exp}
	}
	if _, err := e.client.UpdateItem(context.Background(), in); err != nil {
		t.Fatalf("expires_at %s: %v", show(exp), err)
	}
}

func num(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func show(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberS:
		return fmt.Sprintf("%q (a string)", v.Value)
	}
	return "(none)"
}

// ClaimedBatch answers every event as Claimed answers it (a claim that holds, its first
// delivery and a changed payload; none; one TTL has not deleted yet past its expiry), from one
// consistent BatchGetItem per 100 events; it refuses an event Claimed refuses, naming its index,
// before any call, and a table that leaves its keys unprocessed is unavailable, as a throttled
// read is.
func TestClaimedBatchAnswersEachEventAsClaimedDoesInOneReadPer100(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	var evs []dedup.Event
	for i := range 250 {
		ev := orderEvent(i)
		if i < 150 {
			if _, err := e.store.Commit(ctx, ev, dedup.Plan{}); err != nil {
				t.Fatal(err)
			}
		}
		if i%7 == 0 {
			ev.DeliveryID, ev.Payload = "dlv_again", []byte(`{"changed":true}`)
		}
		evs = append(evs, ev)
	}
	e.clock.mu.Lock()
	e.clock.now = e.clock.now.Add(testRetention.Effective() / 2)
	e.clock.mu.Unlock()
	if _, err := e.store.Commit(ctx, orderEvent(1000), dedup.Plan{}); err != nil {
		t.Fatal(err)
	}
	e.clock.mu.Lock()
	e.clock.now = e.clock.now.Add(testRetention.Effective()/2 + time.Hour) // the first 150 expired, evt 1000 not
	e.clock.mu.Unlock()
	evs = append(evs, orderEvent(1000))
	for _, at := range []string{"expired", "held"} {
		e.counter.Reset()
		results, calls, err := e.store.ClaimedBatch(ctx, evs)
		if err != nil || calls != 3 || e.counter.Calls("BatchGetItem") != 3 || e.counter.Total() != 3 || len(results) != len(evs) {
			t.Fatalf("%s: %d results, %v, %d calls (%d made); want %d in 3 BatchGetItem", at, len(results), err, calls, e.counter.Total(), len(evs))
		}
		for i, ev := range evs {
			want, err := e.store.Claimed(ctx, ev)
			if err != nil {
				t.Fatal(err)
			}
			want.Calls = 0
			if fmt.Sprint(results[i]) != fmt.Sprint(want) {
				t.Fatalf("%s: %s: %+v, want Claimed's %+v", at, ev.ID, results[i], want)
			}
		}
		if held := results[0].Outcome == dedup.OutcomeDuplicate; held != (at == "held") || results[250].Outcome != dedup.OutcomeDuplicate {
			t.Fatalf("%s: evt 0 %v, evt 1000 %v", at, results[0].Outcome, results[250].Outcome)
		}
		e.clock.mu.Lock()
		e.clock.now = e.clock.now.Add(-testRetention.Effective() / 2) // back within the first 150's retention
		e.clock.mu.Unlock()
	}

	e.counter.Reset()
	bad := append(evs[:2:2], dedup.Event{Source: "paypal", ID: "evt_1", Type: "order.paid"})
	_, _, err := e.store.ClaimedBatch(ctx, bad)
	if ee, ok := errors.AsType[*dedup.EventError](err); !ok || ee.Index != 2 || !errors.Is(err, dedup.ErrInvalid) || e.counter.Total() != 0 {
		t.Fatalf("an unconfigured source: %v after %d calls, want an EventError at 2 before any call", err, e.counter.Total())
	}

	throttled, err := dedup.New(&unprocessedStore{}, dedup.Config{Table: e.table, Sources: map[string]dedup.Retention{"shop": testRetention}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := throttled.ClaimedBatch(ctx, evs[:1]); !errors.Is(err, dedup.ErrUnavailable) || !errors.Is(err, dedup.ErrUnprocessed) {
		t.Fatalf("keys left unprocessed: %v, want ErrUnavailable", err)
	}
}

// ClaimedBatch reads the claims in the events' order, each once: when a read fails, the
// events whose claims were read before it are answered, up to the first that was not.
func TestClaimedBatchAnswersTheEventsReadBeforeAFailedRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	var evs []dedup.Event
	for i := range 250 {
		if i%2 == 0 {
			if _, err := e.store.Commit(ctx, orderEvent(i), dedup.Plan{}); err != nil {
				t.Fatal(err)
			}
		}
		evs = append(evs, orderEvent(i%230)) // the last 20 repeat claims read first
	}
	inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "BatchGetItem", N: -1, Skip: 2, Status: 400, Body: throttling}
	newEnvWithClient(t, e, inject, nil)
	results, calls, err := e.store.ClaimedBatch(ctx, evs)
	if !errors.Is(err, dedup.ErrUnavailable) || len(results) != 200 || calls < 3 {
		t.Fatalf("the third read failing: %d results, %d calls, %v; want the first 200 events answered, ErrUnavailable", len(results), calls, err)
	}
	for i, res := range results {
		if (res.Outcome == dedup.OutcomeDuplicate) != (i%2 == 0) {
			t.Fatalf("evt %d: %v", i, res.Outcome)
		}
	}
	inject.SetN(0)
	if results, calls, err = e.store.ClaimedBatch(ctx, evs); err != nil || len(results) != 250 || calls != 3 {
		t.Fatalf("%d results in %d calls, %v; want 250 in 3: 230 claims, each read once", len(results), calls, err)
	}
	for i, res := range results {
		if (res.Outcome == dedup.OutcomeDuplicate) != (i%230%2 == 0) {
			t.Fatalf("evt %d (%s): %v", i, evs[i].ID, res.Outcome)
		}
	}
}

// unprocessedStore is a table that leaves every key of a BatchGetItem unprocessed.
type unprocessedStore struct{ dedup.API }

func (unprocessedStore) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return (&unprocessedBatches{}).BatchGetItem(ctx, in, optFns...)
}

// halfProcessed passes a random part of each BatchGetItem's keys to the table and hands the
// rest back as unprocessed, as a throttling table does, for its first rounds calls.
type halfProcessed struct {
	dedup.API
	mu     sync.Mutex
	r      *rand.Rand
	rounds int
}

func (h *halfProcessed) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	h.mu.Lock()
	throttle := h.rounds > 0
	h.rounds--
	h.mu.Unlock()
	if !throttle {
		return h.API.BatchGetItem(ctx, in, optFns...)
	}
	req, left := map[string]types.KeysAndAttributes{}, map[string]types.KeysAndAttributes{}
	for table, ka := range in.RequestItems {
		var pass, keep []map[string]types.AttributeValue
		h.mu.Lock()
		for _, k := range ka.Keys {
			if h.r.IntN(2) == 0 {
				pass = append(pass, k)
			} else {
				keep = append(keep, k)
			}
		}
		h.mu.Unlock()
		if len(pass) > 0 {
			c := ka
			c.Keys = pass
			req[table] = c
		}
		if len(keep) > 0 {
			c := ka
			c.Keys = keep
			left[table] = c
		}
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	if len(req) > 0 {
		o, err := h.API.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req}, optFns...)
		if err != nil {
			return nil, err
		}
		out = o
	}
	out.UnprocessedKeys = left
	return out, nil
}

// ClaimedBatch answers as Claimed does, event for event, over generated batches: ids claimed
// or not, repeated in the batch, payloads changed, odd ids, a table that leaves part of its
// keys unprocessed for a few rounds.
func TestClaimedBatchAnswersAsClaimedOverGeneratedBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	ids := []string{"a", "A", "a ", "é", "e\u0301", "evt#1", "evt#1#CLAIM", "x/y", "EVT#shop#a"}
	for i := range 120 {
		ids = append(ids, fmt.Sprintf("evt_%04d", i))
	}
	claimed := map[string]bool{}
	r := rand.New(rand.NewPCG(7, 9))
	for _, id := range ids {
		if r.IntN(2) == 0 {
			ev := dedup.Event{Source: "shop", ID: id, Type: "t", Payload: []byte(`{"id":"` + id + `"}`)}
			if _, err := e.store.Commit(ctx, ev, dedup.Plan{}); err != nil {
				t.Fatalf("%q: %v", id, err)
			}
			claimed[id] = true
		}
	}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 3))
		n := 1 + r.IntN(260)
		var evs []dedup.Event
		for range n {
			id := ids[r.IntN(len(ids))]
			p := `{"id":"` + id + `"}`
			if r.IntN(4) == 0 {
				p = `{"changed":1}`
			}
			evs = append(evs, dedup.Event{Source: "shop", ID: id, Type: "t", Payload: []byte(p)})
		}
		hp := &halfProcessed{API: e.counter, r: rand.New(rand.NewPCG(seed, 5)), rounds: r.IntN(3)}
		store, err := dedup.New(hp, dedup.Config{Table: e.table, Sources: map[string]dedup.Retention{"shop": testRetention}, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		results, _, err := store.ClaimedBatch(ctx, evs)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for i, ev := range evs {
			want, err := e.store.Claimed(ctx, ev)
			if err != nil {
				t.Fatal(err)
			}
			want.Calls = 0
			if fmt.Sprint(results[i]) != fmt.Sprint(want) {
				t.Fatalf("seed %d: event %d %q: %+v, want Claimed's %+v", seed, i, ev.ID, results[i], want)
			}
			if (results[i].Outcome == dedup.OutcomeDuplicate) != claimed[ev.ID] {
				t.Fatalf("seed %d: %q claimed %v, answered %v", seed, ev.ID, claimed[ev.ID], results[i].Outcome)
			}
		}
	}
}

// A claims table configured by its ARN (Config accepts one) answers ClaimedBatch as Claimed.
func TestClaimedBatchOnATableNamedByItsARN(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	desc, err := e.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(e.table)})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(desc.Table.TableArn)
	store, err := dedup.New(e.counter, dedup.Config{Table: arn, Sources: map[string]dedup.Retention{"shop": testRetention}, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(ctx, orderEvent(1), dedup.Plan{}); err != nil {
		t.Skipf("the emulator takes no ARN for a write: %v", err)
	}
	one, err := store.Claimed(ctx, orderEvent(1))
	if err != nil || one.Outcome != dedup.OutcomeDuplicate {
		t.Skipf("the emulator's GetItem by ARN: %+v %v", one, err)
	}
	res, _, err := store.ClaimedBatch(ctx, []dedup.Event{orderEvent(1)})
	if err != nil || res[0].Outcome != dedup.OutcomeDuplicate {
		t.Fatalf("by ARN %s: %+v %v, want the duplicate Claimed answers", arn, res, err)
	}
}

// A claim holding an attribute Claimed does not read, of another type than this release writes
// (by hand, by a tool, by a later release: as TestATraceAttributeOfAnotherTypeNeverMakesAClaimUnreadable
// allows for trace), is answered by ClaimedBatch as Claimed answers it: the first delivery's id
// and whether the payload changed.
func TestClaimedBatchReadsWhatClaimedReadsOfAClaimWithAnAttributeOfAnotherType(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	for i, odd := range []map[string]types.AttributeValue{
		{"event_type": &types.AttributeValueMemberN{Value: "7"}},
		{"outcome": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}},
		{"payload_bytes": &types.AttributeValueMemberS{Value: "12"}},
		{"wake": &types.AttributeValueMemberS{Value: "soon"}},
		{"intents": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"email.send": &types.AttributeValueMemberM{
			Value: map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "pending"}, "attempts": &types.AttributeValueMemberS{Value: "1"}}}}}},
	} {
		ev := orderEvent(500 + i)
		if _, err := e.store.Commit(ctx, ev, dedup.Plan{}); err != nil {
			t.Fatal(err)
		}
		item := e.claimItem(t, ev)
		for k, v := range odd {
			item[k] = v
		}
		if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item}); err != nil {
			t.Fatal(err)
		}
		again := ev
		again.DeliveryID, again.Payload = "dlv_again", []byte(`{"changed":true}`)
		want, err := e.store.Claimed(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		want.Calls = 0
		got, _, err := e.store.ClaimedBatch(ctx, []dedup.Event{again})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got[0]) != fmt.Sprint(want) {
			t.Errorf("%v: ClaimedBatch %+v, Claimed %+v", odd, got[0], want)
		}
	}
}

func (e *env) claimItem(t *testing.T, ev dedup.Event) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: dedup.ClaimItemKey(dedup.ClaimKey(ev.Source, ev.ID))})
	if err != nil || out.Item == nil {
		t.Fatalf("claim of %s: %v", ev.ID, err)
	}
	return out.Item
}
