package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/internal/harness"
	"github.com/oncehook/oncehook/outbox"
)

// limitedDownstream is a real local HTTP service that records when each call started and how
// many were under way at once, and takes hold to answer.
type limitedDownstream struct {
	*httptest.Server
	mu       sync.Mutex
	refuse   bool // answer 422 to every call, and count none
	inFlight int
	peak     int
	starts   []time.Time
	keys     map[string]int
}

func newLimitedDownstream(t testing.TB, hold time.Duration) *limitedDownstream {
	d := &limitedDownstream{keys: map[string]int{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		if d.refuse {
			d.mu.Unlock()
			http.Error(w, "refused", http.StatusUnprocessableEntity)
			return
		}
		d.inFlight++
		d.peak = max(d.peak, d.inFlight)
		d.starts = append(d.starts, time.Now())
		d.keys[r.Header.Get("Idempotency-Key")]++
		d.mu.Unlock()
		time.Sleep(hold)
		d.mu.Lock()
		d.inFlight--
		d.mu.Unlock()
	}))
	t.Cleanup(d.Close)
	return d
}

// setRefuse turns refusing every call on or off.
func (d *limitedDownstream) setRefuse(on bool) {
	d.mu.Lock()
	d.refuse = on
	d.mu.Unlock()
}

// mostIn is the most calls that started within any span of length d.
func (d *limitedDownstream) mostIn(span time.Duration) int {
	d.mu.Lock()
	starts := slices.Clone(d.starts)
	d.mu.Unlock()
	return harness.MostIn(starts, span)
}

// limitedWorkers are n workers, each its own process as far as the limits go (its own
// in-process limiter), sending "email" to down under limit and the other target to the env's
// downstream.
func (e *env) limitedWorkers(n int, down *limitedDownstream, limit outbox.Limit, configure func(*outbox.Config)) []*outbox.Worker {
	var ws []*outbox.Worker
	for range n {
		ws = append(ws, e.worker(func(c *outbox.Config) {
			c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}
			c.Limits = map[string]outbox.Limit{"email": limit}
			if configure != nil {
				configure(c)
			}
		}))
	}
	return ws
}

// raceOnTheBatch hands every worker the whole stream batch at once, as concurrent invocations
// racing on the same records would get them; the records a worker hands back (held by the
// limit past what an invocation waits, on a loaded machine) are delivered to it again, as the
// mapping does, until none is.
func raceOnTheBatch(t *testing.T, ws []*outbox.Worker, recs []events.DynamoDBEventRecord) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			mine := recs
			for round := 0; len(mine) > 0; round++ {
				if round == 10 {
					t.Errorf("%d records still handed back after %d deliveries", len(mine), round)
					return
				}
				resp, err := w.HandleStream(context.Background(), batch(mine))
				if err != nil {
					t.Error(err)
					return
				}
				var again []events.DynamoDBEventRecord
				for _, f := range resp.BatchItemFailures {
					for _, r := range mine {
						if r.Change.SequenceNumber == f.ItemIdentifier {
							again = append(again, r)
						}
					}
				}
				mine = again
			}
		})
	}
	wg.Wait()
}

// shareTheBatch deals the records out to the workers, as a stream's shards and the mapping's
// parallelization do, and runs them at once; records handed back as batch item failures (held
// by the rate past what an invocation waits, on a loaded machine) are delivered again, as the
// mapping does, until none is. (Workers racing on the same records also hold the limits, but
// each spends the rate's turn before it finds the intent taken: the downstream sees fewer
// calls than the rate allows, never more.)
func shareTheBatch(t *testing.T, ws []*outbox.Worker, recs []events.DynamoDBEventRecord) {
	for round := 0; len(recs) > 0; round++ {
		if round == 10 {
			t.Fatalf("%d records still handed back after %d deliveries", len(recs), round)
		}
		parts := make([][]events.DynamoDBEventRecord, len(ws))
		for i, r := range recs {
			parts[i%len(ws)] = append(parts[i%len(ws)], r)
		}
		var mu sync.Mutex
		var again []events.DynamoDBEventRecord
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Go(func() {
				resp, err := w.HandleStream(context.Background(), batch(parts[i]))
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, f := range resp.BatchItemFailures {
					for _, r := range parts[i] {
						if r.Change.SequenceNumber == f.ItemIdentifier {
							again = append(again, r)
						}
					}
				}
			})
		}
		wg.Wait()
		recs = again
	}
}

// everyIntentDoneOnItsFirstAttempt: the limits held calls back without a lease, so none spent an
// attempt, none parked, and none was called twice.
func (e *env) everyIntentDoneOnItsFirstAttempt(down *limitedDownstream) {
	e.t.Helper()
	for _, c := range e.claims() {
		for name, in := range c.Intents {
			if in.Status != dedup.IntentDone || in.Spent() != 1 {
				e.t.Errorf("%s %s: %s after %d attempts, want done on the first", c.EventID, name, in.Status, in.Spent())
			}
		}
	}
	down.mu.Lock()
	defer down.mu.Unlock()
	for k, n := range down.keys {
		if n != 1 {
			e.t.Errorf("%s called %d times", k, n)
		}
	}
}

// Invariant: a target's max_in_flight holds across every worker. Four workers (four processes'
// limiters) race on the same 40 events; the downstream sees at most 3 calls under way at once,
// and every intent is done on its first attempt.
func TestMaxInFlightHoldsAcrossWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, 60*time.Millisecond)
	e.commit(40)
	ws := e.limitedWorkers(4, down, outbox.Limit{MaxInFlight: 3}, nil)
	raceOnTheBatch(t, ws, e.records())
	if len(down.keys) != 40 {
		t.Fatalf("%d email intents called, want 40", len(down.keys))
	}
	if down.peak > 3 {
		t.Errorf("%d calls under way at once, over max_in_flight 3", down.peak)
	}
	e.everyIntentDoneOnItsFirstAttempt(down)
	t.Logf("peak in flight %d of 3", down.peak)
}

// Invariant: a target's rate holds across every worker: over any span T, at most rate*T calls
// start, plus one rate window's quota (the windows are fixed; a span straddles one more), plus
// one for the jitter between a worker's clock and the downstream's.
func TestRateHoldsAcrossWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, 0)
	const rate, events = 40, 120
	e.commit(events)
	ws := e.limitedWorkers(4, down, outbox.Limit{Rate: rate}, nil)
	start := time.Now()
	shareTheBatch(t, ws, e.records())
	took := time.Since(start)
	if len(down.keys) != events {
		t.Fatalf("%d email intents called, want %d", len(down.keys), events)
	}
	q := outbox.RateQuota(rate)
	for _, span := range []time.Duration{time.Second, 2 * time.Second} {
		bound := int(rate*span.Seconds()) + 2*q
		if most := down.mostIn(span); most > bound {
			t.Errorf("%d calls started within %s, over %g a second (bound %d)", most, span, float64(rate), bound)
		}
	}
	e.everyIntentDoneOnItsFirstAttempt(down)
	t.Logf("%d calls in %s (%.1f/s, rate %d); most in any second %d", events, took.Round(time.Millisecond), events/took.Seconds(), rate, down.mostIn(time.Second))
}

// slotHolder writes a slot of target as a worker that stopped mid-call leaves it: held until
// its lease ends.
func (e *env) slotHolder(target string, slot int, until time.Time) {
	e.t.Helper()
	_, err := e.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
		dedup.PartitionKey: &types.AttributeValueMemberS{Value: outbox.LimitPK(target)},
		dedup.SortKey:      &types.AttributeValueMemberS{Value: fmt.Sprintf("SLOT#%d", slot)},
		"holder":           &types.AttributeValueMemberS{Value: "crashed"},
		"until":            &types.AttributeValueMemberN{Value: fmt.Sprint(until.UnixMilli())},
	}})
	if err != nil {
		e.t.Fatal(err)
	}
}

// Invariant: held-back work never spends an attempt and never parks, and a worker that stopped
// holding a slot holds it until its lease ends, not forever. A slot held by a stopped worker
// holds the only call max_in_flight allows: the invocation, out of time to wait, leaves the
// intent untouched (pending, no attempt) and asks to be woken; once the holder's lease has
// ended, the intent runs on its first attempt.
func TestAHeldIntentSpendsNoAttemptAndAStoppedHolderFreesItsSlotWhenItsLeaseEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, 0)
	e.commitOne("evt_held")
	e.slotHolder("email", 0, e.now().Add(time.Hour))
	var woken []time.Time
	var mu sync.Mutex
	sched := schedulerFunc(func(_ context.Context, pk string, due time.Time) error {
		mu.Lock()
		woken = append(woken, due)
		mu.Unlock()
		return nil
	})
	ws := e.limitedWorkers(1, down, outbox.Limit{MaxInFlight: 1}, func(c *outbox.Config) { c.Scheduler = sched })
	// An invocation with room for the call and little more: it cannot wait long.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second+500*time.Millisecond+300*time.Millisecond)
	defer cancel()
	sum, err := ws[0].Process(ctx, e.claim("evt_held"))
	if err != nil || sum[outbox.OutcomeHeld] != 1 {
		t.Fatalf("%v %v, want the intent held back and its wake-up scheduled", sum, err)
	}
	if in := e.claim("evt_held").Intents["email.send"]; in.Status != dedup.IntentPending || in.Attempts != 0 {
		t.Fatalf("held back: %+v, want pending with no attempt spent", in)
	}
	if len(woken) != 1 || woken[0].Before(e.now()) {
		t.Fatalf("wake-ups %v, want one, after now", woken)
	}
	if len(down.keys) != 0 {
		t.Fatal("a held intent was called")
	}
	// The stopped holder's lease ends (the clock moves past it): its slot is free again.
	e.advance(2 * time.Hour)
	if sum, err := ws[0].Process(context.Background(), e.claim("evt_held")); err != nil || sum[outbox.OutcomeDone] != 1 {
		t.Fatalf("%v %v, want done once the holder's lease ended", sum, err)
	}
	e.everyIntentDoneOnItsFirstAttempt(down)
}

// limitCounter counts the DynamoDB calls the worker makes on the limit items.
type limitCounter struct {
	outbox.API
	mu    sync.Mutex
	calls map[string]int
}

func (c *limitCounter) count(op string, pk *string) {
	if strings.HasPrefix(aws.ToString(pk), outbox.LimitPK("")) {
		c.mu.Lock()
		c.calls[op]++
		c.mu.Unlock()
	}
}

func (c *limitCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, ok := in.Key[dedup.PartitionKey].(*types.AttributeValueMemberS); ok {
		c.count("UpdateItem", &pk.Value)
	}
	return c.API.UpdateItem(ctx, in, optFns...)
}

func (c *limitCounter) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if pk, ok := in.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS); ok {
		c.count("Query", &pk.Value)
	}
	return c.API.Query(ctx, in, optFns...)
}

// What a limit costs, counted per call with one worker and no contention (docs/outbox.md): a
// rate takes one conditional write per call (one more when that write outlasted its window);
// max_in_flight a read of the slots, a write to take one and a write to give it back.
func TestWhatALimitCostsPerCall(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		limit outbox.Limit
		want  map[string]int
	}{
		{"rate", outbox.Limit{Rate: outbox.MaxRate}, map[string]int{"UpdateItem": 1}},
		{"max_in_flight", outbox.Limit{MaxInFlight: 10}, map[string]int{"Query": 1, "UpdateItem": 2}},
		{"both", outbox.Limit{Rate: outbox.MaxRate, MaxInFlight: 10}, map[string]int{"Query": 1, "UpdateItem": 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			down := newLimitedDownstream(t, 0)
			const events = 10
			for i := range events {
				e.commitOne(fmt.Sprintf("evt_cost_%02d", i))
			}
			counter := &limitCounter{API: e.client, calls: map[string]int{}}
			cfg := outbox.Config{Table: e.table, Now: e.now, Lease: 5 * time.Second, Margin: 500 * time.Millisecond,
				Executors: map[string]outbox.Executor{"email": &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}},
				Limits:    map[string]outbox.Limit{"email": c.limit}}
			w, err := outbox.New(counter, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i := range events {
				if _, err := w.Process(context.Background(), e.claim(fmt.Sprintf("evt_cost_%02d", i))); err != nil {
					t.Fatal(err)
				}
			}
			for op, per := range c.want {
				// A rate window whose write outlasted it is asked again (the turn forfeited): on
				// a loaded machine a few calls cost one write more.
				slack := 0
				if c.limit.Rate > 0 && op == "UpdateItem" {
					slack = events
				}
				if got := counter.calls[op]; got < per*events || got > per*events+slack {
					t.Errorf("%s: %d for %d calls, want %d a call", op, got, events, per)
				}
			}
			e.everyIntentDoneOnItsFirstAttempt(down)
		})
	}
}

// A limit that cannot work is refused by New, naming the target and the field.
func TestALimitThatCannotWorkIsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		limit outbox.Limit
		field string
	}{
		{outbox.Limit{MaxInFlight: -1}, "MaxInFlight"},
		{outbox.Limit{MaxInFlight: outbox.MaxMaxInFlight + 1}, "MaxInFlight"},
		{outbox.Limit{Rate: -1}, "Rate"},
		{outbox.Limit{Rate: 0.001}, "Rate"},
		{outbox.Limit{Rate: outbox.MaxRate + 1}, "Rate"},
	} {
		_, err := outbox.New(dynamodb.New(dynamodb.Options{}), outbox.Config{Table: "t", Executors: map[string]outbox.Executor{"email": &outbox.HTTPExecutor{URL: "http://127.0.0.1:1"}},
			Limits: map[string]outbox.Limit{"email": c.limit}})
		if err == nil || !strings.Contains(err.Error(), `Limits["email"].`+c.field) {
			t.Errorf("%+v: %v, want refused naming Limits[%q].%s", c.limit, err, "email", c.field)
		}
	}
}

// fillRateWindows takes every turn of target's rate windows from now to now+span, as other
// workers would.
func (e *env) fillRateWindows(target string, rate float64, span time.Duration) {
	e.t.Helper()
	q := outbox.RateQuota(rate)
	window := time.Duration(float64(q) / rate * float64(time.Second))
	now := e.now()
	for i := now.UnixNano() / int64(window); i <= now.Add(span).UnixNano()/int64(window); i++ {
		_, err := e.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
			dedup.PartitionKey: &types.AttributeValueMemberS{Value: outbox.LimitPK(target)},
			dedup.SortKey:      &types.AttributeValueMemberS{Value: fmt.Sprintf("RATE#%d", i)},
			"calls":            &types.AttributeValueMemberN{Value: fmt.Sprint(q)},
		}})
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

// A call leased and then held back by its rate window (taken by other workers) is given back:
// pending, at the attempt count it had, at least once and at most once alike (no call was made,
// so an at-most-once intent is not parked as may-have-been-sent); once the windows free up it
// runs on its first attempt, once.
func TestACallTheRateHoldsAfterItsLeaseIsGivenBack(t *testing.T) {
	t.Parallel()
	for _, amo := range []bool{false, true} {
		t.Run(fmt.Sprintf("at most once %v", amo), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			down := newLimitedDownstream(t, 0)
			e.commitOne("evt_window")
			const rate = 10
			e.fillRateWindows("email", rate, 20*time.Second)
			var woken int
			ws := e.limitedWorkers(1, down, outbox.Limit{Rate: rate}, func(c *outbox.Config) {
				if amo {
					c.Executors["email"] = outbox.AtMostOnce(c.Executors["email"])
				}
				c.Scheduler = schedulerFunc(func(context.Context, string, time.Time) error { woken++; return nil })
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second+500*time.Millisecond+time.Second)
			defer cancel()
			sum, err := ws[0].Process(ctx, e.claim("evt_window"))
			if err != nil || sum[outbox.OutcomeHeld] != 1 || woken != 1 {
				t.Fatalf("%v %v, %d wake-ups: want held back and woken", sum, err, woken)
			}
			in := e.claim("evt_window").Intents["email.send"]
			if in.Status != dedup.IntentPending || in.Spent() != 0 || in.LeaseOwner != "" {
				t.Fatalf("held after its lease: %+v, want pending again with no attempt spent", in)
			}
			e.advance(time.Minute) // past the windows the others took
			if sum, err := ws[0].Process(context.Background(), e.claim("evt_window")); err != nil || sum[outbox.OutcomeDone] != 1 {
				t.Fatalf("%v %v, want done once the windows freed up", sum, err)
			}
			e.everyIntentDoneOnItsFirstAttempt(down)
		})
	}
}

// gatewayDownstream is a backend behind a gateway that gives up first: each call starts work at
// the backend that runs for work, while the gateway answers status after wait (API Gateway's
// 504 after 29 s, an ALB's, nginx's). It records how many calls the backend ran at once.
type gatewayDownstream struct {
	*httptest.Server
	mu       sync.Mutex
	inFlight int
	peak     int
	calls    int
}

func newGatewayDownstream(t testing.TB, status int, wait, work time.Duration) *gatewayDownstream {
	d := &gatewayDownstream{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.calls++
		d.inFlight++
		d.peak = max(d.peak, d.inFlight)
		d.mu.Unlock()
		go func() {
			time.Sleep(work)
			d.mu.Lock()
			d.inFlight--
			d.mu.Unlock()
		}()
		time.Sleep(wait)
		w.WriteHeader(status)
	}))
	t.Cleanup(d.Close)
	return d
}

// Invariant (outbox.Limit): max_in_flight is the calls under way at once at the downstream. A
// gateway's 504 says nothing of the backend behind it, which may still be running the call:
// like a timeout, it keeps the call's slot until its lease ends, so the next call does not start
// beside it. Every answer an intermediary gives while its backend may still run does the same:
// a 502, and a 503 (Heroku's router after 30 s, Fastly's and Varnish's first-byte timeout).
func TestAGatewaysTimeoutKeepsTheSlotOfACallItsBackendStillRuns(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusGatewayTimeout, http.StatusBadGateway, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			down := newGatewayDownstream(t, status, 100*time.Millisecond, 2*time.Second)
			ids := []string{"evt_gw_a", "evt_gw_b", "evt_gw_c"}
			for _, id := range ids {
				e.commitOne(id)
			}
			w := e.worker(func(c *outbox.Config) {
				// A margin wide enough that a loaded machine's slow slot write never outlasts it.
				c.Lease, c.Margin = 3*time.Second, time.Second
				c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}
				c.Limits = map[string]outbox.Limit{"email": {MaxInFlight: 1}}
			})
			var wg sync.WaitGroup
			for _, id := range ids {
				claim := e.claim(id)
				wg.Go(func() {
					if _, err := w.Process(context.Background(), claim); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			down.mu.Lock()
			defer down.mu.Unlock()
			if down.calls != len(ids) {
				t.Fatalf("%d calls, want %d", down.calls, len(ids))
			}
			if down.peak > 1 {
				t.Errorf("the backend ran %d calls at once behind %d answers, over max_in_flight 1", down.peak, status)
			}
		})
	}
}

// slowSlots is a worker's table access whose max_in_flight slot writes answer late, after the
// write took effect (a slow network, SDK retries).
type slowSlots struct {
	outbox.API
	delay time.Duration
}

func (s *slowSlots) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := s.API.UpdateItem(ctx, in, optFns...)
	if strings.HasPrefix(aws.ToString(in.UpdateExpression), "SET #holder") {
		time.Sleep(s.delay)
	}
	return out, err
}

// Invariant (at most once; a fence is never reused): an at-most-once intent whose worker
// stopped mid-call is parked as may-have-been-sent, never called again. A second worker finds it
// stranded, with a lease that wrote nothing, while its max_in_flight slot's write answers too
// late to cover a lease: it must not give back the stranded lease (that would put the intent
// back to pending, its attempt count lowered to the stopped worker's fence, for the next worker
// to call again). The downstream sees one call, and the attempt count never goes down.
func TestAStrandedLeaseIsNeverGivenBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_stranded")
	configure := func(c *outbox.Config) {
		c.Lease, c.Margin = time.Second, 100*time.Millisecond
		c.Executors = map[string]outbox.Executor{"email": outbox.AtMostOnce(&outbox.HTTPExecutor{URL: e.down.URL, Timeout: 500 * time.Millisecond})}
		c.Limits = map[string]outbox.Limit{"email": {MaxInFlight: 1}}
	}
	dies := e.worker(configure, diesAfterTheCall())
	_, _ = dies.Process(context.Background(), e.claim("evt_stranded"))
	stopped := e.claim("evt_stranded").Intents["email.send"]
	if stopped.Status != dedup.IntentRunning || stopped.Attempts != 1 {
		t.Fatalf("%+v: want the call made and left running", stopped)
	}
	// Past the stopped worker's lease, its margin, and its slot.
	time.Sleep(time.Until(time.UnixMilli(stopped.LeaseUntil).Add(500 * time.Millisecond)))

	cfg := outbox.Config{Table: e.table, Now: e.now, Lease: time.Second, Margin: 100 * time.Millisecond,
		Executors: map[string]outbox.Executor{"email": outbox.AtMostOnce(&outbox.HTTPExecutor{URL: e.down.URL, Timeout: 500 * time.Millisecond})},
		Limits:    map[string]outbox.Limit{"email": {MaxInFlight: 1}}}
	slow, err := outbox.New(&slowSlots{API: e.client, delay: 400 * time.Millisecond}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = slow.Process(context.Background(), e.claim("evt_stranded"))
	after := e.claim("evt_stranded").Intents["email.send"]
	if after.Attempts < stopped.Attempts {
		t.Fatalf("attempts went from %d to %d: a fence was given back for reuse", stopped.Attempts, after.Attempts)
	}
	if after.Status != dedup.IntentParked {
		t.Fatalf("%+v: a stranded lease makes no call, so its slot's lateness does not matter: want it parked at once", after)
	}
	// Whatever the slow worker did, the next one must not call the downstream again.
	next := e.worker(configure)
	_, _ = next.Process(context.Background(), e.claim("evt_stranded"))
	calls, _, _ := e.down.snapshot()
	if n := calls[dedup.IdempotencyKey("shop", "evt_stranded", "email.send")]; n != 1 {
		t.Fatalf("the at-most-once intent was called %d times, want once (%+v)", n, e.claim("evt_stranded").Intents["email.send"])
	}
	if in := e.claim("evt_stranded").Intents["email.send"]; in.Status != dedup.IntentParked {
		t.Fatalf("%+v: want parked as may-have-been-sent", in)
	}
}

// slowWindows makes the first n writes to a rate window answer only after the window is over,
// as a throttled table's writes (the SDK's retries and backoff) do.
type slowWindows struct {
	outbox.API
	mu   sync.Mutex
	n    int
	slow time.Duration
}

func (s *slowWindows) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := s.API.UpdateItem(ctx, in, optFns...)
	if sk, ok := in.Key[dedup.SortKey].(*types.AttributeValueMemberS); ok && strings.HasPrefix(sk.Value, "RATE#") {
		s.mu.Lock()
		slow := s.n > 0
		s.n--
		s.mu.Unlock()
		if slow {
			time.Sleep(s.slow)
		}
	}
	return out, err
}

// Invariant (docs/outbox.md): a call its rate holds back after its lease waits "while the
// invocation has room for the call after the wait"; past that it is handed back (unlease),
// never spending an attempt and never parking. Here the window's writes outlast their windows
// (each turn forfeited and asked again): that loop never looks at the deadline, so the call
// goes out with less than its timeout left in the invocation, is cut short by the invocation's
// end, and the at-most-once intent parks as may-have-been-sent.
func TestACallWhoseRateTurnComesTooLateIsHandedBackNotCutShort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, 1900*time.Millisecond) // within its 2 s timeout
	e.commitOne("evt_late_turn")
	const rate = 4 // one call per 250 ms window
	cfg := outbox.Config{Table: e.table, Now: e.now, Lease: 5 * time.Second, Margin: 500 * time.Millisecond,
		Backoff:   func(int) time.Duration { return 10 * time.Second },
		Executors: map[string]outbox.Executor{"email": outbox.AtMostOnce(&outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second})},
		Limits:    map[string]outbox.Limit{"email": {Rate: rate}},
		Scheduler: schedulerFunc(func(context.Context, string, time.Time) error { return nil }),
	}
	w, err := outbox.New(&slowWindows{API: e.client, n: 3, slow: 300 * time.Millisecond}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// An invocation with room for the call and half a second to wait for its turn.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second+cfg.Margin+500*time.Millisecond)
	defer cancel()
	sum, err := w.Process(ctx, e.claim("evt_late_turn"))
	in := e.claim("evt_late_turn").Intents["email.send"]
	if in.Status == dedup.IntentParked || in.Spent() != 0 && in.Status != dedup.IntentDone {
		t.Fatalf("%v %v: %s after %d attempts (%s); want it handed back (pending, no attempt spent) or done",
			sum, err, in.Status, in.Spent(), in.LastError)
	}
}

// sleepToPhase sleeps until the clock is phase into a window of length w (the windows the rate
// limiter cuts time into: multiples of w since the epoch).
func sleepToPhase(now func() time.Time, w, phase time.Duration) {
	t := now()
	at := t.Truncate(w).Add(phase)
	if !at.After(t) {
		at = at.Add(w)
	}
	time.Sleep(at.Sub(t))
}

// overTheRate returns the first run of calls, from starts[i] to starts[j], that is more than
// rate*T plus two windows' quota over its span T (docs/outbox.md: over any span, never more
// than rate x T plus two quotas).
func overTheRate(starts []time.Time, rate float64) (i, j int, ok bool) {
	q := float64(outbox.RateQuota(rate))
	for i = range starts {
		for j = i; j < len(starts); j++ {
			if float64(j-i+1) > rate*starts[j].Sub(starts[i]).Seconds()+2*q {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

// Invariant (docs/outbox.md, "Per-target limits"): over any span T, never more than rate x T
// plus two windows' quota start, across workers (fixed windows let a span straddling a
// window's end and the next one's start see two quotas, however short the span). At rate 1 (a
// window of one call a second), two workers each with a call: one takes its turn in the later
// part of a window, the other at the start of the next: two calls, never three.
func TestTheRateHoldsOverASpanShorterThanAWindowAcrossWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, 0)
	e.commitOne("evt_rate_a")
	e.commitOne("evt_rate_b")
	const rate = 1
	window := time.Duration(float64(outbox.RateQuota(rate)) / rate * float64(time.Second))
	ws := e.limitedWorkers(2, down, outbox.Limit{Rate: rate}, nil)

	sleepToPhase(e.now, window, window*6/10) // the later part of a window
	if sum, err := ws[0].Process(context.Background(), e.claim("evt_rate_a")); err != nil || sum[outbox.OutcomeDone] != 1 {
		t.Fatalf("first worker: %v %v", sum, err)
	}
	sleepToPhase(e.now, window, 10*time.Millisecond) // the start of the next one
	if sum, err := ws[1].Process(context.Background(), e.claim("evt_rate_b")); err != nil || sum[outbox.OutcomeDone]+sum[outbox.OutcomeHeld] != 1 {
		t.Fatalf("second worker: %v %v", sum, err)
	}
	down.mu.Lock()
	starts := append([]time.Time(nil), down.starts...)
	down.mu.Unlock()
	if i, j, over := overTheRate(starts, rate); over {
		t.Errorf("%d calls started within %s at rate %g (quota %d): over rate x T + two windows' quota (%.2f)",
			j-i+1, starts[j].Sub(starts[i]).Round(time.Millisecond), float64(rate), outbox.RateQuota(rate),
			rate*starts[j].Sub(starts[i]).Seconds()+2*float64(outbox.RateQuota(rate)))
	}
}

// stopping is a worker's table access whose writes fail once stopAfter says so, as if the
// worker's process had died: the worker made its call and could record nothing after it,
// neither the call's outcome nor the slot's give-back.
type stopping struct {
	outbox.API
	stopAfter func(in *dynamodb.UpdateItemInput) bool
}

func (s *stopping) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if s.stopAfter(in) {
		return nil, errors.New("injected: the worker's process stopped")
	}
	return s.API.UpdateItem(ctx, in, optFns...)
}

func numberOf(t *testing.T, v types.AttributeValue) int64 {
	t.Helper()
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("%v is not a number", v)
	}
	x, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Invariant (docs/outbox.md; outbox.Limit): "A worker that stops mid-call holds its slot until
// that lease ends, never longer." A worker with max_in_flight 1 makes its call and stops before
// recording it or giving its slot back. Once its lease (5 s, and the margin) has ended, the
// intent is due again and the slot must be free: another worker runs the intent. The slot was
// written to be held until the admission's whole wait budget (30 s) plus the lease had passed,
// so the stopped worker holds it half a minute longer than its lease.
func TestAStoppedWorkersSlotIsFreeOnceItsLeaseHasEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, 0)
	e.commitOne("evt_stopped")
	cfg := outbox.Config{Table: e.table, Now: e.now, Lease: 5 * time.Second, Margin: 500 * time.Millisecond,
		Backoff:   func(int) time.Duration { return 10 * time.Second },
		Executors: map[string]outbox.Executor{"email": &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}},
		Limits:    map[string]outbox.Limit{"email": {MaxInFlight: 1}}}
	dies, err := outbox.New(&stopping{API: e.client, stopAfter: func(in *dynamodb.UpdateItemInput) bool {
		x := aws.ToString(in.UpdateExpression)
		return strings.Contains(x, "#st = :status") || strings.HasPrefix(x, "REMOVE #holder")
	}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dies.Process(context.Background(), e.claim("evt_stopped")); err == nil {
		t.Fatal("the stopping worker recorded its call")
	}
	in := e.claim("evt_stopped").Intents["email.send"]
	if in.Status != dedup.IntentRunning || len(down.keys) != 1 {
		t.Fatalf("%+v, %d calls: want the call made and left running under its lease", in, len(down.keys))
	}
	slot := e.items()[outbox.LimitPK("email")+"/SLOT#0"]
	t.Logf("lease until %s, slot held until %s", time.UnixMilli(in.LeaseUntil).Format(time.StampMilli),
		time.UnixMilli(numberOf(t, slot["until"])).Format(time.StampMilli))

	// The stopped worker's lease ends, and a margin: the intent is due again, and its slot free.
	e.advance(cfg.Lease + cfg.Margin + time.Second)
	next, err := outbox.New(e.client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second+cfg.Margin+time.Second)
	defer cancel()
	sum, err := next.Process(ctx, e.claim("evt_stopped"))
	if err != nil || sum[outbox.OutcomeDone] != 1 {
		t.Fatalf("%v %v: want the intent run once the stopped worker's lease has ended (its slot is free then)", sum, err)
	}
}

// Invariant (docs/outbox.md): max_in_flight is the calls to the target under way at once, across
// every worker. A call that timed out at the worker is still under way at the downstream (it
// has the request, and answers in its own time), but its slot is given back as soon as the
// timeout is recorded, and the next call starts while it is still running. A downstream slower
// than the target's timeout (1 s against 200 ms) sees three calls at once under max_in_flight 1.
func TestMaxInFlightHoldsWhenCallsOutlastTheirTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, time.Second)
	ids := []string{"evt_slow_a", "evt_slow_b", "evt_slow_c"}
	for _, id := range ids {
		e.commitOne(id)
	}
	ws := e.limitedWorkers(1, down, outbox.Limit{MaxInFlight: 1}, func(c *outbox.Config) {
		c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 200 * time.Millisecond}
	})
	var wg sync.WaitGroup
	for _, id := range ids {
		claim := e.claim(id)
		wg.Go(func() {
			if _, err := ws[0].Process(context.Background(), claim); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	down.mu.Lock()
	peak := down.peak
	down.mu.Unlock()
	if peak > 1 {
		t.Errorf("the downstream had %d calls under way at once, over max_in_flight 1", peak)
	}
}

// Invariant: a paused target is called by no worker and no sweep, and its intents spend no
// attempt, at most once included; once it resumes, the sweeper calls each held intent once, on
// its first attempt, within the target's max_in_flight and rate. The other target of the same
// events runs meanwhile.
func TestAPausedTargetIsCalledByNobodyUntilItResumesThenOnceEachAtItsLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	down := newLimitedDownstream(t, 50*time.Millisecond)
	targets := &outbox.Targets{API: e.client, Table: e.table, Now: e.now}
	if err := targets.Pause(ctx, "email", "ada (test)", "the mail provider's maintenance"); err != nil {
		t.Fatal(err)
	}
	const events, rate = 24, 20
	limit := outbox.Limit{MaxInFlight: 2, Rate: rate}
	atMostOnce := func(c *outbox.Config) { c.Executors["email"] = outbox.AtMostOnce(c.Executors["email"]) }
	e.commit(events)
	raceOnTheBatch(t, e.limitedWorkers(3, down, limit, atMostOnce), e.records())
	e.advance(time.Minute) // the claims are old enough for the sweeper
	rep, err := (&outbox.Sweeper{Worker: e.limitedWorkers(1, down, limit, atMostOnce)[0], MinAge: time.Second}).Run(ctx)
	if err != nil || rep.Summary[outbox.OutcomePaused] != events {
		t.Fatalf("sweep while paused: %+v %v, want the %d email intents held by the pause", rep, err, events)
	}
	if len(down.keys) != 0 {
		t.Fatalf("%d calls to the paused target", len(down.keys))
	}
	for _, c := range e.claims() {
		if in := c.Intents["email.send"]; in.Status != dedup.IntentPending || in.Attempts != 0 || c.PendingShard == "" {
			t.Fatalf("%s while paused: %+v under %q, want pending, due, no attempt, in the due index", c.EventID, in, c.PendingShard)
		}
		if in := c.Intents["fulfilment.create"]; in.Status != dedup.IntentDone {
			t.Fatalf("%s: the other target's intent is %s, want done", c.EventID, in.Status)
		}
	}
	paused, err := targets.Paused(ctx)
	if p := paused["email"]; err != nil || len(paused) != 1 || p.By != "ada (test)" || p.Why != "the mail provider's maintenance" || p.At.IsZero() {
		t.Fatalf("paused targets %+v %v, want email's pause", paused, err)
	}

	if err := targets.Resume(ctx, "email"); err != nil {
		t.Fatal(err)
	}
	if paused, err := targets.Paused(ctx); err != nil || len(paused) != 0 {
		t.Fatalf("after resume: %+v %v, want none paused", paused, err)
	}
	rep, err = (&outbox.Sweeper{Worker: e.limitedWorkers(1, down, limit, atMostOnce)[0], MinAge: time.Second}).Run(ctx)
	if err != nil || rep.Summary[outbox.OutcomeDone] != events {
		t.Fatalf("sweep after resume: %+v %v, want the %d held intents done", rep, err, events)
	}
	if len(down.keys) != events || down.peak > limit.MaxInFlight {
		t.Errorf("%d intents called, %d at once; want %d, at most %d at once", len(down.keys), down.peak, events, limit.MaxInFlight)
	}
	if most, bound := down.mostIn(time.Second), rate+2*outbox.RateQuota(rate); most > bound {
		t.Errorf("%d calls started within a second, over the rate %d (bound %d)", most, rate, bound)
	}
	e.everyIntentDoneOnItsFirstAttempt(down)
}

// Invariant (Targets): a pause made while a target's limit holds an intent back is seen before
// the lease. The worker's copy of the paused targets is read before the limits and trusted for a
// second; a wait on a limit can outlast it, and a call leased then, seconds after Pause returned,
// would reach the paused downstream. Here the pause is made right after the worker read its copy
// (none paused), and the limit holds the next intent for longer than a second: its one
// max_in_flight slot held by another call, or the process's turn at its rate spent. The intent is
// not leased: pending, no attempt, no call. (A worker whose copy is older reads the pause before
// the wait: the same.)
func TestAPauseMadeWhileALimitHoldsAnIntentIsSeenBeforeItsLease(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		limit outbox.Limit
		hold  func(e *env) // holds the next call back for more than a second
	}{
		{"max_in_flight", outbox.Limit{MaxInFlight: 1}, func(e *env) { e.slotHolder("email", 0, e.now().Add(2*time.Second)) }},
		{"rate", outbox.Limit{Rate: 0.5}, func(*env) {}}, // the first call took the process's turn for 2 s
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEnv(t)
			down := newLimitedDownstream(t, 0)
			w := e.limitedWorkers(1, down, c.limit, nil)[0]
			e.commitOne("evt_before")
			e.commitOne("evt_paused")
			if sum, err := w.Process(ctx, e.claim("evt_before")); err != nil || sum[outbox.OutcomeDone] != 1 {
				t.Fatalf("the call before the pause: %v %v, want done", sum, err)
			}
			c.hold(e)
			if err := (&outbox.Targets{API: e.client, Table: e.table}).Pause(ctx, "email", "ada (test)", "the mail provider's maintenance"); err != nil {
				t.Fatal(err)
			}
			sum, err := w.Process(ctx, e.claim("evt_paused"))
			in := e.claim("evt_paused").Intents["email.send"]
			if calls := down.keys[dedup.IdempotencyKey("shop", "evt_paused", "email.send")]; err != nil || sum[outbox.OutcomePaused] != 1 ||
				in.Status != dedup.IntentPending || in.Attempts != 0 || calls != 0 {
				t.Fatalf("paused while its limit held it: %v %v, %d calls, intent %+v; want paused, pending, no attempt, no call", sum, err, calls, in)
			}
		})
	}
}

// A pause names its target and says who and why, as an operator's record does; what cannot be
// recorded is refused before anything is written.
func TestAPauseWithoutItsRecordIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	targets := &outbox.Targets{API: e.client, Table: e.table}
	for field, args := range map[string][3]string{
		"target": {"", "ada", "maintenance"},
		"by":     {"email", strings.Repeat("a", dedup.MaxRedrivenBy+1), "maintenance"},
		"why":    {"email", "ada", "line one\nline two"},
	} {
		var ie *dedup.InvalidError
		if err := targets.Pause(context.Background(), args[0], args[1], args[2]); !errors.As(err, &ie) || ie.Field != field {
			t.Errorf("%q: %v, want an *InvalidError naming %s", args, err, field)
		}
	}
	if paused, err := targets.Paused(context.Background()); err != nil || len(paused) != 0 {
		t.Fatalf("%+v %v, want nothing paused", paused, err)
	}
}

// pausedNow is targets' paused targets, read now.
func pausedNow(t *testing.T, targets *outbox.Targets) map[string]outbox.Pause {
	t.Helper()
	p, err := targets.Paused(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A resume of the pause shown lifts that pause only: once the target was paused again (by
// someone else, or over the same pause) it lifts nothing and says so (ErrPauseChanged), as it
// does once the target was resumed; a pause written before pauses had an id is named by who,
// why and when. Resume itself lifts whatever pause the target has.
func TestAResumeOfAPauseShownLiftsThatPauseOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	targets := &outbox.Targets{API: e.client, Table: e.table, Now: e.now}
	if err := targets.Pause(ctx, "email", "bob", "relay upgrade"); err != nil {
		t.Fatal(err)
	}
	bobs := pausedNow(t, targets)["email"]
	if bobs.ID == "" {
		t.Fatalf("%+v: a pause without its id", bobs)
	}
	if err := targets.Pause(ctx, "email", "bob", "relay upgrade"); err != nil { // the same words, again
		t.Fatal(err)
	}
	if err := targets.ResumePause(ctx, "email", bobs); !errors.Is(err, outbox.ErrPauseChanged) {
		t.Fatalf("a resume of a pause paused over: %v, want ErrPauseChanged", err)
	}
	if err := targets.ResumePause(ctx, "email", pausedNow(t, targets)["email"]); err != nil {
		t.Fatal(err)
	}
	if p := pausedNow(t, targets); len(p) != 0 {
		t.Fatalf("after the resume of the pause shown: %v", p)
	}
	if err := targets.ResumePause(ctx, "email", bobs); !errors.Is(err, outbox.ErrPauseChanged) {
		t.Fatalf("a resume of a target resumed since: %v, want ErrPauseChanged", err)
	}
	// An older release's pause: no id.
	_, err := e.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(e.table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: outbox.PausedPK}, "sk": &types.AttributeValueMemberS{Value: outbox.PausedSK}},
		UpdateExpression:          aws.String("SET #t = :p"),
		ExpressionAttributeNames:  map[string]string{"#t": "paused#crm"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"by": &types.AttributeValueMemberS{Value: "carol"}, "why": &types.AttributeValueMemberS{Value: "migration"}, "at": &types.AttributeValueMemberS{Value: "2026-01-02T03:04:05Z"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	old := pausedNow(t, targets)["crm"]
	other := old
	other.Why = "another reason"
	if err := targets.ResumePause(ctx, "crm", other); !errors.Is(err, outbox.ErrPauseChanged) {
		t.Fatalf("a resume of another pause than the older release's: %v, want ErrPauseChanged", err)
	}
	if err := targets.ResumePause(ctx, "crm", old); err != nil {
		t.Fatal(err)
	}
	if err := targets.Pause(ctx, "email", "dan", "outage"); err != nil {
		t.Fatal(err)
	}
	if err := targets.Resume(ctx, "email"); err != nil || len(pausedNow(t, targets)) != 0 {
		t.Fatalf("an unconditional resume: %v, paused %v", err, pausedNow(t, targets))
	}
}

// A pause of the state shown replaces no pause made since: confirmed for a target not paused,
// it pauses nothing once the target was paused (ErrPauseChanged, the pause kept); confirmed
// over a pause, it replaces that pause only, and pauses nothing once the target was resumed or
// paused again.
func TestAPauseOfTheStateShownReplacesNoPauseMadeSince(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	targets := &outbox.Targets{API: e.client, Table: e.table, Now: e.now}
	if err := targets.PauseIfUnchanged(ctx, "email", "ada", "relay upgrade", nil); err != nil {
		t.Fatal(err)
	}
	adas := pausedNow(t, targets)["email"]
	if adas.By != "ada" || adas.ID == "" {
		t.Fatalf("the pause of a target shown not paused: %+v", adas)
	}
	if err := targets.PauseIfUnchanged(ctx, "email", "bob", "outage", nil); !errors.Is(err, outbox.ErrPauseChanged) {
		t.Fatalf("a pause shown not paused, of a target paused since: %v, want ErrPauseChanged", err)
	}
	if p := pausedNow(t, targets)["email"]; p.ID != adas.ID || p.By != "ada" {
		t.Fatalf("after a refused pause: %+v, want ada's kept", p)
	}
	if err := targets.PauseIfUnchanged(ctx, "email", "carol", "database migration", &adas); err != nil {
		t.Fatal(err)
	}
	if p := pausedNow(t, targets)["email"]; p.By != "carol" || p.ID == adas.ID {
		t.Fatalf("a pause over the pause shown: %+v", p)
	}
	if err := targets.PauseIfUnchanged(ctx, "email", "bob", "outage", &adas); !errors.Is(err, outbox.ErrPauseChanged) {
		t.Fatalf("a pause over a pause paused over since: %v, want ErrPauseChanged", err)
	}
	if err := targets.Resume(ctx, "email"); err != nil {
		t.Fatal(err)
	}
	if err := targets.PauseIfUnchanged(ctx, "email", "bob", "outage", &adas); !errors.Is(err, outbox.ErrPauseChanged) || len(pausedNow(t, targets)) != 0 {
		t.Fatalf("a pause over a pause resumed since: %v, paused %v", err, pausedNow(t, targets))
	}
	var ie *dedup.InvalidError
	if err := targets.PauseIfUnchanged(ctx, "email", "bob", "", nil); !errors.As(err, &ie) || ie.Field != "why" || len(pausedNow(t, targets)) != 0 {
		t.Fatalf("a pause without why: %v, paused %v", err, pausedNow(t, targets))
	}
}

// slotReads counts the Query requests that read a target's slots.
type slotReads struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    int
}

func (s *slotReads) RoundTrip(r *http.Request) (*http.Response, error) {
	if faults.Operation(r) == "Query" && awstest.BodyContains(r, "SLOT#") {
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
	}
	return s.next.RoundTrip(r)
}

// A slot whose take lost its answer is the worker's own when the SDK sends the take again: the
// call goes out at once, on one read of the slots, rather than after the slot's hold (the
// lease) has ended, as it would if the retry were refused as another's.
func TestASlotWhoseTakeLostItsAnswerIsTheWorkersOwnOnTheRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, 0)
	e.commitOne("evt_lost_slot")
	lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: 1, Match: "SET #holder"}
	reads := &slotReads{next: lose}
	w := e.worker(func(c *outbox.Config) {
		c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}
		c.Limits = map[string]outbox.Limit{"email": {MaxInFlight: 1}}
	}, awstest.WithTransport(reads))
	sum, err := w.Process(context.Background(), e.claim("evt_lost_slot"))
	if err != nil || sum[outbox.OutcomeDone] != 1 || len(down.keys) != 1 {
		t.Fatalf("%v %v, %d calls: want the intent done by one call", sum, err, len(down.keys))
	}
	if lose.Lost() != 1 {
		t.Fatalf("%d slot answers lost, want 1", lose.Lost())
	}
	if reads.n != 1 {
		t.Errorf("the slots were read %d times: the retried take was refused as another worker's, and the call waited for the hold to end", reads.n)
	}
}
