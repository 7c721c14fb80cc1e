package outbox_test

// The outbox's promise under the failures a review found it broke: an intent recorded done
// that never ran, one parked although it succeeded, one run twice, a claim left in the pending
// index for its whole retention. Each test drives real commits, real stream records, a real
// local downstream and faults injected below the SDK.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/outbox"
)

// commitOne commits one event with the given intents (one email.send by default).
func (e *env) commitOne(id string, intents ...dedup.Intent) {
	e.t.Helper()
	if len(intents) == 0 {
		intents = []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{"template":"paid"}`)}}
	}
	_, err := e.store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: intents})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) claim(id string) *dedup.Claim {
	e.t.Helper()
	for _, c := range e.claims() {
		if c.EventID == id {
			return c
		}
	}
	e.t.Fatalf("no claim for %s", id)
	return nil
}

func TestARedirectingDownstreamParksTheIntentWithItsLocation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var loginCalls atomic.Int32
	login := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		loginCalls.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer login.Close()
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, login.URL+"/sso", http.StatusFound)
	}))
	defer moved.Close()
	e.commitOne("evt_redirect")
	w := e.worker(func(c *outbox.Config) {
		c.Executors["email"] = &outbox.HTTPExecutor{URL: moved.URL, Timeout: time.Second}
	})
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	in := e.claim("evt_redirect").Intents["email.send"]
	if in.Status != dedup.IntentParked || !strings.Contains(in.LastError, login.URL+"/sso") {
		t.Fatalf("intent %+v: want parked, with the Location in last_error", in)
	}
	if n := loginCalls.Load(); n != 0 {
		t.Fatalf("the redirect was followed (%d calls): the POST became a GET that recorded nothing", n)
	}
}

// inFlight is a downstream with the Idempotency-Key semantics of Stripe and the IETF draft: a
// request whose key is still being processed gets 409; a completed key gets its stored answer.
type inFlight struct {
	*httptest.Server
	mu       sync.Mutex
	busy     map[string]bool
	applied  map[string]int
	calls    int
	slow     chan struct{} // the first request waits for it before applying
	finished chan struct{} // closed once the first request has applied its effect
}

func newInFlight(t *testing.T) *inFlight {
	d := &inFlight{busy: map[string]bool{}, applied: map[string]int{}, slow: make(chan struct{}), finished: make(chan struct{})}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		d.mu.Lock()
		d.calls++
		first := d.calls == 1
		switch {
		case d.busy[key]:
			d.mu.Unlock()
			http.Error(w, `{"error":"a request with this key is in progress"}`, http.StatusConflict)
			return
		case d.applied[key] > 0:
			d.mu.Unlock()
			w.WriteHeader(http.StatusOK) // the stored answer
			return
		}
		d.busy[key] = true
		d.mu.Unlock()
		if first {
			<-d.slow // the caller gives up meanwhile; the effect still happens
		}
		d.mu.Lock()
		d.applied[key]++
		delete(d.busy, key)
		d.mu.Unlock()
		if first {
			close(d.finished)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(d.Close)
	t.Cleanup(func() {
		select {
		case <-d.slow:
		default:
			close(d.slow)
		}
	})
	return d
}

func TestA409ForARequestStillInFlightIsRetriedNotParked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newInFlight(t)
	e.commitOne("evt_409")
	w := e.worker(func(c *outbox.Config) {
		c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 200 * time.Millisecond}
	})
	// Attempt 1 times out while the downstream is still applying it.
	w.HandleStream(context.Background(), batch(e.records()))
	if in := e.claim("evt_409").Intents["email.send"]; in.Status != dedup.IntentPending {
		t.Fatalf("after a timeout: %+v, want pending", in)
	}
	// Attempt 2 arrives while attempt 1 is in flight: 409.
	e.advance(time.Minute)
	if _, err := w.Process(context.Background(), e.claim("evt_409")); err != nil {
		t.Fatal(err)
	}
	if in := e.claim("evt_409").Intents["email.send"]; in.Status != dedup.IntentPending || !strings.Contains(in.LastError, "409") {
		t.Fatalf("after a 409: %+v, want pending again (retried), not parked", in)
	}
	close(down.slow)
	<-down.finished
	// Attempt 3 gets the stored answer of attempt 1.
	e.advance(time.Minute)
	if _, err := w.Process(context.Background(), e.claim("evt_409")); err != nil {
		t.Fatal(err)
	}
	if in := e.claim("evt_409").Intents["email.send"]; in.Status != dedup.IntentDone || in.Attempts != 3 {
		t.Fatalf("%+v: want done after 3 attempts", in)
	}
	if down.applied["shop:evt_409:email.send"] != 1 {
		t.Fatalf("applied %d times, want once", down.applied["shop:evt_409:email.send"])
	}
}

// countingAPI counts the worker's DynamoDB calls by operation.
type countingAPI struct {
	outbox.API
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.mu.Lock()
	c.calls["UpdateItem"]++
	c.mu.Unlock()
	return c.API.UpdateItem(ctx, in, o...)
}

func TestALostFinishAnswerStillTakesTheClaimOutOfTheIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_lost_finish")
	// The finish lands; its answer is lost; the SDK sends it again and meets its own write.
	lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: 1, Match: "finished_at"}
	var m countingMetrics
	w := e.worker(func(c *outbox.Config) { c.Metrics = &m }, awstest.WithTransport(lose))
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	if lose.Lost() != 1 {
		t.Fatal("no finish answer was lost")
	}
	c := e.claim("evt_lost_finish")
	if c.Intents["email.send"].Status != dedup.IntentDone || c.PendingShard != "" || c.PendingSince != 0 {
		t.Fatalf("claim %+v: want done and out of the pending index", c)
	}
	if m.outcomes[outbox.OutcomeLeaseLost] != 0 || m.outcomes[outbox.OutcomeDone] != 1 {
		t.Fatalf("outcomes %v: the worker must recognise its own finish", m.outcomes)
	}
}

func TestAFinishedClaimLeftInTheIndexLeavesItWhoeverNoticesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_done_in_index")
	e.commitOne("evt_parked_in_index")
	// Finished as an older worker left them: every intent done (or parked), the claim still
	// under its due shard.
	for id, status := range map[string]string{"evt_done_in_index": dedup.IntentDone, "evt_parked_in_index": dedup.IntentParked} {
		_, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName: &e.table, Key: key(dedup.ClaimKey("shop", id)),
			UpdateExpression:          strp("SET intents.#n.#st = :s, intents.#n.attempts = :one"),
			ExpressionAttributeNames:  map[string]string{"#n": "email.send", "#st": "status"},
			ExpressionAttributeValues: vals(":s", status, ":one", 1),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	e.advance(5 * time.Minute)
	sweeper := &outbox.Sweeper{Worker: e.worker(nil)}
	rep, err := sweeper.Run(context.Background())
	if err != nil || rep.Settled != 2 || rep.Claims != 2 {
		t.Fatalf("sweep %+v, %v: want both claims settled", rep, err)
	}
	if c := e.claim("evt_done_in_index"); c.PendingShard != "" {
		t.Fatalf("a done claim is still under %q", c.PendingShard)
	}
	if c := e.claim("evt_parked_in_index"); c.PendingShard != dedup.ParkedShardFor(dedup.PendingShard(c.PK)) {
		t.Fatalf("a parked claim is under %q, want its parked shard", c.PendingShard)
	}
	rep, err = sweeper.Run(context.Background())
	if err != nil || rep.Claims != 0 || rep.Parked != 1 {
		t.Fatalf("second sweep %+v, %v: want nothing read, one parked claim counted", rep, err)
	}
}

const transactionConflict = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"Transaction is ongoing for the item"}`

// throttled is DynamoDB's answer when it throttles a request (400: the SDK tries it again).
const throttled = `{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`

func TestATransactionConflictOnTheWorkersWritesIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_conflict")
	// A duplicate delivery's transaction holds the claim while the worker finishes: DynamoDB
	// refuses the finish twice with TransactionConflict, which the SDK does not retry.
	inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: 2, Status: 400,
		Body: transactionConflict, Match: "finished_at"}
	w := e.worker(nil, awstest.WithTransport(inject))
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch failures %v: the conflict should have been retried", resp.BatchItemFailures)
	}
	if inject.Injected() != 2 {
		t.Fatalf("%d conflicts injected, want 2", inject.Injected())
	}
	if in := e.claim("evt_conflict").Intents["email.send"]; in.Status != dedup.IntentDone || in.Attempts != 1 {
		t.Fatalf("%+v: want done on the first attempt", in)
	}
	calls, _, _ := e.down.snapshot()
	if calls["shop:evt_conflict:email.send"] != 1 {
		t.Fatalf("%d downstream calls, want 1", calls["shop:evt_conflict:email.send"])
	}
}

// A known outcome is recorded through a short DynamoDB failure: the write that records it
// (done, retry, park) fails with 500s through all of the SDK's attempts, and the worker sends
// it again while its lease lasts. The downstream is called once and the outcome recorded,
// rather than the lease left to end and the intent called again (or, at most once, parked as
// may have been sent), a call that answered at its deadline included: the margin kept back
// from the call is the record's. A failure that outlasts the lease ends the tries: the intent
// is left running, to the next attempt.
func TestAKnownOutcomeIsRecordedThroughAShortDynamoDBFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	answer := map[string]int{}          // key -> the downstream's status
	delay := map[string]time.Duration{} // key -> how long it takes to give it
	var mu sync.Mutex
	e.down.fail = func(_ int, key string) (int, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		return answer[key], delay[key]
	}
	const internalError = `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}`
	for _, c := range []struct {
		name       string
		amo        bool
		downstream int    // its answer
		write      string // the recording write's text
		failures   int    // 500s it meets; the SDK makes three attempts
		want       string
		late       bool // the call takes nearly all its time: the margin is the record's
	}{
		{"done", false, http.StatusOK, "#st = :status", 3, dedup.IntentDone, false},
		{"done, at most once", true, http.StatusOK, "#st = :status", 3, dedup.IntentDone, false},
		{"done, two rounds", false, http.StatusOK, "#st = :status", 6, dedup.IntentDone, false},
		{"retry", false, http.StatusServiceUnavailable, "next_attempt_at = :next", 3, dedup.IntentPending, false},
		{"park", false, http.StatusUnprocessableEntity, "#st = :status", 3, dedup.IntentParked, false},
		{"park, at most once", true, http.StatusServiceUnavailable, "#st = :status", 3, dedup.IntentParked, false},
		{"past the lease", false, http.StatusOK, "#st = :status", -1, dedup.IntentRunning, false},
		{"done, at the call's deadline", false, http.StatusOK, "#st = :status", 12, dedup.IntentDone, true},
	} {
		id := "evt_record_" + strings.NewReplacer(" ", "_", ",", "").Replace(c.name)
		key := dedup.IdempotencyKey("shop", id, "email.send")
		// Late: the call's deadline is the lease's end less the margin (Timeout + Margin =
		// Lease), and the answer comes 0.3 s before it; four rounds of 500s and the record's
		// waits between them outlast those 0.3 s, not the margin's 2 s.
		lease, margin, timeout := 2*time.Second, 200*time.Millisecond, time.Second
		mu.Lock()
		answer[key] = c.downstream
		if c.late {
			lease, margin, timeout = 4*time.Second, 2*time.Second, 2*time.Second
			delay[key] = timeout - 300*time.Millisecond
		}
		mu.Unlock()
		e.commitOne(id)
		inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: c.failures, Status: 500, Body: internalError, Match: c.write}
		w := e.worker(func(cfg *outbox.Config) {
			cfg.Lease, cfg.Margin = lease, margin
			var x outbox.Executor = &outbox.HTTPExecutor{URL: e.down.URL, Timeout: timeout}
			if c.amo {
				x = outbox.AtMostOnce(x)
			}
			cfg.Executors = map[string]outbox.Executor{"email": x}
		}, awstest.WithTransport(inject))
		_, err := w.Process(context.Background(), e.claim(id))
		in := e.claim(id).Intents["email.send"]
		calls, _, _ := e.down.snapshot()
		if (err == nil) != (c.failures >= 0) || in.Status != c.want || in.Attempts != 1 || calls[key] != 1 {
			t.Fatalf("%s: %v; %d calls, intent %+v; want %s after one call", c.name, err, calls[key], in, c.want)
		}
		if n := inject.Injected(); c.failures >= 0 && n != c.failures || c.failures < 0 && n <= 3 {
			t.Fatalf("%s: %d failures met, want %d (or, past the lease, more than one round of the SDK's)", c.name, n, c.failures)
		}
	}
}

// A lease whose call was not made is given back through a short DynamoDB failure, wherever it
// is given back: a lease whose every answer was lost (dedup.Claims.Lease), a rated call whose
// window could not be taken, a lease that would outlast its max_in_flight slot. The give-back
// meets a round of throttling (the SDK's three attempts) and is sent again while the lease
// lasts: the intent is pending again, no attempt spent, no call made, rather than left running
// under a lease nobody uses and, at most once, parked as may have been sent. It then runs once.
func TestALeaseWhoseCallWasNotMadeIsGivenBackThroughAShortDynamoDBFailure(t *testing.T) {
	t.Parallel()
	const leaseWrite = "intents.#n.attempts = intents.#n.attempts + :one"
	for _, c := range []struct {
		name   string
		limits map[string]outbox.Limit
		fault  func(next http.RoundTripper) http.RoundTripper // what has the lease given back
	}{
		{"a lease whose answers were lost", nil, func(next http.RoundTripper) http.RoundTripper {
			lost := &awstest.LoseResponses{Next: next, Operation: "UpdateItem", N: 1, Match: leaseWrite}
			return &awstest.InjectErrors{Next: lost, Operation: "UpdateItem", Skip: 1, N: 2, Status: 400, Body: throttled, Match: leaseWrite}
		}},
		{"a rate window that could not be taken", map[string]outbox.Limit{"email": {Rate: 10}}, func(next http.RoundTripper) http.RoundTripper {
			return &awstest.InjectErrors{Next: next, Operation: "UpdateItem", N: 3, Status: 400, Body: throttled, Match: "ADD #calls"}
		}},
		{"a slot taken too slowly for the lease", map[string]outbox.Limit{"email": {MaxInFlight: 1}}, func(next http.RoundTripper) http.RoundTripper {
			return delayWrites{next, "SET #holder", time.Second} // past the margin twice: the lease would outlast the slot
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.commitOne("evt_given_back")
			key := dedup.IdempotencyKey("shop", "evt_given_back", "email.send")
			configure := func(cfg *outbox.Config) {
				cfg.Executors["email"] = outbox.AtMostOnce(cfg.Executors["email"])
				cfg.Limits = c.limits
			}
			giveBack := &awstest.InjectErrors{Next: c.fault(awstest.BaseTransport()), Operation: "UpdateItem", N: 3, Status: 400, Body: throttled, Match: "attempts_base"}
			sum, err := e.worker(configure, awstest.WithTransport(giveBack)).Process(context.Background(), e.claim("evt_given_back"))
			in := e.claim("evt_given_back").Intents["email.send"]
			calls, _, _ := e.down.snapshot()
			if giveBack.Injected() != 3 || in.Status != dedup.IntentPending || in.Attempts != 1 || in.Spent() != 0 || in.LeaseOwner != "" || calls[key] != 0 {
				t.Fatalf("%v %v; %d give-backs throttled, %d calls, intent %+v: want given back through the throttling, no attempt spent, no call",
					sum, err, giveBack.Injected(), calls[key], in)
			}
			if sum, err := e.worker(configure).Process(context.Background(), e.claim("evt_given_back")); err != nil || sum[outbox.OutcomeDone] != 1 {
				t.Fatalf("%v %v: want it done once given back", sum, err)
			}
			if calls, _, _ := e.down.snapshot(); calls[key] != 1 {
				t.Fatalf("%d calls, want 1", calls[key])
			}
		})
	}
}

func TestTheSweepersWritesRetryTransactionConflictsToo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_sweep_conflict")
	e.advance(5 * time.Minute)
	inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: 2, Status: 400, Body: transactionConflict, Match: "lease_until = :until"}
	rep, err := (&outbox.Sweeper{Worker: e.worker(nil, awstest.WithTransport(inject))}).Run(context.Background())
	if err != nil || rep.Summary[outbox.OutcomeDone] != 1 || rep.Failures != 0 {
		t.Fatalf("sweep %+v, %v: want the intent done despite two conflicts on its lease", rep, err)
	}
}

func TestABatchThatWouldOutliveTheInvocationLeasesOnlyWhatItCanFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 12 {
		e.commitOne(fmt.Sprintf("evt_deadline_%02d", i))
	}
	recs := e.records()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(250 * time.Millisecond)
		w.WriteHeader(http.StatusOK)
	}))
	defer slow.Close()
	w := e.worker(func(c *outbox.Config) {
		c.Concurrency = 1
		c.Margin = 100 * time.Millisecond
		c.Executors["email"] = &outbox.HTTPExecutor{URL: slow.URL, Timeout: time.Second}
	})
	// The invocation has 2 s: room for a few 250 ms calls, not for twelve, and each needs up
	// to its 1 s timeout plus the margin to be taken at all.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := w.HandleStream(ctx, batch(recs))
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	if len(failed) == 0 || len(failed) == len(recs) {
		t.Fatalf("%d of %d records failed: want some run and the rest handed back", len(failed), len(recs))
	}
	for _, r := range recs {
		in := e.claim(r.Change.NewImage["event_id"].String()).Intents["email.send"]
		switch {
		case failed[r.Change.SequenceNumber] && (in.Status != dedup.IntentPending || in.Attempts != 0):
			t.Fatalf("%s handed back, but %+v: a lease was taken (and burned) without time to run it", r.Change.SequenceNumber, in)
		case !failed[r.Change.SequenceNumber] && in.Status != dedup.IntentDone:
			t.Fatalf("%s reported processed, but %+v", r.Change.SequenceNumber, in)
		}
	}
	// Lambda replays the handed-back records in a fresh invocation: all done.
	var again []string
	for _, r := range recs {
		if failed[r.Change.SequenceNumber] {
			again = append(again, r.Change.SequenceNumber)
		}
	}
	resp, _ = w.HandleStream(context.Background(), batch(recs))
	if len(resp.BatchItemFailures) != 0 || e.statuses()[dedup.IntentDone] != len(recs) {
		t.Fatalf("replay of %d records: failures %v, statuses %v", len(again), resp.BatchItemFailures, e.statuses())
	}
}

func TestALeaseShorterThanATargetsTimeoutIsRefused(t *testing.T) {
	t.Parallel()
	_, err := outbox.New(awstest.Client(t), outbox.Config{Table: "t", Lease: 30 * time.Second,
		Executors: map[string]outbox.Executor{"slow": &outbox.HTTPExecutor{URL: "http://127.0.0.1:1", Timeout: 2 * time.Minute}}})
	var ce *outbox.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Lease" || !strings.Contains(err.Error(), `"slow"`) {
		t.Fatalf("got %v, want a *ConfigError on Lease naming the target", err)
	}
	if _, err := outbox.New(awstest.Client(t), outbox.Config{Table: "t", Lease: 2*time.Minute + outbox.DefaultMargin,
		Executors: map[string]outbox.Executor{"slow": &outbox.HTTPExecutor{URL: "http://127.0.0.1:1", Timeout: 2 * time.Minute}}}); err != nil {
		t.Fatalf("a lease of timeout + margin: %v", err)
	}
}

// delayWrites holds every UpdateItem whose body has match back before sending it, as a slow
// network or the SDK's own retries would.
type delayWrites struct {
	next  http.RoundTripper
	match string
	delay time.Duration
}

func (d delayWrites) RoundTrip(r *http.Request) (*http.Response, error) {
	if faults.Operation(r) == "UpdateItem" && awstest.BodyContains(r, d.match) {
		time.Sleep(d.delay)
	}
	return d.next.RoundTrip(r)
}

func TestTheCallEndsBeforeTheLeaseAsWrittenEvenWhenTheLeaseWriteIsSlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_slow_lease")
	var deadline, leaseUntil time.Time
	w := e.worker(func(c *outbox.Config) {
		c.Lease, c.Margin = 3*time.Second, 500*time.Millisecond
		c.Executors["email"] = outbox.ExecutorFunc(func(ctx context.Context, _ outbox.Task) error {
			deadline, _ = ctx.Deadline()
			leaseUntil = time.UnixMilli(e.claim("evt_slow_lease").Intents["email.send"].LeaseUntil)
			return nil
		})
	}, awstest.WithTransport(delayWrites{awstest.BaseTransport(), "lease_until = :until", time.Second}))
	w.HandleStream(context.Background(), batch(e.records()))
	// The lease as written ends at lease_until (this env's clock is the real one until a test
	// moves it); the call must end the margin before that (lease_until is in whole ms).
	if latest := leaseUntil.Add(-500*time.Millisecond + time.Millisecond); deadline.IsZero() || deadline.After(latest) {
		t.Fatalf("call deadline %s after the lease's end less the margin (%s): the call could outlive its lease",
			deadline.Format(time.StampMilli), latest.Format(time.StampMilli))
	}
}

// blocking is an executor whose calls wait until released, and report how they ended. Every
// call waits for the same release (a behaviour that calls twice must not hang the test).
type blocking struct {
	started chan struct{}
	done    chan struct{}
	once    sync.Once
	err     error
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 16), done: make(chan struct{})}
}

func (b *blocking) Execute(ctx context.Context, _ outbox.Task) error {
	b.started <- struct{}{}
	<-b.done
	return b.err
}

// release lets every call, waiting or to come, return err.
func (b *blocking) release(err error) {
	b.once.Do(func() { b.err = err; close(b.done) })
}

// await waits until b's call has started, or fails the test if the run it belongs to ended
// without calling it (done receives that run's summary).
func (b *blocking) await(t *testing.T, done <-chan outbox.Summary) {
	t.Helper()
	select {
	case <-b.started:
	case sum := <-done:
		t.Fatalf("the run ended (%v) without calling the downstream", sum)
	}
}

func TestAnOlderIncarnationsWorkerCannotFinishTheNewOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	commit := e.readmittable("evt_incarnation")
	commit()
	first := e.claim("evt_incarnation")
	old := newBlocking()
	oldWorker := e.worker(func(c *outbox.Config) { c.Executors["email"] = old })
	done := make(chan outbox.Summary)
	go func() {
		sum, _ := oldWorker.Process(context.Background(), first)
		done <- sum
	}()
	old.await(t, done)
	// The claim expires while the old worker's call hangs, and the event is admitted again.
	e.advance(2 * time.Hour)
	commit()
	second := e.claim("evt_incarnation")
	if second.CommitToken == first.CommitToken {
		t.Fatal("the re-admitted claim kept its commit token")
	}
	fresh := newBlocking()
	newWorker := e.worker(func(c *outbox.Config) { c.Executors["email"] = fresh })
	newDone := make(chan outbox.Summary)
	go func() {
		sum, _ := newWorker.Process(context.Background(), second)
		newDone <- sum
	}()
	fresh.await(t, newDone) // the new incarnation's attempt 1 is running
	before := e.claim("evt_incarnation")
	old.release(nil) // the old call returns: it must not finish the new incarnation
	if sum := <-done; sum[outbox.OutcomeLeaseLost] != 1 {
		t.Fatalf("old worker: %v, want its finish refused as a lost lease", sum)
	}
	if after := e.claim("evt_incarnation"); !reflect.DeepEqual(after.Intents, before.Intents) {
		t.Fatalf("the old worker changed the new incarnation:\nbefore %+v\nafter  %+v", before.Intents, after.Intents)
	}
	fresh.release(errors.New("503"))
	if sum := <-newDone; sum[outbox.OutcomeRetry] != 1 {
		t.Fatalf("new worker: %v, want its own result recorded", sum)
	}
}

func TestAWorkerWhoseLeaseExpiredMidCallChangesNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		result error // what the first worker's late call returns
		second string
	}{
		{"its finish", nil, "worker"},
		{"its retry", errors.New("503 from the downstream"), "worker"},
		{"its park", outbox.Permanent(errors.New("422")), "worker"},
		{"its finish, against the sweeper", nil, "sweeper"},
		{"its retry, against the sweeper", errors.New("503 from the downstream"), "sweeper"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.commitOne("evt_fence")
			slow := newBlocking()
			first := e.worker(func(cfg *outbox.Config) { cfg.Executors["email"] = slow })
			done := make(chan outbox.Summary)
			go func() {
				sum, _ := first.Process(context.Background(), e.claim("evt_fence"))
				done <- sum
			}()
			slow.await(t, done)
			// The lease expires (the clock moves past it); a second attempt leases the intent
			// and is mid-call when the first worker's late call returns.
			e.advance(10 * time.Minute)
			next := newBlocking()
			second := e.worker(func(cfg *outbox.Config) { cfg.Executors["email"] = next })
			secondDone := make(chan outbox.Summary)
			go func() {
				if c.second == "sweeper" {
					rep, _ := (&outbox.Sweeper{Worker: second}).Run(context.Background())
					secondDone <- rep.Summary
					return
				}
				sum, _ := second.Process(context.Background(), e.claim("evt_fence"))
				secondDone <- sum
			}()
			next.await(t, secondDone)
			if in := e.claim("evt_fence").Intents["email.send"]; in.Status != dedup.IntentRunning || in.Attempts != 2 {
				t.Fatalf("%+v: want the second attempt running", in)
			}
			before := e.items()
			slow.release(c.result)
			if sum := <-done; sum[outbox.OutcomeLeaseLost] != 1 {
				t.Fatalf("first worker: %v, want its write refused (lease lost)", sum)
			}
			// Its call was made, so the intent's history records it (late); nothing else of the
			// table changes.
			after := e.items()
			if h := e.claim("evt_fence").Intents["email.send"].History; len(h) != 1 || h[0].Attempt != 1 || !h[0].Late {
				t.Fatalf("history %+v: want the first attempt's late entry", h)
			}
			if !reflect.DeepEqual(withoutHistory(after), withoutHistory(before)) {
				t.Fatalf("the first worker's late write changed the table:\nbefore %v\nafter  %v", before, after)
			}
			next.release(nil)
			if sum := <-secondDone; sum[outbox.OutcomeDone] != 1 {
				t.Fatalf("second attempt: %v, want done", sum)
			}
			if in := e.claim("evt_fence").Intents["email.send"]; in.Status != dedup.IntentDone || in.Attempts != 2 {
				t.Fatalf("%+v: want the second attempt's done to stand", in)
			}
			if h := e.claim("evt_fence").Intents["email.send"].History; len(h) != 2 || h[0].Attempt != 1 || !h[0].Late || h[1].Attempt != 2 || h[1].Late {
				t.Fatalf("history %+v: want the first attempt's late entry, then the second's done", h)
			}
		})
	}
}

// withoutHistory is items without their intents' histories.
func withoutHistory(items map[string]map[string]types.AttributeValue) map[string]map[string]types.AttributeValue {
	out := map[string]map[string]types.AttributeValue{}
	for k, item := range items {
		item = maps.Clone(item)
		if m, ok := item["intents"].(*types.AttributeValueMemberM); ok {
			intents := map[string]types.AttributeValue{}
			for name, in := range m.Value {
				if im, ok := in.(*types.AttributeValueMemberM); ok {
					c := maps.Clone(im.Value)
					delete(c, "history")
					in = &types.AttributeValueMemberM{Value: c}
				}
				intents[name] = in
			}
			item["intents"] = &types.AttributeValueMemberM{Value: intents}
		}
		out[k] = item
	}
	return out
}

func TestAnEventWithMaxIntentsLongNamesFinishesAndLeavesTheIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	intents := make([]dedup.Intent, dedup.MaxIntents)
	for i := range intents {
		intents[i] = dedup.Intent{Name: fmt.Sprintf("%s%02d", strings.Repeat("n", dedup.MaxIntentNameLen-2), i), Target: "email", Payload: []byte(`{}`)}
	}
	e.commitOne("evt_many", intents...)
	w := e.worker(nil)
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	c := e.claim("evt_many")
	if e.statuses()[dedup.IntentDone] != dedup.MaxIntents || c.PendingShard != "" {
		t.Fatalf("statuses %v, shard %q: want all %d done and the claim out of the index", e.statuses(), c.PendingShard, dedup.MaxIntents)
	}
}

func TestALostRetryAnswerIsTheWorkersOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_lost_retry")
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusServiceUnavailable, 0 }
	// The retry lands; its answer is lost; the SDK sends it again and meets its own write.
	lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: 1, Match: "next_attempt_at = :next"}
	var m countingMetrics
	w := e.worker(func(c *outbox.Config) { c.Metrics = &m }, awstest.WithTransport(lose))
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	if lose.Lost() != 1 {
		t.Fatal("no retry answer was lost")
	}
	if in := e.claim("evt_lost_retry").Intents["email.send"]; in.Status != dedup.IntentPending || in.Attempts != 1 {
		t.Fatalf("%+v: want pending after one attempt", in)
	}
	if m.outcomes[outbox.OutcomeRetry] != 1 || m.outcomes[outbox.OutcomeLeaseLost] != 0 {
		t.Fatalf("outcomes %v: the worker must recognise its own retry", m.outcomes)
	}
}

// A sweeper that read a claim with nothing open (one intent parked, one done), while an
// operator re-drives the parked one, must not move the claim under its parked shard: the
// re-driven intent would be hidden from every later sweep.
func TestASettleNeverHidesAReDrivenIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_settle_race",
		dedup.Intent{Name: "a", Target: "email", Payload: []byte(`{}`)},
		dedup.Intent{Name: "b", Target: "email", Payload: []byte(`{}`)})
	for name, status := range map[string]string{"a": dedup.IntentParked, "b": dedup.IntentDone} {
		_, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName: &e.table, Key: key(dedup.ClaimKey("shop", "evt_settle_race")),
			UpdateExpression:          strp("SET intents.#n.#st = :s, intents.#n.attempts = :one"),
			ExpressionAttributeNames:  map[string]string{"#n": name, "#st": "status"},
			ExpressionAttributeValues: vals(":s", status, ":one", 1),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := e.claim("evt_settle_race") // what the sweeper read
	if err := redriveAt(context.Background(), e.client, e.table, seen, "a", e.now()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.worker(nil).Process(context.Background(), seen); err != nil {
		t.Fatal(err)
	}
	if c := e.claim("evt_settle_race"); c.PendingShard != dedup.PendingShard(c.PK) || c.Intents["a"].Status != dedup.IntentPending {
		t.Fatalf("claim under %q with a %+v: the re-driven intent must stay among the due work", c.PendingShard, c.Intents["a"])
	}
}

// Lambda replays a batch (a failed sibling record, a bisected batch): the INSERT record shows
// the intent pending and due, while the table says its retry is an hour away.
func TestAReplayedRecordDoesNotRunARetryBeforeItsBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_replayed")
	insert := e.records()
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusServiceUnavailable, 0 }
	w := e.worker(func(c *outbox.Config) { c.Backoff = func(int) time.Duration { return time.Hour } })
	w.HandleStream(context.Background(), batch(insert))
	e.down.fail = nil
	if resp, _ := w.HandleStream(context.Background(), batch(insert)); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	if calls, _, _ := e.down.snapshot(); calls["shop:evt_replayed:email.send"] != 1 {
		t.Fatalf("%d calls: the replayed record ran the retry an hour early", calls["shop:evt_replayed:email.send"])
	}
}

// The record of a claim's earlier incarnation (expired, then re-admitted) is replayed: it must
// not lease the new incarnation's intents; the new incarnation's own record runs them.
func TestAStaleRecordOfAnEarlierIncarnationRunsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	commit := e.readmittable("evt_stale")
	commit()
	old := e.records()
	w := e.worker(nil)
	w.HandleStream(context.Background(), batch(old))
	e.advance(2 * time.Hour)
	commit() // re-admitted: a new commit token, its intent pending again
	if resp, _ := w.HandleStream(context.Background(), batch(old)); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	if in := e.claim("evt_stale").Intents["email.send"]; in.Status != dedup.IntentPending || in.Attempts != 0 {
		t.Fatalf("%+v: the earlier incarnation's record leased the new one's intent", in)
	}
}

// The last open intent finishes while an operator re-drives its parked sibling: the finish
// must not take the claim out of the due index on the strength of what its lease saw.
func TestAFinishNeverHidesAnIntentReDrivenDuringTheCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_finish_race",
		dedup.Intent{Name: "a", Target: "slow", Payload: []byte(`{}`)},
		dedup.Intent{Name: "b", Target: "email", Payload: []byte(`{}`)})
	_, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &e.table, Key: key(dedup.ClaimKey("shop", "evt_finish_race")),
		UpdateExpression:          strp("SET intents.#n.#st = :s, intents.#n.attempts = :one"),
		ExpressionAttributeNames:  map[string]string{"#n": "b", "#st": "status"},
		ExpressionAttributeValues: vals(":s", dedup.IntentParked, ":one", 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	slow := newBlocking()
	w := e.worker(func(c *outbox.Config) { c.Executors["slow"] = slow })
	done := make(chan outbox.Summary)
	go func() {
		sum, _ := w.Process(context.Background(), e.claim("evt_finish_race"))
		done <- sum
	}()
	slow.await(t, done) // a is running; its lease saw b parked
	if err := redriveAt(context.Background(), e.client, e.table, e.claim("evt_finish_race"), "b", e.now()); err != nil {
		t.Fatal(err)
	}
	slow.release(nil)
	if sum := <-done; sum[outbox.OutcomeDone] != 1 {
		t.Fatalf("%v", sum)
	}
	c := e.claim("evt_finish_race")
	if c.Intents["a"].Status != dedup.IntentDone || c.Intents["b"].Status != dedup.IntentPending || c.PendingShard != dedup.PendingShard(c.PK) {
		t.Fatalf("a %s, b %s, claim under %q: the re-driven intent must stay among the due work", c.Intents["a"].Status, c.Intents["b"].Status, c.PendingShard)
	}
}
