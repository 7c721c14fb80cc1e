package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/internal/seeds"
	"github.com/oncehook/oncehook/outbox"
)

// TestAnIntentsLogLineNeverHoldsTheWebhooksPathOrTheDownstreamsAnswer: the worker's "intent"
// line goes to CloudWatch Logs, read by more people than the claims table and kept longer. A
// webhook URL's path and query are its secret (Slack's and Discord's incoming webhooks,
// ?token=), and the downstream's answer may echo the request (a customer's e-mail): the line
// describes a failure as its span does, by the URL's scheme and host and the status code,
// keeping what the worker itself says (at-most-once), while the claim's last_error keeps the
// whole error for the console's redacted view.
func TestAnIntentsLogLineNeverHoldsTheWebhooksPathOrTheDownstreamsAnswer(t *testing.T) {
	t.Parallel()
	down := rawServer(t, func(_ int, req *http.Request) string {
		body := "cannot deliver to alice@PIIECHO.example: " + req.URL.String()
		return "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
	})
	for name, amo := range map[string]bool{"retried": false, "at most once": true} {
		e := newEnv(t)
		e.commit(1)
		var logs bytes.Buffer
		w := e.worker(func(c *outbox.Config) {
			c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			var x outbox.Executor = &outbox.HTTPExecutor{URL: "http://" + down + "/services/T000SECRET/B000SECRET?token=QSECRET", Timeout: 2 * time.Second}
			if amo {
				x = outbox.AtMostOnce(x)
			}
			c.Executors["email"], c.Executors["http:fulfilment"] = x, x
		})
		if _, err := w.HandleStream(context.Background(), batch(e.records())); err != nil {
			t.Fatal(err)
		}
		line := logs.String()
		if !strings.Contains(line, `"msg":"intent"`) || !strings.Contains(line, "500") || !strings.Contains(line, "http://"+down) {
			t.Fatalf("%s: log %s: want the intent's line naming the status and the host", name, line)
		}
		if amo && !strings.Contains(line, "at-most-once") {
			t.Errorf("%s: log %s: the worker's own words are lost", name, line)
		}
		for _, secret := range []string{"SECRET", "PIIECHO"} {
			if strings.Contains(line, secret) {
				t.Errorf("%s: the intent's log line holds %s: %s", name, secret, line)
			}
		}
		for _, c := range e.claims() {
			for in, i := range c.Intents {
				if !strings.Contains(i.LastError, "PIIECHO") {
					t.Errorf("%s: %s's last_error %q: the claim keeps the whole error", name, in, i.LastError)
				}
			}
		}
	}
}

// TestEveryAttemptIsInItsIntentsHistory: against a real downstream, an intent retried twice
// (503), parked (400), re-driven by an operator and then done shows each attempt in its
// history, in order, with the status its call got; each done's answer (the other intent's at
// once, this one's at the end) lost and the write sent again by the SDK adds it once. The claim's size after each step is logged with the write
// units a write of it costs (docs/outbox.md, "An intent's history").
func TestEveryAttemptIsInItsIntentsHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	email := dedup.IdempotencyKey("shop", "evt_0000", "email.send")
	e.down.fail = func(_ int, key string) (int, time.Duration) {
		if key != email {
			return 0, 0
		}
		e.down.mu.Lock()
		n := e.down.calls[key] // the downstream's lock is free while fail runs
		e.down.mu.Unlock()
		return map[int]int{1: http.StatusServiceUnavailable, 2: http.StatusServiceUnavailable, 3: http.StatusBadRequest}[n], 0
	}
	lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: 2, Match: dedup.IntentDone}
	w := e.worker(nil, awstest.WithTransport(lose))
	e.commit(1)
	size := func(step string) {
		n := storedSize(e.items()[dedup.ClaimKey("shop", "evt_0000")+"/"+dedup.ClaimSK])
		t.Logf("after %-16s the claim is %4d bytes: %d write units a write", step, n, (n+1023)/1024)
	}
	size("the commit")
	for _, step := range []string{"a 503", "another 503", "a 400"} {
		if _, err := w.Process(context.Background(), e.claim("evt_0000")); err != nil {
			t.Fatal(err)
		}
		size(step)
		e.advance(time.Minute) // past the backoff
	}
	if err := redriveByAt(context.Background(), e.client, e.table, e.claim("evt_0000"), "email.send", e.now(), "ada (test)"); err != nil {
		t.Fatal(err)
	}
	size("the redrive")
	if _, err := w.Process(context.Background(), e.claim("evt_0000")); err != nil {
		t.Fatal(err)
	}
	size("done")
	if lose.Lost() != 2 {
		t.Fatalf("%d done answers lost, want both", lose.Lost())
	}
	if h := e.claim("evt_0000").Intents["fulfilment.create"].History; len(h) != 1 || h[0].Outcome != dedup.IntentDone {
		t.Fatalf("history %+v, want the one done", h)
	}
	var got []string
	for _, h := range e.claim("evt_0000").Intents["email.send"].History {
		got = append(got, fmt.Sprintf("%d %s %d %s", h.Attempt, h.Outcome, h.Code, h.By))
	}
	want := []string{"1 retry 503 ", "2 retry 503 ", "3 parked 400 ", "3 redriven 0 ada (test)", "4 done 0 "}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("history %q, want %q", got, want)
	}
	if calls, _, _ := e.down.snapshot(); calls[email] != 4 {
		t.Fatalf("%d calls, want 4", calls[email])
	}
}

// TestATurnHoldsItsInvariantsUnderRandomizedFaultsAndSchedules races, for a seed, invocations of
// three workers, and sweeps, on the turns of ten events' intents: one at least once, one at most
// once, one under max_in_flight 2, one under a rate. Each invocation meets faults of its own
// below the SDK (whose retries run for real): throttles, 500s, answers lost after the write
// applied, slow requests and slow answers, and death mid-request (the write applied or not,
// nothing sent after it); its worker may stall between a call and its record, or die there.
// Invocations replay a stream record as committed or read the claim as stored (a wake-up). The
// downstream answers each attempt as the seed draws: done, a 500, a gateway's 502 after
// applying, not sent, refused for good, or too slow for the call's deadline. Then a fault-free
// sweeper, the clock jumped past every lease, backoff and lock before each run, finishes what
// is left. The invariants, none of them a matter of timing:
//   - a call starts under its lease: the intent running at the call's attempt, its lease not
//     over (as stored when the call starts, judged when the read answers within the margin);
//   - one call at most per attempt, and no more attempts called than the budget;
//   - an at-most-once intent reaches the downstream once at most;
//   - no more calls to the max_in_flight target under way than its limit, counting those whose
//     deadline has not passed (past it, the call is over for its worker: its slot ends by itself);
//   - every intent ends done or parked: done only after a call that succeeded, parked with the
//     error its attempt's call got (or stranded, or past the budget, without a call);
//   - every claim ends where the pending index says.
//
// The seed is new on every run (make flakes runs it many times; ONCEHOOK_SCHEDULE_SEED=n
// replays seed n): it fixes the plan and the draws, while the goroutines' interleaving (which
// request meets which fault) stays the machine's.
func TestATurnHoldsItsInvariantsUnderRandomizedFaultsAndSchedules(t *testing.T) {
	t.Parallel()
	for _, seed := range seeds.Schedule(t, 1) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { randomTurns(t, seed, lightTurnFaults) })
	}
}

// turnFaults are how often an invocation's DynamoDB requests meet each fault, and how often its
// worker stalls or dies between a call and its record.
type turnFaults struct {
	throttle, fail, lose, slowRequest, slowAnswer, die float64 // per request
	stall, dieAfterCall                                float64 // per call
}

// lightTurnFaults are a few faults in a hundred requests of each kind, one death in a hundred:
// enough that most turns meet one, few enough that most intents end done.
var lightTurnFaults = turnFaults{throttle: 0.05, fail: 0.04, lose: 0.08, slowRequest: 0.04, slowAnswer: 0.04, die: 0.01, stall: 0.12, dieAfterCall: 0.05}

const (
	turnAttempts = 4                      // the budget
	turnCallMax  = 800 * time.Millisecond // the downstream's bound on a call
	turnMargin   = 300 * time.Millisecond
	diedBody     = `{"__type":"com.amazon.coral.validate#ValidationException","message":"injected: the worker died"}`
	failedBody   = `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}`
)

// invocation is one invocation of the outbox function, or one sweep: its own draws of the
// faults it meets, whether it died, and what it met (for a failure to show).
type invocation struct {
	id    int
	rates turnFaults
	dead  atomic.Bool
	mu    sync.Mutex
	rng   *rand.Rand
	met   []string
}

type invocationKey struct{}

func invocationOf(ctx context.Context) *invocation {
	v, _ := ctx.Value(invocationKey{}).(*invocation)
	return v
}

func (v *invocation) draw() float64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rng.Float64()
}

func (v *invocation) note(s string) {
	v.mu.Lock()
	v.met = append(v.met, s)
	v.mu.Unlock()
}

// invocationFaults injects the faults of the invocation a request's context carries; a request
// with none (the test's own) passes.
type invocationFaults struct{ next http.RoundTripper }

func (f invocationFaults) RoundTrip(r *http.Request) (*http.Response, error) {
	v := invocationOf(r.Context())
	if v == nil {
		return f.next.RoundTrip(r)
	}
	if v.dead.Load() {
		return faults.Answer(r, http.StatusBadRequest, diedBody), nil
	}
	op, p, u := faults.Operation(r), v.rates, v.draw()
	met := func(p float64) bool { u -= p; return u < 0 }
	switch {
	case met(p.throttle):
		v.note(op + " throttled")
		return faults.Answer(r, http.StatusBadRequest, throttled), nil
	case met(p.fail):
		v.note(op + " failed")
		return faults.Answer(r, http.StatusInternalServerError, failedBody), nil
	case met(p.lose):
		v.note(op + " answer lost")
		resp, err := f.next.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		return nil, faults.Lost(resp)
	case met(p.slowRequest):
		d := time.Duration(v.draw() * float64(1200*time.Millisecond))
		v.note(fmt.Sprint(op, " sent ", d.Round(time.Millisecond), " late"))
		time.Sleep(d)
		return f.next.RoundTrip(r)
	case met(p.slowAnswer):
		d := time.Duration(v.draw() * float64(1200*time.Millisecond))
		v.note(fmt.Sprint(op, " answered ", d.Round(time.Millisecond), " late"))
		resp, err := f.next.RoundTrip(r)
		time.Sleep(d)
		return resp, err
	case met(p.die):
		landed := v.draw() < 0.5
		v.note(fmt.Sprint(op, " died, the request applied: ", landed))
		v.dead.Store(true)
		if landed {
			if resp, err := f.next.RoundTrip(r); err == nil {
				return nil, faults.Lost(resp)
			}
		}
		return faults.Answer(r, http.StatusBadRequest, diedBody), nil
	}
	return f.next.RoundTrip(r)
}

// turnCall is one executor call as the downstream saw it.
type turnCall struct {
	key, target string
	attempt     int
	invocation  int
	sent        bool   // it may have reached the downstream
	err         string // the executor's answer ("" when it succeeded)
	fence       string // what was wrong with the intent as stored when it started
	over        string // the calls under way at its target when it started, when over the limit
}

func (c turnCall) String() string {
	return fmt.Sprintf("attempt %d (invocation %d): sent %v, %q", c.attempt, c.invocation, c.sent, c.err)
}

// turnWorld is the downstream of randomTurns: every call, and the deadlines of the calls under
// way per target.
type turnWorld struct {
	e     *env
	seed  uint64
	mu    sync.Mutex
	calls []turnCall
	under map[string]map[string]time.Time // target -> call -> its deadline
}

// executor calls the downstream for target, whose max_in_flight is limit (0: none).
func (w *turnWorld) executor(target string, limit int) outbox.Executor {
	return outbox.BoundedFunc(turnCallMax, func(ctx context.Context, task outbox.Task) error {
		v := invocationOf(ctx)
		start := w.e.now()
		c := turnCall{key: task.IdempotencyKey, target: target, attempt: task.Attempt}
		var err error
		switch {
		case v != nil && v.dead.Load():
			err = outbox.NotSent(errors.New("the worker is dead"))
		case ctx.Err() != nil:
			err = outbox.NotSent(ctx.Err())
		default:
			c.fence = w.fence(task, start)
			var leave func()
			c.over, leave = w.enter(ctx, target, limit, fmt.Sprint(task.IdempotencyKey, "@", task.Attempt))
			c.sent, err = w.answer(ctx, task)
			leave()
		}
		if v != nil {
			c.invocation = v.id
		}
		if err != nil {
			c.err = err.Error()
		}
		w.mu.Lock()
		w.calls = append(w.calls, c)
		w.mu.Unlock()
		if v != nil && c.sent {
			if v.draw() < v.rates.stall { // between the call and its record
				d := time.Duration(v.draw() * float64(2500*time.Millisecond))
				v.note(fmt.Sprint("stalled ", d.Round(time.Millisecond), " after a call"))
				time.Sleep(d)
			}
			if v.draw() < v.rates.dieAfterCall {
				v.note("died after a call")
				v.dead.Store(true)
			}
		}
		return err
	})
}

// fence is what is wrong with the intent as stored when a call starts, read back at once: it
// must be running at the call's attempt, its lease not over. A read answered later than the
// margin is not judged: the lease may have ended meanwhile, and another worker taken it over.
func (w *turnWorld) fence(task outbox.Task, start time.Time) string {
	c, err := w.read(dedup.ClaimKey(task.Source, task.EventID))
	if err != nil || w.e.now().Sub(start) >= turnMargin {
		return ""
	}
	in := c.Intents[task.Intent]
	if in.Status != dedup.IntentRunning || in.Attempts != task.Attempt || in.LeaseUntil <= start.UnixMilli() {
		return fmt.Sprintf("stored %s at attempt %d, its lease ending %+dms from the call's start", in.Status, in.Attempts, in.LeaseUntil-start.UnixMilli())
	}
	return ""
}

// enter counts a call under way at target until leave, and says when it found limit others
// under way whose deadlines had not passed.
func (w *turnWorld) enter(ctx context.Context, target string, limit int, call string) (over string, leave func()) {
	if limit == 0 {
		return "", func() {}
	}
	deadline, _ := ctx.Deadline()
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	var others []string
	for other, d := range w.under[target] {
		if d.After(now) {
			others = append(others, other)
		}
	}
	if len(others) >= limit {
		over = fmt.Sprintf("under way beside %v", others)
	}
	if w.under[target] == nil {
		w.under[target] = map[string]time.Time{}
	}
	w.under[target][call] = deadline
	return over, func() {
		w.mu.Lock()
		delete(w.under[target], call)
		w.mu.Unlock()
	}
}

// answer is the downstream's answer to an attempt, drawn from the seed, the key and the attempt.
func (w *turnWorld) answer(ctx context.Context, task outbox.Task) (sent bool, err error) {
	h := fnv.New64a()
	h.Write([]byte(task.IdempotencyKey))
	down := func(code int, status, body string) *outbox.StatusError {
		return &outbox.StatusError{URL: "http://down.test", StatusCode: code, Status: status, Body: body}
	}
	switch u := rand.New(rand.NewPCG(w.seed, h.Sum64()+uint64(task.Attempt))).Float64(); {
	case u < 0.45:
		return true, nil
	case u < 0.60:
		return true, down(500, "500 Internal Server Error", "failed")
	case u < 0.70:
		return true, down(502, "502 Bad Gateway", "applied, then the gateway gave up")
	case u < 0.80:
		return false, outbox.NotSent(errors.New("connection refused"))
	case u < 0.85:
		return true, outbox.Permanent(down(422, "422 Unprocessable Entity", "refused"))
	}
	<-ctx.Done() // too slow: cut off at the call's deadline
	return true, fmt.Errorf("POST http://down.test: %w", ctx.Err())
}

// read reads the claim pk as stored.
func (w *turnWorld) read(pk string) (*dedup.Claim, error) {
	out, err := w.e.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.e.table),
		Key: dedup.ClaimItemKey(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	return dedup.UnmarshalClaim(out.Item)
}

func randomTurns(t *testing.T, seed uint64, rates turnFaults) {
	t.Parallel()
	e := newEnv(t)
	w := &turnWorld{e: e, seed: seed, under: map[string]map[string]time.Time{}}
	targets := []string{"alo", "amo", "lim", "rated"}
	const events = 10
	var committed []*dedup.Claim // each claim as committed: its stream record, replayed
	for i := range events {
		id := fmt.Sprintf("evt_t%d_%d", seed, i)
		var intents []dedup.Intent
		for _, target := range targets {
			intents = append(intents, dedup.Intent{Name: target, Target: target, Payload: []byte(`{}`)})
		}
		e.commitOne(id, intents...)
		committed = append(committed, e.claim(id))
	}
	configure := func(c *outbox.Config) {
		c.Executors = map[string]outbox.Executor{
			"alo": w.executor("alo", 0), "amo": outbox.AtMostOnce(w.executor("amo", 0)),
			"lim": w.executor("lim", 2), "rated": w.executor("rated", 0),
		}
		c.Limits = map[string]outbox.Limit{"lim": {MaxInFlight: 2}, "rated": {Rate: 8}}
		c.Lease, c.Margin = 1500*time.Millisecond, turnMargin
		c.MaxAttempts = turnAttempts
		c.Backoff = func(n int) time.Duration { return time.Duration(n) * 200 * time.Millisecond }
	}
	var workers []*outbox.Worker
	for range 3 {
		workers = append(workers, e.worker(configure, awstest.WithTransport(invocationFaults{awstest.BaseTransport()})))
	}
	var imu sync.Mutex
	var invocations []*invocation
	invoke := func() (context.Context, context.CancelFunc) {
		imu.Lock()
		defer imu.Unlock()
		v := &invocation{id: len(invocations) + 1, rates: rates, rng: rand.New(rand.NewPCG(seed, uint64(len(invocations)+1)))}
		invocations = append(invocations, v)
		return context.WithTimeout(context.WithValue(context.Background(), invocationKey{}, v), 12*time.Second)
	}

	// The plan, drawn from the seed before anything runs: six drivers, each a run of invocations.
	type step struct {
		event, worker int
		read          bool // a wake-up: the claim as stored, not as committed
		pause         time.Duration
	}
	plan := rand.New(rand.NewPCG(seed, 0))
	var drivers [6][8]step
	for d := range drivers {
		for i := range drivers[d] {
			drivers[d][i] = step{plan.IntN(events), plan.IntN(len(workers)), plan.IntN(2) == 0, time.Duration(plan.IntN(150)) * time.Millisecond}
		}
	}
	var wg sync.WaitGroup
	for _, steps := range drivers {
		wg.Go(func() {
			for _, st := range steps {
				claim := committed[st.event]
				if st.read {
					if c, err := w.read(claim.PK); err == nil {
						claim = c
					}
				}
				ctx, cancel := invoke()
				_, _ = workers[st.worker].Process(ctx, claim)
				cancel()
				time.Sleep(st.pause)
			}
		})
	}
	driving := make(chan struct{})
	sweeping := make(chan struct{})
	go func() { // the sweeper, under the same faults, while the drivers run
		defer close(sweeping)
		for {
			select {
			case <-driving:
				return
			case <-time.After(300 * time.Millisecond):
			}
			ctx, cancel := invoke()
			_, _ = (&outbox.Sweeper{Worker: workers[0], MinAge: time.Millisecond}).Run(ctx)
			cancel()
		}
	}()
	wg.Wait()
	close(driving)
	<-sweeping

	// A fault-free sweeper finishes what is left: before each run, the clock jumps past every
	// lease, backoff, slot and the sweeper's lock, so that each run takes every open intent
	// through one attempt.
	sweeper := &outbox.Sweeper{Worker: e.worker(configure), MinAge: time.Second}
	open := func() bool {
		for _, c := range e.claims() {
			for _, in := range c.Intents {
				if in.Status == dedup.IntentPending || in.Status == dedup.IntentRunning {
					return true
				}
			}
		}
		return false
	}
	for round := 0; round < 3*turnAttempts && open(); round++ {
		e.advance(16 * time.Minute)
		if _, err := sweeper.Run(context.Background()); err != nil {
			t.Fatalf("a fault-free sweep: %v", err)
		}
	}
	w.check(t)
	if t.Failed() {
		for _, v := range invocations {
			if len(v.met) > 0 {
				t.Logf("invocation %d met: %s", v.id, strings.Join(v.met, "; "))
			}
		}
	}
}

// check holds randomTurns's invariants against the calls the downstream saw and the claims as
// they ended.
func (w *turnWorld) check(t *testing.T) {
	w.mu.Lock()
	calls := slices.Clone(w.calls)
	w.mu.Unlock()
	byKey := map[string][]turnCall{}
	for _, c := range calls {
		byKey[c.key] = append(byKey[c.key], c)
		if c.fence != "" {
			t.Errorf("%s called at attempt %d (invocation %d) outside its lease: %s", c.key, c.attempt, c.invocation, c.fence)
		}
		if c.over != "" {
			t.Errorf("%s called at attempt %d (invocation %d) over its target's max_in_flight: %s", c.key, c.attempt, c.invocation, c.over)
		}
	}
	ends := map[string]int{}
	for _, claim := range w.e.claims() {
		if want := indexPlace(claim); claim.PendingShard != want {
			t.Errorf("%s is under %q in the pending index, want %q: %+v", claim.EventID, claim.PendingShard, want, claim.Intents)
		}
		for name, in := range claim.Intents {
			ends[name+" "+in.Status]++
			key := dedup.IdempotencyKey(claim.Source, claim.EventID, name)
			mine := byKey[key]
			attempts, sent := map[int]bool{}, 0
			var twice, ok bool
			for _, c := range mine {
				twice = twice || attempts[c.attempt]
				attempts[c.attempt] = true
				if c.sent {
					sent++
				}
				ok = ok || c.sent && c.err == ""
			}
			story := fmt.Sprintf("%+v; its calls %v", in, mine)
			switch {
			case twice:
				t.Errorf("%s: two calls under one attempt: %s", key, story)
			case len(attempts) > turnAttempts:
				t.Errorf("%s: called in %d attempts, over its budget of %d: %s", key, len(attempts), turnAttempts, story)
			case in.Target == "amo" && sent > 1:
				t.Errorf("%s: at most once, reached the downstream %d times: %s", key, sent, story)
			case in.Status != dedup.IntentDone && in.Status != dedup.IntentParked:
				t.Errorf("%s: ends %s, want done or parked: %s", key, in.Status, story)
			case in.Status == dedup.IntentDone && !ok:
				t.Errorf("%s: done without a call that succeeded: %s", key, story)
			case in.Status == dedup.IntentParked:
				if strings.Contains(in.LastError, "was under way when its worker stopped") || strings.Contains(in.LastError, "past the budget") {
					break // parked without a call: its attempt's worker stopped, or the budget is spent
				}
				i := slices.IndexFunc(mine, func(c turnCall) bool { return c.attempt == in.Attempts })
				if i < 0 || mine[i].err == "" || !strings.Contains(in.LastError, mine[i].err) {
					t.Errorf("%s: parked for %q, not what its attempt %d's call got: %s", key, in.LastError, in.Attempts, story)
				}
			}
		}
	}
	t.Logf("seed %d: %d calls; the intents end %v", w.seed, len(calls), ends)
}
