package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
)

func TestRealStreamRecordsRunEachIntentOnceEvenWhenDuplicated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.commit(20)
	recs := e.records()
	if len(recs) != 20 || recs[0].EventName != "INSERT" {
		t.Fatalf("%d records (first %q), want 20 INSERTs from the emulator's stream", len(recs), recs[0].EventName)
	}
	w := e.worker(nil)
	// Duplicated stream records: the same batch twice, and every record twice within it.
	doubled := append(append([]events.DynamoDBEventRecord{}, recs...), recs...)
	for range 2 {
		resp, err := w.HandleStream(context.Background(), batch(doubled))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch: %v, failures %v", err, resp.BatchItemFailures)
		}
	}
	e.exactlyOnce(keys)
	if _, _, total := e.down.snapshot(); total != len(keys) {
		t.Fatalf("%d downstream calls, want %d: a done intent was called again", total, len(keys))
	}
	if s := e.statuses(); s[dedup.IntentDone] != len(keys) {
		t.Fatalf("statuses %v, want all %d done", s, len(keys))
	}
	for _, c := range e.claims() {
		if c.PendingShard != "" {
			t.Fatalf("claim %s still in the pending index after all its intents were done", c.EventID)
		}
	}
	// The worker's own updates produce MODIFY records; feeding them back does nothing.
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatal("MODIFY records of done claims must not fail")
	}
	if _, _, total := e.down.snapshot(); total != len(keys) {
		t.Fatal("MODIFY records of done claims called the downstream again")
	}
}

func TestTwoWorkersRacingOnTheSameRecordsCallOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.commit(30)
	recs := e.records()
	var wg sync.WaitGroup
	for range 4 {
		w := e.worker(nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := w.HandleStream(context.Background(), batch(recs)); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("batch: %v, %v", err, resp.BatchItemFailures)
			}
		}()
	}
	wg.Wait()
	e.exactlyOnce(keys)
	if _, _, total := e.down.snapshot(); total != len(keys) {
		t.Fatalf("%d downstream calls for %d intents: two workers ran one intent", total, len(keys))
	}
}

func TestTTLRemovalsAndEffectRecordsAreIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit(3)
	recs := e.records()
	for i := range recs {
		// What a TTL deletion looks like: REMOVE by the DynamoDB service principal.
		recs[i].EventName = "REMOVE"
		recs[i].UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
	}
	effect := events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "9", NewImage: map[string]events.DynamoDBAttributeValue{
		"pk": events.NewStringAttribute("ORDER#ord_1"), "sk": events.NewStringAttribute("SHIPMENT"),
	}}}
	resp, err := e.worker(nil).HandleStream(context.Background(), batch(append(recs, effect)))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatal(err, resp.BatchItemFailures)
	}
	if _, _, total := e.down.snapshot(); total != 0 {
		t.Fatalf("%d downstream calls, want none", total)
	}
}

func TestACrashAfterTheDownstreamCallIsAbsorbedByTheIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.commit(5)
	recs := e.records()
	// The worker reaches the downstream, then cannot record "done": every UpdateItem after the
	// leases fails, as if the function died between the call and the write.
	crashing := e.worker(nil, diesAfterTheCall())
	resp, _ := crashing.HandleStream(context.Background(), batch(recs))
	if len(resp.BatchItemFailures) != len(recs) {
		t.Fatalf("%d batch failures, want every record (%d): nothing could be recorded", len(resp.BatchItemFailures), len(recs))
	}
	if s := e.statuses(); s[dedup.IntentRunning] != len(keys) {
		t.Fatalf("statuses %v: want every intent left running under a lease", s)
	}
	// Lambda replays the failed records; while the leases hold, nobody runs them again.
	healthy := e.worker(nil)
	if resp, _ := healthy.HandleStream(context.Background(), batch(recs)); len(resp.BatchItemFailures) != 0 {
		t.Fatal("a replay during the lease must not fail")
	}
	if _, _, total := e.down.snapshot(); total != len(keys) {
		t.Fatalf("%d downstream calls during the lease, want %d", total, len(keys))
	}
	// The leases expire; the sweeper re-drives; the downstream sees each key a second time and
	// answers from its own dedup.
	e.advance(10 * time.Minute)
	rep, err := (&outbox.Sweeper{Worker: healthy}).Run(context.Background())
	if err != nil || rep.Summary[outbox.OutcomeDone] != len(keys) {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	calls, _, _ := e.down.snapshot()
	for _, k := range keys {
		if calls[k] != 2 {
			t.Fatalf("key %s called %d times, want 2 (before and after the crash)", k, calls[k])
		}
	}
	e.appliedOnce(keys)
}

func TestDownstreamFailuresAndTimeoutsAreRetriedUntilDone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.commit(30)
	// 30% of calls fail: every tenth call times out after the effect, two in ten answer 500/429.
	e.down.fail = func(n int, _ string) (int, time.Duration) {
		switch n % 10 {
		case 3:
			return 0, 400 * time.Millisecond // applied, then too slow: the executor gives up
		case 6:
			return http.StatusInternalServerError, 0
		case 9:
			return http.StatusTooManyRequests, 0
		}
		return 0, 0
	}
	w := e.worker(func(c *outbox.Config) {
		c.Executors["email"] = &outbox.HTTPExecutor{URL: e.down.URL, Timeout: 150 * time.Millisecond}
		c.Executors["http:fulfilment"] = c.Executors["email"]
	})
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatal("downstream failures are recorded in the claim, not batch failures")
	}
	if s := e.statuses(); s[dedup.IntentPending] == 0 {
		t.Fatalf("statuses %v: the injected failures should have left some intents pending", s)
	}
	sweeper := &outbox.Sweeper{Worker: w}
	for round := 0; e.statuses()[dedup.IntentDone] < len(keys); round++ {
		if round == 10 {
			t.Fatalf("not done after 10 sweeps: %v", e.statuses())
		}
		e.advance(time.Minute) // past the backoff
		if _, err := sweeper.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	e.appliedOnce(keys)
	for _, c := range e.claims() {
		for name, in := range c.Intents {
			if in.Attempts > 1 && in.LastError == "" {
				t.Fatalf("%s/%s took %d attempts but recorded no error", c.EventID, name, in.Attempts)
			}
		}
	}
}

func TestPermanentFailuresAreParkedAndLeftAloneBySweeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit(4)
	e.down.fail = func(_ int, key string) (int, time.Duration) {
		if strings.Contains(key, "evt_0002:email.send") {
			return http.StatusUnprocessableEntity, 0
		}
		return 0, 0
	}
	var m countingMetrics
	w := e.worker(func(c *outbox.Config) { c.Metrics = &m })
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatal("a permanent failure is parked, not replayed")
	}
	s := e.statuses()
	if s[dedup.IntentParked] != 1 || s[dedup.IntentDone] != 7 {
		t.Fatalf("statuses %v, want 1 parked and 7 done", s)
	}
	var parked *dedup.Claim
	for _, c := range e.claims() {
		if c.EventID == "evt_0002" {
			parked = c
		}
	}
	if in := parked.Intents["email.send"]; !strings.Contains(in.LastError, "422") || parked.PendingShard != dedup.ParkedShardFor(dedup.PendingShard(parked.PK)) {
		t.Fatalf("parked intent %+v under %q: want its error recorded and the claim under its parked shard", in, parked.PendingShard)
	}
	_, _, before := e.down.snapshot()
	e.advance(time.Hour)
	sweeper := &outbox.Sweeper{Worker: w}
	for range 2 {
		rep, err := sweeper.Run(context.Background())
		if err != nil || rep.Parked != 1 || rep.Claims != 0 {
			t.Fatalf("sweep: %+v, %v; want one parked claim counted, and no claim read", rep, err)
		}
	}
	if _, _, after := e.down.snapshot(); after != before {
		t.Fatal("a sweep re-drove a parked intent")
	}
	if m.sweeps == 0 || m.lastParked != 1 || m.outcomes[outbox.OutcomeParked] != 1 {
		t.Fatalf("metrics %v / %d sweeps / %d parked: want parked counted and the sweep gauge at 1", m.outcomes, m.sweeps, m.lastParked)
	}
}

func TestAttemptsRunOutIntoParked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit(1)
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusServiceUnavailable, 0 }
	w := e.worker(func(c *outbox.Config) { c.MaxAttempts = 3 })
	w.HandleStream(context.Background(), batch(e.records()))
	sweeper := &outbox.Sweeper{Worker: w}
	for range 5 {
		e.advance(time.Minute)
		if _, err := sweeper.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range e.claims() {
		for name, in := range c.Intents {
			if in.Status != dedup.IntentParked || in.Attempts != 3 {
				t.Fatalf("%s: %+v, want parked after exactly 3 attempts", name, in)
			}
		}
	}
}

// An intent whose workers stop mid-call (between the call and its record) spends its budget
// as failures do: each takeover of an expired lease is an attempt, and the lease past the
// budget parks it without a call, saying why. Attempts that recorded a failure count too.
func TestAnIntentWhoseWorkersStopMidCallIsParkedWhenItsBudgetIsSpent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	failures := map[string]int{} // key -> its first calls that fail (503)
	var mu sync.Mutex
	e.down.fail = func(_ int, key string) (int, time.Duration) {
		calls, _, _ := e.down.snapshot()
		mu.Lock()
		defer mu.Unlock()
		if calls[key] <= failures[key] {
			return http.StatusServiceUnavailable, 0
		}
		return 0, 0
	}
	ctx := context.Background()
	for _, c := range []struct{ budget, failures int }{{1, 0}, {3, 0}, {3, 1}, {4, 3}} {
		id := fmt.Sprintf("evt_stopped_%d_%d", c.budget, c.failures)
		key := dedup.IdempotencyKey("shop", id, "email.send")
		mu.Lock()
		failures[key] = c.failures
		mu.Unlock()
		e.commitOne(id)
		budget := func(cfg *outbox.Config) { cfg.MaxAttempts = c.budget }
		recording, stopping := e.worker(budget), e.worker(budget, diesAfterTheCall())
		for i := range c.budget {
			w := stopping
			if i < c.failures {
				w = recording
			}
			_, _ = w.Process(ctx, e.claim(id))
			e.advance(time.Minute) // past the backoff, and past the lease of a worker that stopped
		}
		if _, err := recording.Process(ctx, e.claim(id)); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		in := e.claim(id).Intents["email.send"]
		calls, _, _ := e.down.snapshot()
		if calls[key] != c.budget || in.Status != dedup.IntentParked || in.Attempts != c.budget+1 || !strings.Contains(in.LastError, "recorded no outcome") {
			t.Fatalf("%s: %d calls, intent %+v; want %d calls, then the lease past the budget parked without one, saying why",
				id, calls[key], in, c.budget)
		}
	}
}

func TestTheSweeperRedrivesAStuckIntentButNotAFreshOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.commit(2) // the stream path never ran: both claims are stuck
	w := e.worker(nil)
	sweeper := &outbox.Sweeper{Worker: w, MinAge: 2 * time.Minute}
	if rep, _ := sweeper.Run(context.Background()); rep.Claims != 0 {
		t.Fatalf("sweep of fresh claims: %+v; the stream path is still on them", rep)
	}
	e.advance(3 * time.Minute)
	rep, err := sweeper.Run(context.Background())
	if err != nil || rep.Claims != 2 || rep.Summary[outbox.OutcomeDone] != 4 {
		t.Fatalf("sweep: %+v, %v; want 2 claims and 4 intents done", rep, err)
	}
	e.exactlyOnce(keys)
	if rep, _ := sweeper.Run(context.Background()); rep.Claims != 0 {
		t.Fatalf("done claims must leave the pending index: %+v", rep)
	}
}

func TestPartialBatchResponsesNameExactlyTheFailedRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit(6)
	recs := e.records()
	// DynamoDB fails every write about evt_0003 (and only it).
	inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: -1, Status: 500,
		Body: `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}`, Match: "evt_0003"}
	resp, err := e.worker(nil, awstest.WithTransport(inject)).HandleStream(context.Background(), batch(recs))
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, r := range recs {
		if r.Change.NewImage["event_id"].String() == "evt_0003" {
			want = r.Change.SequenceNumber
		}
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != want {
		t.Fatalf("failures %v, want exactly [%s]", resp.BatchItemFailures, want)
	}
	// The replay of just that record, once DynamoDB is back, finishes the batch.
	var replay []events.DynamoDBEventRecord
	for _, r := range recs {
		if r.Change.SequenceNumber == want {
			replay = append(replay, r)
		}
	}
	if resp, _ := e.worker(nil).HandleStream(context.Background(), batch(replay)); len(resp.BatchItemFailures) != 0 {
		t.Fatal("the replay failed")
	}
	if s := e.statuses(); s[dedup.IntentDone] != 12 {
		t.Fatalf("statuses %v, want all 12 intents done", s)
	}
}

type countingMetrics struct {
	mu         sync.Mutex
	outcomes   map[string]int
	sweeps     int
	lastParked int
}

func (m *countingMetrics) Intent(_, outcome string, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.outcomes == nil {
		m.outcomes = map[string]int{}
	}
	m.outcomes[outcome]++
}

func (m *countingMetrics) Sweep(r outbox.SweepReport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweeps++
	m.lastParked = r.Parked
}

func TestAClaimReadmittedAfterExpiryRunsItsIntentsFromTheModifyRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	commit := e.readmittable("evt_again")
	w := e.worker(nil)
	commit()
	w.HandleStream(context.Background(), batch(e.records()))
	e.advance(2 * time.Hour) // the claim expired; TTL has not deleted it yet
	commit()
	recs := e.records()
	if recs[len(recs)-1].EventName != "MODIFY" {
		t.Fatalf("the re-admission should be a MODIFY record, got %s", recs[len(recs)-1].EventName)
	}
	if resp, _ := w.HandleStream(context.Background(), batch(recs)); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	if s := e.statuses(); s[dedup.IntentDone] != 1 || len(s) != 1 {
		t.Fatalf("statuses %v: the re-admitted claim's intent should be done", s)
	}
	if calls, applied, _ := e.down.snapshot(); calls["shop:evt_again:email.send"] != 2 || applied["shop:evt_again:email.send"] != 1 {
		t.Fatalf("calls %v applied %v: want the same key twice, applied once by the downstream", calls, applied)
	}
}

func TestAnOperatorRedriveGivesAParkedIntentAFreshBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.commit(1)
	broken := true
	var mu sync.Mutex
	e.down.fail = func(int, string) (int, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if broken {
			return http.StatusServiceUnavailable, 0
		}
		return 0, 0
	}
	w := e.worker(func(c *outbox.Config) { c.MaxAttempts = 2 })
	w.HandleStream(context.Background(), batch(e.records()))
	sweeper := &outbox.Sweeper{Worker: w}
	for range 3 {
		e.advance(time.Minute)
		sweeper.Run(context.Background())
	}
	claim := e.claims()[0]
	if in := claim.Intents["email.send"]; in.Status != dedup.IntentParked || in.Attempts != 2 {
		t.Fatalf("%+v: want parked after 2 attempts", in)
	}
	mu.Lock()
	broken = false // the operator fixed the downstream
	mu.Unlock()
	for name := range claim.Intents {
		if err := redriveAt(context.Background(), e.client, e.table, claim, name, e.now()); err != nil {
			t.Fatalf("redrive %s: %v", name, err)
		}
	}
	if err := redriveAt(context.Background(), e.client, e.table, claim, "email.send", e.now()); err != dedup.ErrNotParked {
		t.Fatalf("a second redrive of a pending intent: %v, want ErrNotParked", err)
	}
	// The redrive's MODIFY record reaches the worker, which runs both intents under a fresh
	// budget (one more failure would not have parked them at once).
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	if s := e.statuses(); s[dedup.IntentDone] != 2 {
		t.Fatalf("statuses %v, want both done after the redrive", s)
	}
	e.appliedOnce(keys)
	if c := e.claims()[0]; c.PendingShard != "" || c.Intents["email.send"].Attempts != 3 {
		t.Fatalf("claim %+v: want it out of the pending index, the fencing token still counting up", c.Intents)
	}
}

func TestALostLeaseResponseStillRunsTheIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.commit(2)
	// The first answer to a lease (and to nothing else) is lost; the SDK retries it.
	lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: 1}
	w := e.worker(nil, awstest.WithTransport(lose))
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	if lose.Lost() != 1 {
		t.Fatal("no response was lost")
	}
	if s := e.statuses(); s[dedup.IntentDone] != len(keys) {
		t.Fatalf("statuses %v: the worker must recognise its own lease and run every intent", s)
	}
	e.exactlyOnce(keys)
}

// TestARedrivenIntentStillFailingGetsItsWholeBudgetAgain: the downstream is still broken after
// the redrive; the intent is retried MaxAttempts times again before it parks, not parked at its
// first failure.
func TestARedrivenIntentStillFailingGetsItsWholeBudgetAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_budget")
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusServiceUnavailable, 0 }
	const budget = 3
	w := e.worker(func(c *outbox.Config) { c.MaxAttempts = budget })
	sweeper := &outbox.Sweeper{Worker: w}
	run := func() {
		t.Helper()
		e.advance(3 * time.Minute) // past the backoff and the sweeper's minimum age
		if _, err := sweeper.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	w.HandleStream(context.Background(), batch(e.records()))
	for range budget {
		run()
	}
	if in := e.claim("evt_budget").Intents["email.send"]; in.Status != dedup.IntentParked || in.Attempts != budget {
		t.Fatalf("%+v: want parked after %d attempts", in, budget)
	}
	if err := redriveAt(context.Background(), e.client, e.table, e.claim("evt_budget"), "email.send", e.now()); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= budget; i++ {
		run()
		in := e.claim("evt_budget").Intents["email.send"]
		want := dedup.IntentPending
		if i == budget {
			want = dedup.IntentParked
		}
		if in.Status != want || in.Attempts != budget+i {
			t.Fatalf("failure %d after the redrive: %+v, want %s at attempt %d", i, in, want, budget+i)
		}
	}
	if calls, _, _ := e.down.snapshot(); calls["shop:evt_budget:email.send"] != 2*budget {
		t.Fatalf("%d calls, want %d: one budget before the redrive, one after", calls["shop:evt_budget:email.send"], 2*budget)
	}
}

// A failure's backoff counts the attempts spent since the intent's budget was last renewed:
// after an operator's redrive, and past leases given back unused, the next failure is backed
// off as the first, not as the fencing token's count of every lease since the commit.
func TestABackoffCountsTheAttemptsSpentSinceTheBudgetWasRenewed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusServiceUnavailable, 0 }
	const budget = 3
	var mu sync.Mutex
	var asked []int
	w := e.worker(func(c *outbox.Config) {
		c.MaxAttempts = budget
		c.Backoff = func(n int) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, n)
			return 10 * time.Second
		}
	})
	ctx := context.Background()
	claims := &dedup.Claims{API: e.client, Table: e.table, Now: e.now}
	fail := func(id string, times int) []int {
		t.Helper()
		mu.Lock()
		asked = nil
		mu.Unlock()
		for range times {
			if _, err := w.Process(ctx, e.claim(id)); err != nil {
				t.Fatal(err)
			}
			e.advance(time.Minute)
		}
		mu.Lock()
		defer mu.Unlock()
		return asked
	}
	for _, c := range []struct {
		name  string
		renew func(id string) // what comes before the failures
	}{
		{"fresh", func(string) {}},
		{"after a redrive", func(id string) {
			fail(id, budget) // parked
			if err := redriveAt(ctx, e.client, e.table, e.claim(id), "email.send", e.now()); err != nil {
				t.Fatal(err)
			}
		}},
		{"after leases given back", func(id string) {
			for range 2 {
				l, err := claims.Lease(ctx, e.claim(id), "email.send", dedup.LeaseOptions{For: time.Minute})
				if err != nil || l == nil {
					t.Fatal(l, err)
				}
				if err := claims.GiveBack(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"after a redrive and a lease given back", func(id string) {
			fail(id, budget)
			if err := redriveAt(ctx, e.client, e.table, e.claim(id), "email.send", e.now()); err != nil {
				t.Fatal(err)
			}
			l, err := claims.Lease(ctx, e.claim(id), "email.send", dedup.LeaseOptions{For: time.Minute})
			if err != nil || l == nil {
				t.Fatal(l, err)
			}
			if err := claims.GiveBack(ctx, l); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		id := "evt_backoff_" + strings.ReplaceAll(c.name, " ", "_")
		e.commitOne(id)
		c.renew(id)
		if got := fail(id, budget-1); len(got) != budget-1 || got[0] != 1 || got[1] != 2 {
			t.Fatalf("%s: the failures were backed off as failures %v, want [1 2] (attempts %d)", c.name, got, e.claim(id).Intents["email.send"].Attempts)
		}
	}
}

// A retry is due before its claim expires, or it is not a retry: DynamoDB's TTL deletes the
// claim at expires_at, its intent pending with it, never parked and never run. A failure whose
// next attempt would be due at or after the expiry parks, saying why, whatever budget is left.
func TestAFailureWhoseRetryWouldOutliveItsClaimIsParked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusServiceUnavailable, 0 }
	for _, c := range []struct {
		name  string
		after time.Duration // the next attempt's due time, from the claim's expiry
		want  string
	}{
		{"due a moment before", -time.Millisecond, dedup.IntentPending},
		{"due as it expires", 0, dedup.IntentParked},
		{"due after", time.Hour, dedup.IntentParked},
	} {
		id := "evt_expiry_" + strings.ReplaceAll(c.name, " ", "_")
		e.commitOne(id)
		expires := time.Unix(e.claim(id).ExpiresAt, 0)
		now := expires.Add(-5 * time.Minute) // the worker's clock, held still
		w := e.worker(func(cfg *outbox.Config) {
			cfg.MaxAttempts = 100000
			cfg.Now = func() time.Time { return now }
			cfg.Backoff = func(int) time.Duration { return expires.Add(c.after).Sub(now) }
		})
		if _, err := w.Process(context.Background(), e.claim(id)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		in := e.claim(id).Intents["email.send"]
		if in.Status != c.want || in.Status == dedup.IntentPending && in.NextAttemptAt != expires.Add(c.after).UnixMilli() ||
			in.Status == dedup.IntentParked && !strings.Contains(in.LastError, "claim expires") {
			t.Fatalf("%s: %+v, want %s (the claim expires at %s)", c.name, in, c.want, expires.UTC().Format(time.RFC3339))
		}
	}
}

// RedriveBy records who re-drove an intent and when, in the redrive's own write; an invalid
// name writes nothing; Redrive records no one.
func TestARedriveByRecordsWhoAndWhen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit(1)
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusUnprocessableEntity, 0 }
	w := e.worker(nil)
	w.HandleStream(context.Background(), batch(e.records()))
	claim := e.claims()[0]
	for _, bad := range []string{"", strings.Repeat("a", dedup.MaxRedrivenBy+1), "ada\nroot", "\xff"} {
		var inv *dedup.InvalidError
		if err := redriveByAt(context.Background(), e.client, e.table, claim, "email.send", e.now(), bad); !errors.As(err, &inv) || inv.Field != "redriven_by" {
			t.Fatalf("by %q: %v, want an InvalidError naming redriven_by", bad, err)
		}
	}
	if in := e.claims()[0].Intents["email.send"]; in.Status != dedup.IntentParked {
		t.Fatalf("an invalid redrive wrote: %+v", in)
	}
	at := e.now()
	if err := redriveByAt(context.Background(), e.client, e.table, claim, "email.send", at, "ada (console)"); err != nil {
		t.Fatal(err)
	}
	if err := redriveAt(context.Background(), e.client, e.table, claim, "fulfilment.create", at); err != nil {
		t.Fatal(err)
	}
	after := e.claims()[0]
	if in := after.Intents["email.send"]; in.Status != dedup.IntentPending || in.RedrivenBy != "ada (console)" || in.RedrivenAt != at.UTC().Format(time.RFC3339) {
		t.Fatalf("%+v: want it pending, re-driven by ada at %s", in, at)
	}
	if in := after.Intents["fulfilment.create"]; in.Status != dedup.IntentPending || in.RedrivenBy != "" || in.RedrivenAt != "" {
		t.Fatalf("%+v: Redrive records no one", in)
	}
}

// An application's executor that is not Bounded gets the documented default bound
// (outbox.DefaultMaxDuration, the timeout PlanTimings assumes for it, so the stack's outbox
// function fits it): it runs from an invocation of the stack's default timeout (a minute), with
// the default lease, rather than being postponed for want of the whole lease every time.
func TestAnExecutorThatIsNotBoundedRunsWithinTheDefaultBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_unbounded")
	var calls int
	w := e.worker(func(c *outbox.Config) {
		c.Lease, c.Margin = 0, 0 // the defaults, as launch sets them for a stack without slow targets
		c.Executors = map[string]outbox.Executor{"email": outbox.ExecutorFunc(func(ctx context.Context, _ outbox.Task) error {
			calls++
			if d, ok := ctx.Deadline(); !ok || time.Until(d) > outbox.DefaultMaxDuration {
				t.Errorf("the call's context ends %v from now, want within %s", time.Until(d), outbox.DefaultMaxDuration)
			}
			return nil
		})}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the stack's outbox function
	defer cancel()
	sum, err := w.Process(ctx, e.claim("evt_unbounded"))
	if err != nil || sum[outbox.OutcomeDone] != 1 || calls != 1 {
		t.Fatalf("%v %v, %d calls: want the intent done from this invocation", sum, err, calls)
	}
}
