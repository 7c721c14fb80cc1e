package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/internal/seeds"
	"github.com/oncehook/oncehook/outbox"
)

// TestRandomizedSchedulesKeepBothPromises races, for each seed, four workers (one of them dying
// after every call, before recording it), the sweeper and wake-ups on the same claims: stream batches delivered at random (duplicated, reordered),
// sweeps, wake-ups delivered late or twice, the clock jumping past leases and backoffs while
// calls are under way, DynamoDB answering with throttles, 500s and lost answers (the write
// applied, the answer reset), and a downstream failing, timing out after applying, or slow.
// Each event has an at-least-once intent and an at-most-once one. After the schedule, a
// fault-free sweeper every sweep period finishes what is left. The invariants, checked for
// every seed:
//   - every intent ends done or parked, in at most MaxAttempts sweep periods;
//   - an at-most-once intent reached the downstream at most once per incarnation of its claim
//     and per redrive (as the table's stream shows what took), and never twice under one lease;
//   - a done at-least-once intent reached it at least once, and its effect was applied once;
//   - after each fault-free sweep, nothing is pending past its due time;
//   - every claim ends where the pending index says: under a due shard while an intent is
//     open and none parked, its due-parked shard while one is open and one parked, under its
//     parked shard once none is open and one is parked, out of it when all are done;
//   - no two calls to the max_in_flight 1 target are under way at the downstream at once
//     while the clock stands still (a jump of the clock frees a slot held on it, legitimately).
//
// Operators also resolve parked intents while the workers race. Claims expire and are admitted again (a provider's redrive after the retention), and some
// stream batches are the table's real stream as the deployed filter passes it (the MODIFY
// records of redrives and re-admissions among them).
//
// The at-most-once target has max_in_flight 1 and the at-least-once one a rate, so limits
// hold calls back, give leases back and keep slots; an operator re-drives parked intents while
// the workers race (an at-most-once intent may then reach the downstream once more per
// redrive, never more); every invocation has a deadline; and some DynamoDB answers come late.
//
// The seeds are new on every run (ONCEHOOK_SCHEDULE_SEED=n replays from seed n); a seed fixes
// the schedule's plan exactly and the faults' draws as a sequence, while the goroutines'
// interleaving (which call meets which fault) stays the machine's.
func TestRandomizedSchedulesKeepBothPromises(t *testing.T) {
	t.Parallel()
	for _, seed := range seeds.Schedule(t, 8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { randomSchedule(t, seed, httpTarget) })
	}
}

// scheduleTarget is the downstream a randomized schedule calls: executors for an at-least-once
// and an at-most-once target that fail at random (from draw) until heal is called, and the
// downstream's own count of the calls that reached it and of the effects it applied per key.
type scheduleTarget struct {
	alo, amo outbox.Executor
	heal     func()
	seen     func() (calls, applied map[string]int, total int)
}

// httpTarget is the env's HTTP downstream, failing with a 500, a 503, or applying and then
// answering too late for the executor's timeout.
func httpTarget(t *testing.T, e *env, draw func(int) int) scheduleTarget {
	healthy := false
	var hmu sync.Mutex
	e.down.fail = func(int, string) (int, time.Duration) {
		hmu.Lock()
		h := healthy
		hmu.Unlock()
		if h {
			return 0, 0
		}
		switch draw(8) {
		case 0:
			return http.StatusInternalServerError, 0
		case 1:
			return http.StatusServiceUnavailable, 0
		case 2:
			return 0, 700 * time.Millisecond // applied, then the answer times out
		}
		return 0, 0
	}
	x := &outbox.HTTPExecutor{URL: e.down.URL, Timeout: 400 * time.Millisecond}
	return scheduleTarget{alo: x, amo: outbox.AtMostOnce(x), seen: e.down.snapshot, heal: func() {
		hmu.Lock()
		healthy = true
		hmu.Unlock()
	}}
}

func randomSchedule(t *testing.T, seed uint64, target func(*testing.T, *env, func(int) int) scheduleTarget) {
	t.Parallel()
	e := newEnv(t)
	// The plan (which worker does what, with which records, when the clock jumps) is drawn
	// from the seed in this goroutine alone, before each round runs: a seed replays it exactly.
	// The faults' draws (the downstream's, the late answers') come from a second stream of the
	// same seed, in the order the goroutines' interleaving asks for them.
	plan := rand.New(rand.NewPCG(seed, 2121)).IntN
	r := rand.New(rand.NewPCG(seed, 4242))
	var rmu sync.Mutex
	draw := func(n int) int {
		rmu.Lock()
		defer rmu.Unlock()
		return r.IntN(n)
	}
	const nEvents, maxAttempts = 5, 4
	var ids []string
	for i := range nEvents {
		id := fmt.Sprintf("evt_s%d_%d", seed, i)
		ids = append(ids, id)
		e.commitOne(id,
			dedup.Intent{Name: "alo", Target: "alo", Payload: []byte(`{}`)},
			dedup.Intent{Name: "amo", Target: "amo", Payload: []byte(`{}`)})
	}
	down := target(t, e, draw)

	// Wake-ups are kept, to be delivered late, twice, or never.
	var wmu sync.Mutex
	var wakeups []string
	sched := schedulerFunc(func(_ context.Context, pk string, due time.Time) error {
		wmu.Lock()
		defer wmu.Unlock()
		wakeups = append(wakeups, fmt.Sprintf(`{"pk":%q,"due":%d}`, pk, due.UnixMilli()))
		return nil
	})
	// Every worker's log of its turns (each intent's attempt, outcome and error), for a failure
	// to show; one handler, which serialises its writes.
	var logs bytes.Buffer
	turns := slog.New(slog.NewTextHandler(&logs, nil))
	configure := func(c *outbox.Config) {
		c.Executors = map[string]outbox.Executor{"alo": down.alo, "amo": down.amo}
		c.Limits = map[string]outbox.Limit{"amo": {MaxInFlight: 1}, "alo": {Rate: 40}}
		c.Lease, c.Margin = 2*time.Second, 300*time.Millisecond
		c.MaxAttempts = maxAttempts
		c.Backoff = func(int) time.Duration { return 5 * time.Second }
		c.Scheduler = sched
		c.Logger = turns
	}
	var workers []*outbox.Worker
	for i := range 3 {
		tr := faults.NewTransport(awstest.BaseTransport(), faults.Spec{
			DynamoDB: faults.Rates{Throttle: 0.05, Error: 0.05, Lose: 0.08}, Seed: seed*10 + uint64(i) + 1})
		workers = append(workers, e.worker(configure, awstest.WithTransport(&lateAnswers{next: tr, draw: draw})))
	}
	// A worker that dies after each call, before recording it: its intents stay running
	// under a lease that runs out.
	workers = append(workers, e.worker(configure, diesAfterTheCall()))
	records := e.records()
	operator := &dedup.Claims{API: e.client, Table: e.table, Now: e.now}
	var redmu sync.Mutex
	redriven := map[string]int{} // idempotency key -> redrives that took

	type step struct {
		worker, kind, pick, ms int
		deadline               time.Duration
		recs                   []events.DynamoDBEventRecord
		live                   []int // picks among the stream's records as the deployed filter passes them
	}
	var readmu sync.Mutex
	readmitted := map[string]int{} // event id -> claims of it admitted again after expiry
	for range 20 {
		steps := make([]step, 1+plan(3))
		for i := range steps {
			st := step{worker: plan(len(workers)), kind: plan(8), pick: plan(1 << 20), ms: plan(4000),
				// An invocation's deadline: room for a call and its margins, or a little more.
				deadline: time.Duration(1500+plan(2500)) * time.Millisecond}
			for range 1 + plan(len(records)) { // a stream batch: a random selection, in random order, maybe twice
				st.recs = append(st.recs, records[plan(len(records))])
			}
			for range 1 + plan(8) {
				st.live = append(st.live, plan(1<<20))
			}
			steps[i] = st
		}
		// The stream as the mapping delivers it: every record the table wrote so far (MODIFY
		// records of redrives and re-admissions among them) that the deployed filter passes.
		var live []events.DynamoDBEventRecord
		for _, st := range steps {
			if st.kind == 6 && live == nil {
				for _, r := range e.records() {
					if passes(t, r) {
						live = append(live, r)
					}
				}
			}
		}
		for i, st := range steps {
			if st.kind == 6 && len(live) > 0 {
				steps[i].recs = steps[i].recs[:0]
				for _, p := range st.live {
					steps[i].recs = append(steps[i].recs, live[p%len(live)])
				}
			}
		}
		var wg sync.WaitGroup
		for _, st := range steps {
			w := workers[st.worker]
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), st.deadline)
				defer cancel()
				switch st.kind {
				case 0, 1, 6:
					_, _ = w.HandleStream(ctx, batch(st.recs))
				case 2:
					_, _ = (&outbox.Sweeper{Worker: w, MinAge: time.Second}).Run(ctx)
				case 3: // a wake-up, perhaps one delivered already
					wmu.Lock()
					var body string
					if len(wakeups) > 0 {
						body = wakeups[st.pick%len(wakeups)]
					}
					wmu.Unlock()
					if body != "" {
						_, _ = w.HandleRetries(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: body}}})
					}
				case 4: // time passes: leases and backoffs run out, perhaps mid-call
					e.advance(time.Duration(st.ms) * time.Millisecond)
				case 7: // the claim expires, and a redrive of the provider's brings the event again
					id := ids[st.pick%len(ids)]
					e.advance(45 * 24 * time.Hour)
					res, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
						dedup.Plan{Intents: []dedup.Intent{{Name: "alo", Target: "alo", Payload: []byte(`{}`)}, {Name: "amo", Target: "amo", Payload: []byte(`{}`)}}})
					if err == nil && res.Outcome == dedup.OutcomeAccepted {
						readmu.Lock()
						readmitted[id]++
						readmu.Unlock()
					}
				case 5: // an operator re-drives (or, one time in four, resolves) what is parked in one claim, as it was read
					id := ids[st.pick%len(ids)]
					c := e.claim(id)
					for _, name := range []string{"alo", "amo"} {
						if c.Intents[name].Status != dedup.IntentParked {
							continue
						}
						if st.ms%4 == 0 {
							_ = operator.Resolve(ctx, c, name, "chaos (test)", "closed while the workers race")
							continue
						}
						if err := operator.RedriveBy(ctx, c, name, "chaos (test)"); err == nil {
							redmu.Lock()
							redriven[dedup.IdempotencyKey("shop", id, name)]++
							redmu.Unlock()
						}
					}
				}
			})
		}
		wg.Wait()
	}

	// The safety net alone, fault-free, every sweep period (past the lock a faulted run may
	// have left, 15 minutes at most).
	down.heal()
	sweeper := &outbox.Sweeper{Worker: e.worker(configure), MinAge: time.Second}
	const period = 16 * time.Minute
	finished := false
	for round := 0; round <= maxAttempts+1 && !finished; round++ {
		e.advance(period)
		if _, err := sweeper.Run(context.Background()); err != nil {
			t.Fatalf("seed %d: fault-free sweep: %v", seed, err)
		}
		finished = true
		now := e.now().UnixMilli()
		for _, id := range ids {
			for name, in := range e.claim(id).Intents {
				switch in.Status {
				case dedup.IntentDone, dedup.IntentParked, dedup.IntentResolved:
				case dedup.IntentPending, dedup.IntentRunning:
					finished = false
					if in.Status == dedup.IntentPending && in.NextAttemptAt <= now {
						t.Fatalf("seed %d: %s/%s pending past its due time after a fault-free sweep: %+v", seed, id, name, in)
					}
				}
			}
		}
	}
	calls, applied, total := down.seen()
	ends := map[string]int{}
	for _, id := range ids {
		for name, in := range e.claim(id).Intents {
			ends[name+" "+in.Status]++
		}
	}
	// What took is counted from the table's stream, not from the steps' answers: a
	// re-admission or a redrive whose answer its step's deadline cut off (or a slow emulator
	// lost) took all the same, and the downstream may then legitimately be called once more.
	stories := intentStories(t, e.records())
	var readmissions, redrives int
	for key, story := range stories {
		incarnations, r, _ := took(story)
		redrives += r
		if strings.HasSuffix(key, ":amo") {
			readmissions += incarnations - 1
		}
	}
	t.Logf("seed %d: %d downstream calls; %v; %d redrives, %d re-admissions (their steps heard of %d and %d)",
		seed, total, ends, redrives, readmissions, sum(redriven), sum(readmitted))
	for _, id := range ids {
		c := e.claim(id)
		for name, in := range c.Intents {
			key := dedup.IdempotencyKey("shop", id, name)
			incarnations, redrives, leases := took(stories[key])
			switch {
			case in.Status != dedup.IntentDone && in.Status != dedup.IntentParked && in.Status != dedup.IntentResolved:
				t.Errorf("seed %d: %s/%s ends %s, want done, parked or resolved: %+v", seed, id, name, in.Status, in)
			case name == "amo" && calls[key] > min(incarnations+redrives, leases):
				// Once per incarnation of its claim and per redrive, and never more than once per
				// lease. Its writes (commit token, attempts, lease owner) and the workers' turns
				// tell a second send of one lease from sends of two incarnations or redrives.
				var writes []string
				for _, s := range stories[key] {
					writes = append(writes, s.String())
				}
				t.Errorf("seed %d: at-most-once %s/%s reached the downstream %d times: %d claim incarnations, %d redrives "+
					"(their steps heard of %d re-admissions and %d redrives), %d leases: %+v\n"+
					"its writes (commit token, status@attempts, lease owner, redrive):\n\t%s\nits turns:\n\t%s",
					seed, id, name, calls[key], incarnations, redrives, readmitted[id], redriven[key], leases, in,
					strings.Join(writes, "\n\t"), strings.Join(turnsOf(logs.String(), id, name), "\n\t"))
			case name == "alo" && in.Status == dedup.IntentDone && (calls[key] < 1 || applied[key] != 1):
				t.Errorf("seed %d: at-least-once %s/%s done with %d calls, %d effects: %+v", seed, id, name, calls[key], applied[key], in)
			}
		}
	}
	if a, b, ok := e.overInFlight(":amo", time.Second); ok {
		t.Errorf("seed %d: two calls to the max_in_flight 1 target under way at once, with the clock still: %s from %s, %s from %s",
			seed, a.key, a.start.Format(time.StampMilli), b.key, b.start.Format(time.StampMilli))
	}
	for _, id := range ids {
		c := e.claim(id)
		if want := indexPlace(c); c.PendingShard != want {
			t.Errorf("seed %d: %s is under %q in the pending index, want %q: %+v", seed, id, c.PendingShard, want, c.Intents)
		}
	}
}

// overInFlight finds two requests to keys ending in suffix under way at once at the downstream
// while the test's clock stood still from a little (lead) before the first began until the
// second began: a slot held on the claims' clock frees only when that clock passes it, so a
// jump of the clock may let a second call start legitimately, and nothing else may.
func (e *env) overInFlight(suffix string, lead time.Duration) (a, b callSpan, ok bool) {
	e.down.mu.Lock()
	spans := slices.Clone(e.down.spans)
	e.down.mu.Unlock()
	e.mu.Lock()
	jumps := slices.Clone(e.jumps)
	e.mu.Unlock()
	var calls []callSpan
	for _, s := range spans {
		if strings.HasSuffix(s.key, suffix) {
			calls = append(calls, s)
		}
	}
	slices.SortFunc(calls, func(x, y callSpan) int { return x.start.Compare(y.start) })
	for i, x := range calls {
		for _, y := range calls[i+1:] {
			if !y.start.Before(x.end) {
				break
			}
			still := true
			for _, j := range jumps {
				if j.After(x.start.Add(-lead)) && j.Before(y.start) {
					still = false
				}
			}
			if still {
				return x, y, true
			}
		}
	}
	return callSpan{}, callSpan{}, false
}

// indexPlace is where a claim belongs in the pending index: its due shard while an intent is
// open and none parked, its due-parked shard while one is open and one parked, its parked
// shard once none is open and one is parked, nowhere when all are done or resolved.
func indexPlace(c *dedup.Claim) string {
	due := dedup.PendingShard(c.PK)
	open, parked := false, false
	for _, in := range c.Intents {
		switch in.Status {
		case dedup.IntentPending, dedup.IntentRunning:
			open = true
		case dedup.IntentParked:
			parked = true
		}
	}
	switch {
	case open && parked:
		return dedup.DueParkedShardFor(due)
	case open:
		return due
	case parked:
		return dedup.ParkedShardFor(due)
	}
	return ""
}

// intentState is an intent as one write of its claim left it.
type intentState struct {
	token, status, owner, redrive string
	attempts                      int
}

func (s intentState) String() string {
	return fmt.Sprintf("%.12s %s@%d owner %s redrive %s", s.token, s.status, s.attempts, s.owner, s.redrive)
}

// intentStories reads from the table's stream (a record per write, whatever answer its writer
// got) each state an intent was written in, in order, by its idempotency key.
func intentStories(t *testing.T, recs []events.DynamoDBEventRecord) map[string][]intentState {
	stories := map[string][]intentState{}
	for _, r := range recs {
		item, err := outbox.FromStreamImage(r.Change.NewImage)
		if err != nil {
			t.Fatal(err)
		}
		c, err := dedup.UnmarshalClaim(item)
		if err != nil || c.SK != dedup.ClaimSK {
			continue // the targets' limit items, the sweeper's lock
		}
		for name, in := range c.Intents {
			key := dedup.IdempotencyKey(c.Source, c.EventID, name)
			s := intentState{c.CommitToken, in.Status, in.LeaseOwner, in.RedriveID, in.Attempts}
			if h := stories[key]; len(h) == 0 || h[len(h)-1] != s {
				stories[key] = append(h, s)
			}
		}
	}
	return stories
}

// took counts in an intent's story the incarnations of its claim (commit tokens), the
// operator's redrives that took (a nonce first written on a pending intent; a resolve's is
// first written on a resolved one) and the leases taken (running at a new attempt).
func took(story []intentState) (incarnations, redrives, leases int) {
	seen := map[string]bool{}
	for _, s := range story {
		if !seen["token "+s.token] {
			seen["token "+s.token] = true
			incarnations++
		}
		if s.redrive != "" && !seen["redrive "+s.redrive] {
			seen["redrive "+s.redrive] = true
			if s.status == dedup.IntentPending {
				redrives++
			}
		}
		if lease := fmt.Sprint("lease ", s.token, s.attempts); s.status == dedup.IntentRunning && !seen[lease] {
			seen[lease] = true
			leases++
		}
	}
	return incarnations, redrives, leases
}

// turnsOf is the workers' log lines of intent name of event id's turns.
func turnsOf(logs, id, name string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, " event_id="+id+" intent="+name+" ") {
			out = append(out, l)
		}
	}
	return out
}

// lateAnswers delays one DynamoDB answer in eight by up to 600 ms, after the request took
// effect: a slow network or a busy partition, not a failure.
type lateAnswers struct {
	next http.RoundTripper
	draw func(int) int
}

func (l *lateAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if l.draw(8) == 0 {
		time.Sleep(time.Duration(l.draw(600)) * time.Millisecond)
	}
	return resp, err
}

func sum(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// faultyClient is a client option under which a random share of the claim writes lose their
// answer (the write landed) or are refused with a transaction conflict or a throttle.
func faultyClient(r *rand.Rand) func(*dynamodb.Options) {
	rt := awstest.BaseTransport()
	var next http.RoundTripper = rt
	switch r.IntN(4) {
	case 0:
		next = &awstest.LoseResponses{Next: rt, Operation: "UpdateItem", N: 1 + r.IntN(4)}
	case 1:
		next = &awstest.InjectErrors{Next: rt, Operation: "UpdateItem", N: 1 + r.IntN(3), Skip: r.IntN(3), Status: 400,
			Body: `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"injected conflict"}`}
	case 2:
		next = &awstest.InjectErrors{Next: rt, Operation: "UpdateItem", N: 1 + r.IntN(3), Skip: r.IntN(3), Status: 400,
			Body: `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"injected throttle"}`}
	}
	return awstest.WithTransport(next)
}

// TestEveryIntentEndsDoneOrParkedAndAnAtMostOnceOneIsSentOnceUnderRandomFaults: workers with
// lost answers, conflicts and throttles on their claim writes, racing on the same stream
// records, with the clock jumping past leases and sweeps between rounds.
func TestEveryIntentEndsDoneOrParkedAndAnAtMostOnceOneIsSentOnceUnderRandomFaults(t *testing.T) {
	t.Parallel()
	seed := seeds.Schedule(t, 1)[0]
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, amo := range []bool{true, false} {
		t.Run(fmt.Sprintf("atMostOnce=%v", amo), func(t *testing.T) {
			e := newEnv(t)
			var mu sync.Mutex
			answers := map[string][]int{} // key -> the status each call that reached the handler got
			e.down.fail = func(n int, key string) (int, time.Duration) {
				status := 200
				switch n % 5 {
				case 1:
					status = 503
				case 3:
					status = 429
				}
				mu.Lock()
				answers[key] = append(answers[key], status)
				mu.Unlock()
				return status, 0
			}
			keys := e.commit(4)
			recs := e.records()
			configure := func(c *outbox.Config) {
				if amo {
					e.atMostOnce(nil)(c)
				}
				c.Backoff = func(int) time.Duration { return time.Second }
				c.MaxAttempts = 4
			}
			for round := range 6 {
				var wg sync.WaitGroup
				for range 3 {
					w := e.worker(configure, faultyClient(r))
					wg.Go(func() { _, _ = w.HandleStream(context.Background(), batch(recs)) })
				}
				wg.Wait()
				e.advance(time.Duration(1+r.IntN(20)) * time.Second)
				sw := &outbox.Sweeper{Worker: e.worker(configure, faultyClient(r)), MinAge: time.Millisecond}
				_, _ = sw.Run(context.Background())
				_ = round
			}
			// Then no faults: every lease runs out, and the sweeper finishes what is left.
			for range 6 {
				e.advance(10 * time.Minute)
				if _, err := (&outbox.Sweeper{Worker: e.worker(configure), MinAge: time.Millisecond}).Run(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			calls, applied, _ := e.down.snapshot()
			for _, k := range keys {
				mu.Lock()
				seq := answers[k]
				mu.Unlock()
				if amo && calls[k] != len(seq) {
					t.Errorf("seed %d: at-most-once key %s called %d times, %d of them after its effect was applied", seed, k, calls[k], calls[k]-len(seq))
				}
				for i, st := range seq {
					if amo && st != 429 && i < len(seq)-1 {
						t.Errorf("seed %d: at-most-once key %s called again after an answer %d (answers %v, calls %d)", seed, k, st, seq, calls[k])
					}
				}
				if applied[k] > 1 {
					t.Errorf("seed %d: key %s applied %d times", seed, k, applied[k])
				}
			}
			for _, c := range e.claims() {
				open, parked := false, false
				for name, in := range c.Intents {
					switch in.Status {
					case dedup.IntentDone:
					case dedup.IntentParked:
						parked = true
					default:
						open = true
						t.Errorf("seed %d: %s/%s left %s (%+v)", seed, c.EventID, name, in.Status, in)
					}
					if !amo && in.Status == dedup.IntentDone && applied[dedup.IdempotencyKey(c.Source, c.EventID, name)] != 1 {
						t.Errorf("seed %d: %s/%s done but applied %d times", seed, c.EventID, name, applied[dedup.IdempotencyKey(c.Source, c.EventID, name)])
					}
				}
				want := ""
				switch {
				case open && parked:
					want = dedup.DueParkedShardFor(dedup.PendingShard(c.PK))
				case open:
					want = dedup.PendingShard(c.PK)
				case parked:
					want = dedup.ParkedShardFor(dedup.PendingShard(c.PK))
				}
				if c.PendingShard != want {
					t.Errorf("seed %d: %s under %q, want %q", seed, c.EventID, c.PendingShard, want)
				}
			}
		})
	}
}
