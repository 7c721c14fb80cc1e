package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

var testRetention = dedup.Retention{RetryHorizon: 72 * time.Hour, RedriveWindow: 30 * 24 * time.Hour}

// env is one test's table, client and Store.
type env struct {
	client  *dynamodb.Client
	table   string
	counter *awstest.Counter
	store   *dedup.Store
	clock   *clock
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// newEnv creates a table on the test endpoint and a Store over it. Options tune the Config;
// clientOpts tune the DynamoDB client (to lose responses or inject errors).
func newEnv(t *testing.T, configure func(*dedup.Config), clientOpts ...func(*dynamodb.Options)) *env {
	t.Helper()
	admin := awstest.Client(t)
	table := awstest.Table(t, admin)
	client := admin
	if len(clientOpts) > 0 {
		client = awstest.Client(t, clientOpts...)
	}
	e := &env{client: admin, table: table, counter: awstest.NewCounter(client), clock: &clock{now: time.Now()}}
	cfg := dedup.Config{
		Table:   table,
		Sources: map[string]dedup.Retention{"shop": testRetention, "other": testRetention},
		Now:     e.clock.Now,
	}
	if configure != nil {
		configure(&cfg)
	}
	store, err := dedup.New(e.counter, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	return e
}

func (e *env) items(t *testing.T) []map[string]types.AttributeValue {
	return awstest.Items(t, e.client, e.table)
}

// count returns how many items have a pk starting with prefix.
func (e *env) count(t *testing.T, prefix string) int {
	n := 0
	for _, it := range e.items(t) {
		if pk := it["pk"].(*types.AttributeValueMemberS).Value; strings.HasPrefix(pk, prefix) {
			n++
		}
	}
	return n
}

func (e *env) claim(t *testing.T, source, id string) *dedup.Claim {
	t.Helper()
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      &e.table,
		Key:            map[string]types.AttributeValue{"pk": s(dedup.ClaimKey(source, id)), "sk": s(dedup.ClaimSK)},
		ConsistentRead: ptr(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Item == nil {
		return nil
	}
	c, err := dedup.UnmarshalClaim(out.Item)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func ptr[T any](v T) *T               { return &v }

func orderEvent(i int) dedup.Event {
	return dedup.Event{
		Source:     "shop",
		ID:         fmt.Sprintf("evt_%06d", i),
		Type:       "order.paid",
		DeliveryID: fmt.Sprintf("dlv_%06d_a", i),
		OccurredAt: time.Date(2026, 8, 25, 9, 14, 3, 0, time.UTC),
		Payload:    []byte(fmt.Sprintf(`{"event_id":"evt_%06d","type":"order.paid","data":{"order_id":"ord_%06d"}}`, i, i)),
	}
}

// orderPlan is the reference application's plan: one shipment per order, guarded by its own
// condition, and an email intent.
func orderPlan(i int) dedup.Plan {
	return dedup.Plan{
		Effects: []dedup.Effect{shipment(fmt.Sprintf("ord_%06d", i))},
		Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{"template":"shipped"}`)}},
	}
}

func shipment(order string) dedup.Effect {
	return dedup.PutEffect(map[string]types.AttributeValue{
		"pk":       s("ORDER#" + order),
		"sk":       s("SHIPMENT"),
		"order_id": s(order),
	}).If(expression.AttributeNotExists(expression.Name("pk")))
}

func claimOnly(int) dedup.Plan {
	return dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}}
}

// paths runs a test over both write paths: the single PutItem of a claim-only plan and the
// transaction of a plan with effects.
var paths = []struct {
	name string
	plan func(int) dedup.Plan
	op   string
}{
	{"claim only, one PutItem", claimOnly, "PutItem"},
	{"claim with effects, one TransactWriteItems", orderPlan, "TransactWriteItems"},
}

func TestCommitAcceptsTheFirstDeliveryAndRefusesTheRetry(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			ev := orderEvent(1)
			res, err := e.store.Commit(context.Background(), ev, p.plan(1))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != dedup.OutcomeAccepted || res.Calls != 1 {
				t.Fatalf("first delivery: got %v after %d calls, want accepted after 1", res.Outcome, res.Calls)
			}
			if got := e.counter.Calls(p.op); got != 1 {
				t.Fatalf("first delivery made %d %s calls, want 1", got, p.op)
			}

			retry := ev
			retry.DeliveryID = "dlv_000001_b" // a retry: same event id, new delivery id
			e.clock.Advance(30 * time.Second)
			e.counter.Reset()
			res, err = e.store.Commit(context.Background(), retry, p.plan(1))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != dedup.OutcomeDuplicate || res.PayloadMismatch {
				t.Fatalf("retry: got %+v, want a duplicate without mismatch", res)
			}
			if res.FirstDeliveryID != ev.DeliveryID {
				t.Fatalf("retry: first delivery id %q, want %q", res.FirstDeliveryID, ev.DeliveryID)
			}
			if e.counter.Total() != 1 {
				t.Fatalf("duplicate cost %d DynamoDB calls, want 1", e.counter.Total())
			}

			c := e.claim(t, "shop", ev.ID)
			if c == nil || c.DeliveryID != ev.DeliveryID || c.EventType != "order.paid" || c.Outcome != "accepted" {
				t.Fatalf("stored claim %+v does not describe the first delivery", c)
			}
			if in := c.Intents["email.send"]; in.Status != dedup.IntentPending || in.Target != "email" {
				t.Fatalf("stored intent %+v, want a pending email intent", in)
			}
			if c.PendingShard == "" || c.PendingSince == 0 {
				t.Fatal("a claim with pending intents must carry the sparse GSI keys")
			}
			if want := e.clock.Now().Add(-30 * time.Second).Add(testRetention.Effective()).Unix(); c.ExpiresAt != want {
				t.Fatalf("expires_at %d, want received + retention = %d", c.ExpiresAt, want)
			}
		})
	}
}

func TestConcurrentDoublesClaimEachEventExactlyOnce(t *testing.T) {
	t.Parallel()
	const events, copies, inFlight = 500, 8, 8
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			outcomes := make([][copies]dedup.Outcome, events)
			sem := make(chan struct{}, inFlight)
			var wg sync.WaitGroup
			var failures atomic.Int64
			for i := range events {
				sem <- struct{}{}
				var start sync.WaitGroup
				start.Add(1)
				var done sync.WaitGroup
				for c := range copies {
					done.Add(1)
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer done.Done()
						ev := orderEvent(i)
						ev.DeliveryID = fmt.Sprintf("dlv_%06d_%d", i, c)
						start.Wait() // release all copies of the event at once
						res, err := e.store.Commit(context.Background(), ev, p.plan(i))
						if err != nil {
							failures.Add(1)
							t.Errorf("event %d copy %d: %v", i, c, err)
							return
						}
						outcomes[i][c] = res.Outcome
					}()
				}
				start.Done()
				go func() { done.Wait(); <-sem }()
			}
			wg.Wait()
			if failures.Load() > 0 {
				t.FailNow()
			}
			for i, o := range outcomes {
				accepted := 0
				for _, oc := range o {
					switch oc {
					case dedup.OutcomeAccepted:
						accepted++
					case dedup.OutcomeDuplicate:
					default:
						t.Fatalf("event %d: unexpected outcome %v", i, oc)
					}
				}
				if accepted != 1 {
					t.Fatalf("event %d was accepted %d times out of %d concurrent copies, want exactly 1", i, accepted, copies)
				}
			}
			if got := e.count(t, dedup.ClaimPrefix); got != events {
				t.Fatalf("%d claims, want %d", got, events)
			}
			wantShipments := 0
			if p.op == "TransactWriteItems" {
				wantShipments = events
			}
			if got := e.count(t, "ORDER#"); got != wantShipments {
				t.Fatalf("%d shipment records, want %d (one per event)", got, wantShipments)
			}
		})
	}
}

func TestBulkRedriveAdmitsOnlyTheUnseenEvents(t *testing.T) {
	t.Parallel()
	const events = 5000
	e := newEnv(t, nil)
	ctx := context.Background()
	run := func(ids []int, workers int) (accepted, duplicate int64) {
		var a, d atomic.Int64
		work := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					ev := orderEvent(i)
					ev.DeliveryID = fmt.Sprintf("redrive_%d", i)
					res, err := e.store.Commit(ctx, ev, orderPlan(i))
					if err != nil {
						t.Errorf("event %d: %v", i, err)
						continue
					}
					switch res.Outcome {
					case dedup.OutcomeAccepted:
						a.Add(1)
					case dedup.OutcomeDuplicate:
						d.Add(1)
					}
				}
			}()
		}
		for _, i := range ids {
			work <- i
		}
		close(work)
		wg.Wait()
		return a.Load(), d.Load()
	}

	// Before the outage: every other event was processed.
	var seen, all []int
	for i := range events {
		if i%2 == 0 {
			seen = append(seen, i)
		}
		all = append(all, i)
	}
	if a, d := run(seen, 16); a != events/2 || d != 0 {
		t.Fatalf("before the outage: %d accepted, %d duplicates; want %d and 0", a, d, events/2)
	}
	// The provider redrives everything, days later.
	e.clock.Advance(5 * 24 * time.Hour)
	e.counter.Reset()
	a, d := run(all, 16)
	if a != events/2 || d != events/2 {
		t.Fatalf("redrive: %d accepted, %d duplicates; want %d and %d", a, d, events/2, events/2)
	}
	if calls := e.counter.Total(); calls != events {
		t.Fatalf("redrive of %d events cost %d DynamoDB calls, want one per event", events, calls)
	}
	if got := e.count(t, "ORDER#"); got != events {
		t.Fatalf("%d shipments after the redrive, want %d", got, events)
	}
}

// TestExpiredClaimsAreReadmittedAndLiveOnesAreNot, and Store.Probe reads the claim condition's
// expiry as the write does: a duplicate in the second of expires_at, none a second later.
func TestExpiredClaimsAreReadmittedAndLiveOnesAreNot(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			keep := 48 * time.Hour
			e := newEnv(t, func(c *dedup.Config) {
				c.Sources["shop"] = dedup.Retention{RetryHorizon: 24 * time.Hour, RedriveWindow: 24 * time.Hour, Keep: keep}
			})
			ctx := context.Background()
			ev := orderEvent(7)
			if res, err := e.store.Commit(ctx, ev, p.plan(7)); err != nil || res.Outcome != dedup.OutcomeAccepted {
				t.Fatalf("first delivery: %+v, %v", res, err)
			}
			// Just before expiry the claim still holds: with the clock at x.9 s, keep - 800 ms
			// later is the second of expires_at itself, where "<" and "<=" part ways.
			e.clock.Advance(time.Duration(900e6-e.clock.Now().Nanosecond()) + keep - 800*time.Millisecond)
			if res, err := e.store.Probe(ctx, ev); err != nil || res.Outcome != dedup.OutcomeDuplicate {
				t.Fatalf("probe just before expiry: %+v, %v; want duplicate", res, err)
			}
			if res, err := e.store.Commit(ctx, ev, p.plan(7)); err != nil || res.Outcome != dedup.OutcomeDuplicate {
				t.Fatalf("just before expiry: %+v, %v; want duplicate", res, err)
			}
			// Past expiry, the item is still there (TTL deletion lags) but no longer counts.
			e.clock.Advance(time.Second)
			if e.claim(t, "shop", ev.ID) == nil {
				t.Fatal("the expired claim should still be present for this test to mean anything")
			}
			if res, err := e.store.Probe(ctx, ev); err != nil || res.Outcome != 0 || res.Calls != 1 {
				t.Fatalf("probe past expiry: %+v, %v; want no outcome in 1 call, for Commit to decide", res, err)
			}
			// The claim condition now passes. With effects, the shipment from the first
			// delivery still exists, so its own condition absorbs the event: the backstop
			// under an expired claim.
			want := dedup.OutcomeAccepted
			if p.op == "TransactWriteItems" {
				want = dedup.OutcomeAbsorbed
			}
			res, err := e.store.Commit(ctx, ev, p.plan(7))
			if err != nil || res.Outcome != want {
				t.Fatalf("after expiry: %+v, %v; want %v", res, err, want)
			}
			if got := e.claim(t, "shop", ev.ID).ExpiresAt; got != e.clock.Now().Add(keep).Unix() {
				t.Fatalf("re-admitted claim expires at %d, want a fresh retention from now", got)
			}
		})
	}
}

// TestAClaimLivesARetentionFromItsEventsTimeWhenThatIsAhead: a claim lives a retention from
// receipt, and a receiver refuses an event as too old a retention after its time: an event
// dated ahead of receipt (a provider's clock skew) would outlive its claim, and its signed body
// replayed between the two be claimed again. Its claim lives a retention from its time instead.
func TestAClaimLivesARetentionFromItsEventsTimeWhenThatIsAhead(t *testing.T) {
	t.Parallel()
	keep := 48 * time.Hour
	e := newEnv(t, func(c *dedup.Config) {
		c.Sources["shop"] = dedup.Retention{RetryHorizon: 24 * time.Hour, RedriveWindow: 24 * time.Hour, Keep: keep}
	})
	now := e.clock.Now()
	for i, c := range []struct {
		occurred time.Time
		expires  time.Time
	}{
		{time.Time{}, now.Add(keep)},
		{now.Add(-time.Hour), now.Add(keep)},
		{now.Add(time.Hour), now.Add(time.Hour + keep)},
	} {
		ev := orderEvent(100 + i)
		ev.OccurredAt = c.occurred
		if res, err := e.store.Commit(context.Background(), ev, dedup.Plan{}); err != nil || res.Outcome != dedup.OutcomeAccepted {
			t.Fatalf("event at %s: %+v, %v", c.occurred, res, err)
		}
		if got := e.claim(t, "shop", ev.ID).ExpiresAt; got != c.expires.Unix() {
			t.Errorf("event at %s, received at %s: its claim expires at %s, want %s", c.occurred, now, time.Unix(got, 0), c.expires)
		}
	}
}

func TestSameEventIDWithDifferentPayloadIsADuplicateAndFlagged(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var reports []dedup.Report
			var mu sync.Mutex
			e := newEnv(t, func(c *dedup.Config) {
				c.Observer = dedup.ObserverFunc(func(_ context.Context, r dedup.Report) {
					mu.Lock()
					reports = append(reports, r)
					mu.Unlock()
				})
			})
			ctx := context.Background()
			ev := orderEvent(3)
			if _, err := e.store.Commit(ctx, ev, p.plan(3)); err != nil {
				t.Fatal(err)
			}
			same := ev
			same.DeliveryID = "dlv_same"
			res, err := e.store.Commit(ctx, same, p.plan(3))
			if err != nil || res.Outcome != dedup.OutcomeDuplicate || res.PayloadMismatch {
				t.Fatalf("same payload: %+v, %v; want a duplicate without mismatch", res, err)
			}
			changed := ev
			changed.DeliveryID = "dlv_changed"
			changed.Payload = []byte(`{"event_id":"evt_000003","type":"order.paid","data":{"order_id":"ord_999999"}}`)
			res, err = e.store.Commit(ctx, changed, p.plan(3))
			if err != nil || res.Outcome != dedup.OutcomeDuplicate || !res.PayloadMismatch {
				t.Fatalf("changed payload: %+v, %v; want a duplicate with mismatch", res, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reports) != 3 || !reports[2].Result.PayloadMismatch || reports[2].DeliveryID != "dlv_changed" {
				t.Fatalf("observer saw %+v; want three reports, the last flagged", reports)
			}
		})
	}
}

func TestALostResponseStillReportsOurOwnCommitAsAccepted(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: p.op, N: 1}
			e := newEnv(t, nil, awstest.WithTransport(lose))
			res, err := e.store.Commit(context.Background(), orderEvent(11), p.plan(11))
			if err != nil {
				t.Fatal(err)
			}
			if lose.Lost() != 1 {
				t.Fatalf("%d responses lost, want 1: the test did not exercise a lost response", lose.Lost())
			}
			if res.Outcome != dedup.OutcomeAccepted {
				t.Fatalf("got %v after a lost response, want accepted: the retry found our own commit", res.Outcome)
			}
			// PutItem has no request token: only our commit token can recognise the write.
			// (A transaction's retry is answered by the engine's token idempotency where it has
			// one, MiniStack and DynamoDB; under moto, by the commit token too.)
			if p.op == "PutItem" && !res.Recovered {
				t.Fatal("the PutItem path must report the recovery")
			}
			if p.op == "TransactWriteItems" && e.count(t, "ORDER#") != 1 {
				t.Fatalf("%d shipments, want 1", e.count(t, "ORDER#"))
			}
			if e.count(t, dedup.ClaimPrefix) != 1 {
				t.Fatal("want exactly one claim")
			}
			// A genuine redelivery afterwards is still a duplicate.
			again := orderEvent(11)
			again.DeliveryID = "dlv_000011_b"
			if res, err := e.store.Commit(context.Background(), again, p.plan(11)); err != nil || res.Outcome != dedup.OutcomeDuplicate {
				t.Fatalf("redelivery: %+v, %v; want duplicate", res, err)
			}
		})
	}
}

func TestBackfilledEventsAreDuplicatesUntilTheirRetentionEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	processed := e.clock.Now().Add(-10 * 24 * time.Hour)
	wrote, err := e.store.Backfill(ctx, "shop", "evt_old", processed)
	if err != nil || !wrote {
		t.Fatalf("backfill: %v, %v", wrote, err)
	}
	if wrote, _ := e.store.Backfill(ctx, "shop", "evt_old", processed); wrote {
		t.Fatal("a second backfill must leave the claim alone")
	}
	ev := orderEvent(1)
	ev.ID = "evt_old"
	res, err := e.store.Commit(ctx, ev, orderPlan(1))
	if err != nil || res.Outcome != dedup.OutcomeDuplicate {
		t.Fatalf("redelivery of a backfilled event: %+v, %v; want duplicate", res, err)
	}
	if e.count(t, "ORDER#") != 0 {
		t.Fatal("a backfilled event's redelivery must not ship")
	}
	c := e.claim(t, "shop", "evt_old")
	if c.Outcome != dedup.OutcomeBackfilled || c.ExpiresAt != processed.Add(testRetention.Effective()).Unix() {
		t.Fatalf("claim %+v: want backfilled, expiring a retention after it was processed", c)
	}
	// Processed longer ago than the retention: nothing to claim.
	if wrote, err := e.store.Backfill(ctx, "shop", "evt_ancient", e.clock.Now().Add(-testRetention.Effective()-time.Hour)); wrote || err != nil {
		t.Fatalf("an event past its retention: wrote %v, %v", wrote, err)
	}
	if _, err := e.store.Backfill(ctx, "nobody", "evt_x", processed); !errors.Is(err, dedup.ErrInvalid) {
		t.Fatalf("unknown source: %v", err)
	}
}

func TestABackfillWhoseResponseIsLostStillCountsAsWritten(t *testing.T) {
	t.Parallel()
	lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "PutItem", N: 1}
	e := newEnv(t, nil, awstest.WithTransport(lose))
	wrote, err := e.store.Backfill(context.Background(), "shop", "evt_lost", e.clock.Now())
	if err != nil || !wrote || lose.Lost() != 1 {
		t.Fatalf("wrote %v, %v after %d lost responses; want written", wrote, err, lose.Lost())
	}
}
