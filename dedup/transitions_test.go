package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// answerLost performs each UpdateItem, then sends it again and answers with the second
// answer: the shape of a lost answer that the SDK retried. A transition must take its own
// first write for what it is.
type answerLost struct{ api dedup.UpdateAPI }

func (a answerLost) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := a.api.UpdateItem(ctx, in, o...); err != nil {
		return nil, err
	}
	return a.api.UpdateItem(ctx, in, o...)
}

// outboxClaim commits one event with intents a and b and returns its claim as stored.
func (e *env) outboxClaim(t *testing.T, id string) *dedup.Claim {
	t.Helper()
	_, err := e.store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)}, dedup.Plan{
		Intents: []dedup.Intent{{Name: "a", Target: "email", Payload: []byte(`{}`)}, {Name: "b", Target: "email", Payload: []byte(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	return e.claim(t, "shop", id)
}

func (e *env) claims(api dedup.UpdateAPI) *dedup.Claims {
	return &dedup.Claims{API: api, Table: e.table, Now: e.clock.Now}
}

const leaseFor = time.Minute

// Every transition, its answer lost and the write sent again, recognises its own write: the
// column "a lost answer, sent again, finds" of Claims' table.
func TestEveryTransitionRecognisesItsOwnWriteAfterALostAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	lossy := e.claims(answerLost{e.client})
	ctx := context.Background()
	lease := func(id string) *dedup.Lease {
		l, err := lossy.Lease(ctx, e.outboxClaim(t, id), "a", dedup.LeaseOptions{For: leaseFor})
		if err != nil || l == nil || l.Attempt != 1 {
			t.Fatalf("lease %s: %+v %v, want our own lease at attempt 1", id, l, err)
		}
		return l
	}
	for _, c := range []struct {
		name   string
		then   func(l *dedup.Lease) error
		status string
	}{
		{"done", func(l *dedup.Lease) error { return lossy.Done(ctx, l, "msg_1") }, dedup.IntentDone},
		{"park", func(l *dedup.Lease) error { return lossy.Park(ctx, l, "refused") }, dedup.IntentParked},
		{"retry", func(l *dedup.Lease) error { return lossy.Retry(ctx, l, e.clock.Now().Add(time.Minute), "later") }, dedup.IntentPending},
		{"give back", func(l *dedup.Lease) error { return lossy.GiveBack(ctx, l) }, dedup.IntentPending},
		// A why that is not UTF-8 (a downstream's bytes): stored as the SDK writes it, U+FFFD
		// for each invalid byte, and recognised so.
		{"park not utf8", func(l *dedup.Lease) error { return lossy.Park(ctx, l, "refused: \xff\xfe body \xe2\x82") }, dedup.IntentParked},
		{"retry not utf8", func(l *dedup.Lease) error {
			return lossy.Retry(ctx, l, e.clock.Now().Add(time.Minute), "later: \xc3(")
		}, dedup.IntentPending},
	} {
		l := lease("evt_lost_" + c.status + c.name)
		if err := c.then(l); err != nil {
			t.Fatalf("%s: %v, want our own write recognised", c.name, err)
		}
		in := e.claim(t, "shop", l.Claim.EventID).Intents["a"]
		if in.Status != c.status || in.Attempts != 1 {
			t.Fatalf("%s: %+v, want %s at attempt 1", c.name, in, c.status)
		}
		// Sent twice, written once: one entry, or none for a lease given back unused.
		if want := map[bool]int{true: 0, false: 1}[c.name == "give back"]; len(in.History) != want {
			t.Fatalf("%s: history %+v, want %d entries", c.name, in.History, want)
		}
	}
	// A redrive of the parked one, its answer lost too.
	parked := e.claim(t, "shop", "evt_lost_parkedpark")
	if err := lossy.RedriveBy(ctx, parked, "a", "ada (test)"); err != nil {
		t.Fatalf("redrive: %v, want our own write recognised", err)
	}
	if in := e.claim(t, "shop", "evt_lost_parkedpark").Intents["a"]; in.Status != dedup.IntentPending || in.Spent() != 0 || len(in.History) != 2 {
		t.Fatalf("redriven: %+v, want pending with a fresh budget, its history the park and the redrive", in)
	}
	// And a resolve, after parking again.
	l, err := lossy.Lease(ctx, e.claim(t, "shop", "evt_lost_parkedpark"), "a", dedup.LeaseOptions{For: leaseFor})
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	if err := lossy.Park(ctx, l, "refused again"); err != nil {
		t.Fatal(err)
	}
	if err := lossy.Resolve(ctx, e.claim(t, "shop", "evt_lost_parkedpark"), "a", "ada (test)", "done by hand"); err != nil {
		t.Fatalf("resolve: %v, want our own write recognised", err)
	}
	if in := e.claim(t, "shop", "evt_lost_parkedpark").Intents["a"]; in.Status != dedup.IntentResolved || len(in.History) != 4 {
		t.Fatalf("resolved: %+v, want resolved, its history park, redrive, park, resolve", in)
	}
}

// history is an intent's history as (attempt, outcome, code, error, by) lines.
func history(in dedup.ClaimIntent) []string {
	var lines []string
	for _, h := range in.History {
		lines = append(lines, fmt.Sprintf("%d %s %d %q %q", h.Attempt, h.Outcome, h.Code, h.Error, h.By))
	}
	return lines
}

// Every attempt is recorded by the write that ends it, with its status code when the caller
// knows it, and an operator's redrive and resolve among them, in order, each at its time.
func TestAnIntentsHistoryRecordsEveryAttemptAndEveryOperatorsAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	turn := func(end func(l *dedup.Lease) error) {
		t.Helper()
		e.clock.Advance(time.Minute) // past the last retry's due time
		l, err := cs.Lease(ctx, e.claim(t, "shop", "evt_history"), "a", dedup.LeaseOptions{For: leaseFor})
		if err != nil || l == nil {
			t.Fatal(l, err)
		}
		if err := end(l); err != nil {
			t.Fatal(err)
		}
	}
	e.outboxClaim(t, "evt_history")
	start := e.clock.Now()
	turn(func(l *dedup.Lease) error {
		l.Code = 503
		return cs.Retry(ctx, l, e.clock.Now(), "POST https://x: 503")
	})
	turn(func(l *dedup.Lease) error { return cs.Retry(ctx, l, e.clock.Now(), "timeout") })
	turn(func(l *dedup.Lease) error { l.Code = 400; return cs.Park(ctx, l, "POST https://x: 400") })
	if err := cs.RedriveBy(ctx, e.claim(t, "shop", "evt_history"), "a", "ada (test)"); err != nil {
		t.Fatal(err)
	}
	turn(func(l *dedup.Lease) error { return cs.Done(ctx, l, "msg_1") })
	in := e.claim(t, "shop", "evt_history").Intents["a"]
	want := []string{
		`1 retry 503 "POST https://x: 503" ""`,
		`2 retry 0 "timeout" ""`,
		`3 parked 400 "POST https://x: 400" ""`,
		`3 redriven 0 "" "ada (test)"`,
		`4 done 0 "" ""`,
	}
	if got := history(in); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i, h := range in.History {
		if h.At < start.UnixMilli() || h.At > e.clock.Now().UnixMilli() || (i > 0 && h.At < in.History[i-1].At) {
			t.Fatalf("entry %d at %d: want in order, within the test's time", i, h.At)
		}
	}

	// A resolve is recorded too, with who.
	l, err := cs.Lease(ctx, e.claim(t, "shop", "evt_history"), "b", dedup.LeaseOptions{For: leaseFor})
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	if err := cs.Park(ctx, l, "refused"); err != nil {
		t.Fatal(err)
	}
	if err := cs.Resolve(ctx, e.claim(t, "shop", "evt_history"), "b", "bob (test)", "sent by hand"); err != nil {
		t.Fatal(err)
	}
	want = []string{`1 parked 0 "refused" ""`, `1 resolved 0 "" "bob (test)"`}
	if got := history(e.claim(t, "shop", "evt_history").Intents["b"]); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history of b: %q, want %q", got, want)
	}
}

// The history keeps its last HistoryLength entries, each error cut to HistoryErrorBytes.
func TestAnIntentsHistoryKeepsItsLastEntries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	e.outboxClaim(t, "evt_history_bound")
	long := strings.Repeat("é", dedup.HistoryErrorBytes) // twice the bound, cut on a rune boundary
	const attempts = dedup.HistoryLength + 3
	for range attempts {
		l, err := cs.Lease(ctx, e.claim(t, "shop", "evt_history_bound"), "a", dedup.LeaseOptions{For: leaseFor})
		if err != nil || l == nil {
			t.Fatal(l, err)
		}
		if err := cs.Retry(ctx, l, e.clock.Now(), long); err != nil {
			t.Fatal(err)
		}
	}
	in := e.claim(t, "shop", "evt_history_bound").Intents["a"]
	if len(in.History) != dedup.HistoryLength {
		t.Fatalf("%d entries, want the last %d", len(in.History), dedup.HistoryLength)
	}
	for i, h := range in.History {
		if want := attempts - dedup.HistoryLength + 1 + i; h.Attempt != want {
			t.Fatalf("entry %d is attempt %d, want %d (the newest, oldest first)", i, h.Attempt, want)
		}
		if len(h.Error) > dedup.HistoryErrorBytes+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(h.Error, "…")) {
			t.Fatalf("entry %d's error is %d bytes, want cut to %d", i, len(h.Error), dedup.HistoryErrorBytes)
		}
	}
	if in.LastError != dedup.Truncate(long) {
		t.Fatalf("last_error %q, want the whole error", in.LastError)
	}
}

// What an intent records is what DynamoDB stores and a read returns: each byte that is not
// UTF-8 as U+FFFD (as the SDK's JSON writes it), and a long text cut at its end, whatever comes
// before.
func TestTruncateIsTheTextAsStored(t *testing.T) {
	for in, want := range map[string]string{
		"a\xff\xfeb \xe2\x82":                   "a\uFFFD\uFFFDb \uFFFD\uFFFD",
		"\xff" + strings.Repeat("x", 600):       "\uFFFD" + strings.Repeat("x", 509) + "…",
		strings.Repeat("x", 511) + "é and more": strings.Repeat("x", 511) + "…",
	} {
		if got := dedup.Truncate(in); got != want {
			t.Errorf("Truncate(%q) = %q, want %q", in, got, want)
		}
	}
}

// A fence is never reused: a given-back lease keeps its attempt count (none spent: the budget's
// base moves), the next lease takes the next token, and the given-back lease can record nothing.
func TestAGivenBackLeaseKeepsItsFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	first, err := cs.Lease(ctx, e.outboxClaim(t, "evt_giveback"), "a", dedup.LeaseOptions{For: leaseFor})
	if err != nil || first == nil {
		t.Fatal(first, err)
	}
	if err := cs.GiveBack(ctx, first); err != nil {
		t.Fatal(err)
	}
	in := e.claim(t, "shop", "evt_giveback").Intents["a"]
	if in.Status != dedup.IntentPending || in.Attempts != first.Attempt || in.Spent() != 0 {
		t.Fatalf("given back: %+v, want pending at attempt %d with none spent", in, first.Attempt)
	}
	second, err := cs.Lease(ctx, e.claim(t, "shop", "evt_giveback"), "a", dedup.LeaseOptions{For: leaseFor})
	if err != nil || second == nil || second.Attempt <= first.Attempt {
		t.Fatalf("%+v %v, want a new lease past attempt %d", second, err, first.Attempt)
	}
	if err := cs.Done(ctx, first, ""); !errors.Is(err, dedup.ErrLeaseLost) {
		t.Fatalf("the given-back lease recorded done: %v", err)
	}
	if err := cs.Done(ctx, second, ""); err != nil {
		t.Fatal(err)
	}
}

// leaseAnswersLost makes the first UpdateItem (a lease) land, or not, and answers it with an
// error, as when every answer the SDK waited for was lost: its caller cannot know whether it
// holds the lease. With failing, every write after it fails too.
type leaseAnswersLost struct {
	api             dedup.UpdateAPI
	landed, failing bool
	n               int
}

func (a *leaseAnswersLost) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	a.n++
	if a.n > 1 && !a.failing {
		return a.api.UpdateItem(ctx, in, o...)
	}
	if a.n == 1 && a.landed {
		if _, err := a.api.UpdateItem(ctx, in, o...); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("read tcp: connection reset by peer (every answer lost)")
}

// A lease whose answer is unknown (the SDK's attempts all failed) made no call: if it landed,
// it is given back, so the intent is due again at once, no attempt spent, and an at-most-once
// one is not left stranded, as if its call might have been sent. A lease that did not land,
// or another worker's, is left as it is.
func TestALeaseWhoseAnswerIsLostIsGivenBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	for _, c := range []struct {
		name                               string
		atMostOnce, taken, landed, failing bool
		status                             string // what the lost lease leaves
		attempts                           int
	}{
		{"at least once, landed", false, false, true, false, dedup.IntentPending, 1},
		{"at most once, landed", true, false, true, false, dedup.IntentPending, 1},
		{"at least once, not landed", false, false, false, false, dedup.IntentPending, 0},
		{"at most once, not landed", true, false, false, false, dedup.IntentPending, 0},
		{"at least once, not landed, another's lease", false, true, false, false, dedup.IntentRunning, 1},
		{"at most once, not landed, another's lease", true, true, false, false, dedup.IntentRunning, 1},
		{"at most once, landed, not given back", true, false, true, true, dedup.IntentRunning, 1}, // DynamoDB still failing: no worse than before
	} {
		id := "evt_lost_lease_" + strings.NewReplacer(" ", "_", ",", "", "'", "").Replace(c.name)
		o := dedup.LeaseOptions{For: time.Second, AtMostOnce: c.atMostOnce, StrandedAfter: time.Second}
		claim := e.outboxClaim(t, id)
		if c.taken {
			if l, err := cs.Lease(ctx, claim, "a", o); l == nil || err != nil {
				t.Fatalf("%s: setup: %+v %v", c.name, l, err)
			}
		}
		lossy := e.claims(&leaseAnswersLost{api: e.client, landed: c.landed, failing: c.failing})
		if l, err := lossy.Lease(ctx, claim, "a", o); l != nil || err == nil {
			t.Fatalf("%s: %+v %v, want no lease and the error", c.name, l, err)
		}
		in := e.claim(t, "shop", id).Intents["a"]
		if in.Status != c.status || in.Attempts != c.attempts || in.Status == dedup.IntentPending && in.Spent() != 0 {
			t.Fatalf("%s: %+v, want %s at attempt %d, none spent", c.name, in, c.status, c.attempts)
		}
		if c.failing || c.taken {
			continue
		}
		e.clock.Advance(3 * time.Second) // past a lease and its margin, had it stayed
		l, err := cs.Lease(ctx, e.claim(t, "shop", id), "a", o)
		if err != nil || l == nil || l.Stranded || l.Attempt != c.attempts+1 {
			t.Fatalf("%s: the next lease %+v %v, want a lease to call under, at attempt %d", c.name, l, err, c.attempts+1)
		}
	}
}

// A lost lease's give-back is sent again through a short DynamoDB failure (throttling, a 5xx,
// outlasting the SDK's own attempts) while the lease lasts: left running, the lease would end
// unused, its attempt spent, and an at-most-once intent would come back stranded and be parked
// as may have been sent, though no call was made. A give-back refused for a reason that does not
// pass is not sent again: the intent is left running, as when DynamoDB keeps failing.
func TestALostLeasesGiveBackIsSentAgainThroughAShortDynamoDBFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	const (
		leaseWrite = "intents.#n.attempts = intents.#n.attempts + :one"
		throttled  = `{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`
		internal   = `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}`
		invalid    = `{"__type":"com.amazon.coral.validate#ValidationException","message":"injected"}`
	)
	for _, c := range []struct {
		name     string
		status   int
		body     string
		failures int    // the give-back's requests answered so; the SDK makes three a round
		want     string // the intent after the lost lease
	}{
		{"throttled", 400, throttled, 3, dedup.IntentPending},
		{"throttled for two rounds", 400, throttled, 6, dedup.IntentPending},
		{"server error", 500, internal, 3, dedup.IntentPending},
		{"refused as invalid", 400, invalid, 1, dedup.IntentRunning},
	} {
		id := "evt_give_back_" + strings.ReplaceAll(c.name, " ", "_")
		claim := e.outboxClaim(t, id)
		// The lease lands, its answer is lost, and the SDK's two retries are throttled.
		lost := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: 1, Match: leaseWrite}
		retries := &awstest.InjectErrors{Next: lost, Operation: "UpdateItem", Skip: 1, N: 2, Status: 400, Body: throttled, Match: leaseWrite}
		giveBack := &awstest.InjectErrors{Next: retries, Operation: "UpdateItem", N: c.failures, Status: c.status, Body: c.body, Match: "attempts_base"}
		cs := &dedup.Claims{API: awstest.Client(t, awstest.WithTransport(giveBack)), Table: e.table, Now: e.clock.Now}
		l, err := cs.Lease(ctx, claim, "a", dedup.LeaseOptions{For: 5 * time.Second, AtMostOnce: true, StrandedAfter: time.Second})
		if l != nil || err == nil || lost.Lost() != 1 || retries.Injected() != 2 || giveBack.Injected() != c.failures {
			t.Fatalf("%s: %+v %v (lost %d, retries throttled %d, give-backs failed %d): want no lease, the error, and the faults as planned",
				c.name, l, err, lost.Lost(), retries.Injected(), giveBack.Injected())
		}
		in := e.claim(t, "shop", id).Intents["a"]
		if in.Status != c.want || in.Attempts != 1 || c.want == dedup.IntentPending && (in.Spent() != 0 || in.LeaseOwner != "") {
			t.Fatalf("%s: %+v, want %s at attempt 1 (pending: none spent, no lease)", c.name, in, c.want)
		}
	}
}

// An at-most-once intent running past its lease and its margin comes back stranded: a lease
// that wrote nothing, never given back (its attempt may have been sent), only parked.
func TestAStrandedLeaseIsNeverGivenBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	amo := dedup.LeaseOptions{For: time.Second, AtMostOnce: true, StrandedAfter: time.Second}
	if l, err := cs.Lease(ctx, e.outboxClaim(t, "evt_stranded"), "a", amo); err != nil || l == nil || l.Stranded {
		t.Fatal(l, err)
	}
	e.clock.Advance(time.Second) // the lease is over, not its margin: its worker may still record
	if l, err := cs.Lease(ctx, e.claim(t, "shop", "evt_stranded"), "a", amo); err != nil || l != nil {
		t.Fatalf("%+v %v, want nothing within the margin", l, err)
	}
	e.clock.Advance(2 * time.Second)
	stranded, err := cs.Lease(ctx, e.claim(t, "shop", "evt_stranded"), "a", amo)
	if err != nil || stranded == nil || !stranded.Stranded || stranded.Attempt != 1 {
		t.Fatalf("%+v %v, want a stranded lease at attempt 1", stranded, err)
	}
	if err := cs.GiveBack(ctx, stranded); !errors.Is(err, dedup.ErrStranded) {
		t.Fatalf("GiveBack of a stranded lease: %v, want ErrStranded", err)
	}
	if in := e.claim(t, "shop", "evt_stranded").Intents["a"]; in.Status != dedup.IntentRunning || in.Attempts != 1 {
		t.Fatalf("%+v, want it left running at attempt 1", in)
	}
	if err := cs.Park(ctx, stranded, "may have been sent"); err != nil {
		t.Fatal(err)
	}
	if in := e.claim(t, "shop", "evt_stranded").Intents["a"]; in.Status != dedup.IntentParked || in.Attempts != 1 {
		t.Fatalf("%+v, want it parked at attempt 1", in)
	}
}

// answerLostWhile is answerLost with another's write made between the first send and the
// second: the SDK's retry of a lost answer comes after a backoff, long enough for a worker
// woken by the first write's stream record (or the sweeper) to act on what it wrote.
type answerLostWhile struct {
	api     dedup.UpdateAPI
	between func()
}

func (a answerLostWhile) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := a.api.UpdateItem(ctx, in, o...); err != nil {
		return nil, err
	}
	a.between()
	return a.api.UpdateItem(ctx, in, o...)
}

// A redrive whose answer was lost is still the operator's own redrive when, before the SDK
// sends it again, the worker its wake marker invoked has already leased the intent: the
// redrive applied (its nonce is on the intent), so it must not come back as ErrNotParked.
func TestARedriveRecognisesItsOwnWriteAfterTheWorkerLeasedIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	l, err := cs.Lease(ctx, e.outboxClaim(t, "evt_redrive_leased"), "a", dedup.LeaseOptions{For: leaseFor})
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	if err := cs.Park(ctx, l, "refused"); err != nil {
		t.Fatal(err)
	}
	parked := e.claim(t, "shop", "evt_redrive_leased")
	var worker *dedup.Lease
	lossy := e.claims(answerLostWhile{api: e.client, between: func() {
		// The worker woken by the redrive's stream record leases the intent.
		worker, err = cs.Lease(ctx, e.claim(t, "shop", "evt_redrive_leased"), "a", dedup.LeaseOptions{For: leaseFor})
	}})
	rerr := lossy.RedriveBy(ctx, parked, "a", "ada (test)")
	if err != nil || worker == nil {
		t.Fatalf("the woken worker's lease: %+v %v", worker, err)
	}
	if rerr != nil {
		t.Fatalf("redrive: %v, want nil: the redrive applied (the worker leased what it made pending), its answer was only lost", rerr)
	}
}

// A park without a reason (a custom executor's error with no message, on the last attempt of its
// budget) records none, not an earlier attempt's, and recognises its own write after a lost
// answer as every park does.
func TestAParkWithoutAReasonKeepsNoEarlierOneAndRecognisesItsOwnWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	lossy := e.claims(answerLost{e.client})
	ctx := context.Background()
	l, err := lossy.Lease(ctx, e.outboxClaim(t, "evt_park_no_reason"), "a", dedup.LeaseOptions{For: leaseFor})
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	if err := lossy.Retry(ctx, l, e.clock.Now(), "503 from downstream"); err != nil {
		t.Fatal(err)
	}
	if l, err = lossy.Lease(ctx, e.claim(t, "shop", "evt_park_no_reason"), "a", dedup.LeaseOptions{For: leaseFor}); err != nil || l == nil || l.Attempt != 2 {
		t.Fatal(l, err)
	}
	if err := lossy.Park(ctx, l, ""); err != nil {
		t.Fatalf("park: %v, want our own write recognised", err)
	}
	if in := e.claim(t, "shop", "evt_park_no_reason").Intents["a"]; in.Status != dedup.IntentParked || in.LastError != "" || len(in.History) != 2 {
		t.Fatalf("%+v\nhistory %q, want parked with no reason, its history the retry and the park", in, history(in))
	}
}

// Whatever an attempt's reason (none, bytes that are not UTF-8, a multi-byte character across
// the bound, longer than it), and whatever the attempts before it recorded, a retry or park
// whose answer was lost recognises its own write, and the intent keeps that attempt's reason as
// Truncate gives it: randomized sequences of retries ending in a park.
func TestEveryReasonIsRecognisedAsItsOwnAfterALostAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	lossy := e.claims(answerLost{e.client})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 37))
	pieces := []string{"", "503", " from downstream", "\xff", "\xe2\x82", "é", "€", "\x00", "\"", strings.Repeat("x", 509), strings.Repeat("ü", 200)}
	reason := func() string {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	for i := range 12 {
		id := fmt.Sprintf("evt_reasons_%02d", i)
		claim := e.outboxClaim(t, id)
		for attempt := 1; ; attempt++ {
			l, err := lossy.Lease(ctx, claim, "a", dedup.LeaseOptions{For: leaseFor})
			if err != nil || l == nil || l.Attempt != attempt {
				t.Fatalf("%s: lease %d: %+v %v", id, attempt, l, err)
			}
			why, park := reason(), attempt == 4 || rng.IntN(3) == 0
			if park {
				err = lossy.Park(ctx, l, why)
			} else {
				err = lossy.Retry(ctx, l, e.clock.Now(), why)
			}
			claim = e.claim(t, "shop", id)
			in := claim.Intents["a"]
			if err != nil || in.LastError != dedup.Truncate(why) || len(in.History) != attempt {
				t.Fatalf("%s: attempt %d (park %v) with %q: %v, want our own write recognised; stored %q, history %q",
					id, attempt, park, why, err, in.LastError, history(in))
			}
			if park {
				break
			}
		}
	}
}

// A worker whose at-most-once call failed after its lease was over records its own park, or
// learns that it could not: another worker's stranded park of the same attempt ("may have been
// sent") carries the same attempt and lease owner, but it is not this worker's write, and must
// not pass for it (the call's own error would be lost without a word).
func TestAParkDoesNotTakeAStrandedParkOfItsAttemptForItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	mine, stranded := e.strandedOver(t, cs, "evt_park_stranded")
	if err := cs.Park(ctx, stranded, "stranded: may have been sent"); err != nil {
		t.Fatal(err)
	}
	err := cs.Park(ctx, mine, "timeout: context deadline exceeded")
	in := e.claim(t, "shop", "evt_park_stranded").Intents["a"]
	if err == nil && in.LastError != "timeout: context deadline exceeded" {
		t.Fatalf("our park: nil, but the intent holds another's park (%q): another's write passed for ours", in.LastError)
	}
}

// A retry whose answer was lost is still the worker's own write when, before the SDK sends it
// again, its backoff has passed and the next worker (woken by the scheduler at the due time)
// has leased the intent: the retry applied, so it must not come back as a lost lease.
func TestARetryRecognisesItsOwnWriteAfterTheNextAttemptLeasedIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	l, err := cs.Lease(ctx, e.outboxClaim(t, "evt_retry_leased"), "a", dedup.LeaseOptions{For: leaseFor})
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	var next *dedup.Lease
	lossy := e.claims(answerLostWhile{api: e.client, between: func() {
		e.clock.Advance(2 * time.Second) // the backoff passed while the SDK waited to send it again
		next, err = cs.Lease(ctx, e.claim(t, "shop", "evt_retry_leased"), "a", dedup.LeaseOptions{For: leaseFor})
	}})
	rerr := lossy.Retry(ctx, l, e.clock.Now().Add(time.Second), "503")
	if err != nil || next == nil || next.Attempt != l.Attempt+1 {
		t.Fatalf("the next attempt's lease: %+v %v", next, err)
	}
	if rerr != nil {
		t.Fatalf("retry: %v, want nil: the retry applied (the next attempt leased what it made pending), its answer was only lost", rerr)
	}
}

// parkBoth leases and parks both intents of a new event's claim and returns the claim as stored.
func (e *env) parkBoth(t *testing.T, id string) *dedup.Claim {
	t.Helper()
	cs := e.claims(e.client)
	for _, name := range []string{"a", "b"} {
		l, err := cs.Lease(context.Background(), e.outboxClaim0(t, id), name, dedup.LeaseOptions{For: leaseFor})
		if err != nil || l == nil {
			t.Fatal(l, err)
		}
		if err := cs.Park(context.Background(), l, "refused"); err != nil {
			t.Fatal(err)
		}
	}
	return e.claim(t, "shop", id)
}

// outboxClaim0 is the event's claim, committed if it is not yet.
func (e *env) outboxClaim0(t *testing.T, id string) *dedup.Claim {
	t.Helper()
	if c, err := dedup.GetClaim(context.Background(), e.client, e.table, "shop", id); err == nil {
		return c
	}
	return e.outboxClaim(t, id)
}

// A resolved intent is finished: the claim stays in the parked view while another intent is
// parked, and leaves the index with the last one resolved; who, why and when are recorded; a
// resolve of an intent not parked as shown writes nothing.
func TestAResolvedIntentLeavesTheParkedViewWithTheLastParkedOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(answerLost{e.client}) // every answer lost once: the resolve recognises its own write
	c := e.parkBoth(t, "evt_resolve")
	if !dedup.IsParkedShard(c.PendingShard) {
		t.Fatalf("setup: under %q, want a parked shard", c.PendingShard)
	}
	if err := cs.Resolve(ctx, c, "a", "ada (test)", "refunded by hand"); err != nil {
		t.Fatal(err)
	}
	c = e.claim(t, "shop", "evt_resolve")
	a := c.Intents["a"]
	if a.Status != dedup.IntentResolved || a.Resolution != "refunded by hand" || a.ResolvedBy != "ada (test)" || a.ResolvedAt == "" || a.LastError != "refused" {
		t.Fatalf("%+v, want resolved with who, why and when, its last error kept", a)
	}
	if !dedup.IsParkedShard(c.PendingShard) {
		t.Fatalf("under %q with b still parked, want its parked shard", c.PendingShard)
	}
	if err := cs.Resolve(ctx, c, "b", "ada (test)", "the customer cancelled"); err != nil {
		t.Fatal(err)
	}
	if c = e.claim(t, "shop", "evt_resolve"); c.PendingShard != "" || c.Intents["b"].Status != dedup.IntentResolved {
		t.Fatalf("under %q (%+v), want out of the index with nothing parked or open", c.PendingShard, c.Intents)
	}
	if err := cs.Resolve(ctx, c, "b", "ada (test)", "again"); !errors.Is(err, dedup.ErrNotParked) {
		t.Fatalf("a second resolve: %v, want ErrNotParked", err)
	}
	if err := e.claims(e.client).Redrive(ctx, c, "a"); !errors.Is(err, dedup.ErrNotParked) {
		t.Fatalf("a redrive of a resolved intent: %v, want ErrNotParked", err)
	}
}

// A resolve names what it refuses, writes nothing then, and never closes an intent re-driven
// since the operator read it, nor moves a claim whose other intent is open.
func TestAResolveRefusesBadInputAndAnIntentNoLongerAsShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	shown := e.parkBoth(t, "evt_resolve_refused")
	for _, c := range []struct{ by, why, field string }{
		{"", "why", "resolved_by"}, {"ada\n", "why", "resolved_by"}, {"ada", "", "resolution"},
		{"ada", string(make([]byte, dedup.MaxResolution+1)), "resolution"}, {"ada", "a\x00b", "resolution"},
	} {
		var inv *dedup.InvalidError
		if err := cs.Resolve(ctx, shown, "a", c.by, c.why); !errors.As(err, &inv) || inv.Field != c.field {
			t.Fatalf("by %q why %q: %v, want an InvalidError naming %s", c.by, c.why, err, c.field)
		}
	}
	if err := cs.Redrive(ctx, shown, "b"); err != nil {
		t.Fatal(err)
	}
	if err := cs.Resolve(ctx, shown, "b", "ada", "as shown"); !errors.Is(err, dedup.ErrNotParked) {
		t.Fatalf("resolve of an intent re-driven since: %v, want ErrNotParked", err)
	}
	if err := cs.Resolve(ctx, e.claim(t, "shop", "evt_resolve_refused"), "a", "ada", "closed"); err != nil {
		t.Fatal(err)
	}
	c := e.claim(t, "shop", "evt_resolve_refused")
	if c.Intents["a"].Status != dedup.IntentResolved || c.Intents["b"].Status != dedup.IntentPending || c.PendingShard != dedup.PendingShard(c.PK) {
		t.Fatalf("%+v under %q: want a resolved, b pending, the claim under its due shard", c.Intents, c.PendingShard)
	}
}

// Resolving every parked intent of a claim read once (an operator's page, a script) takes the
// claim out of the index, though the read showed the others parked: the last resolve settles.
func TestResolvingEveryParkedIntentFromOneReadLeavesTheIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	shown := e.parkBoth(t, "evt_resolve_stale")
	for _, name := range []string{"a", "b"} {
		if err := cs.Resolve(ctx, shown, name, "ada", "closed"); err != nil {
			t.Fatal(err)
		}
	}
	if c := e.claim(t, "shop", "evt_resolve_stale"); c.PendingShard != "" {
		t.Fatalf("under %q with nothing parked or open (%+v), want out of the index", c.PendingShard, c.Intents)
	}
}

// takeover commits the event id, leases its intent a, lets that lease pass (its call outlives
// it) and leases a again: the first attempt and the second, which took it over.
func (e *env) takeover(t *testing.T, cs *dedup.Claims, id string) (first, second *dedup.Lease) {
	t.Helper()
	ctx := context.Background()
	e.outboxClaim(t, id)
	first, err := cs.Lease(ctx, e.claim(t, "shop", id), "a", dedup.LeaseOptions{For: leaseFor})
	if err != nil || first == nil {
		t.Fatal(first, err)
	}
	e.clock.Advance(2 * leaseFor) // the first call outlives its lease
	second, err = cs.Lease(ctx, e.claim(t, "shop", id), "a", dedup.LeaseOptions{For: leaseFor})
	if err != nil || second == nil || second.Attempt != 2 {
		t.Fatalf("takeover: %+v %v, want attempt 2", second, err)
	}
	return first, second
}

// An attempt whose call outlived its lease is still an attempt that called the downstream:
// another worker took the intent over (the next attempt) and finished it, and then this
// attempt's worker records what its call got. The fence rightly refuses its status (ErrLeaseLost),
// but the history, which "cannot say what did not happen, nor miss what did", then misses a
// call that happened: the operator reading it sees attempt 2 done and nothing of attempt 1,
// whose call may have been applied too (a second call of one key).
func TestAnAttemptWhoseLeaseWasTakenOverIsInTheHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	first, second := e.takeover(t, cs, "evt_overtaken")
	if err := cs.Done(ctx, second, "msg_2"); err != nil {
		t.Fatal(err)
	}
	first.Code = 500
	if err := cs.Retry(ctx, first, e.clock.Now().Add(time.Minute), "POST https://x: 500"); !errors.Is(err, dedup.ErrLeaseLost) {
		t.Fatalf("the first attempt's record: %v, want ErrLeaseLost", err)
	}
	in := e.claim(t, "shop", "evt_overtaken").Intents["a"]
	for _, h := range in.History {
		if h.Attempt == 1 {
			return
		}
	}
	t.Errorf("history %q: attempt 1 called the downstream (answered 500) and is not in it", history(in))
}

// An attempt's late entry is added once, though the SDK sends its write again after a lost
// answer, and an operator's action from a claim read before it keeps it: the history is
// rewritten whole only on condition that it is as read.
func TestALateAttemptsEntryIsAddedOnceAndKeptByAnOperatorsAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	first, second := e.takeover(t, cs, "evt_late")
	if err := cs.Park(ctx, second, "http 422"); err != nil {
		t.Fatal(err)
	}
	shown := e.claim(t, "shop", "evt_late") // the operator's page, read before the late entry
	first.Code = 503
	if err := e.claims(answerLost{e.client}).Retry(ctx, first, e.clock.Now().Add(time.Minute), "http 503"); !errors.Is(err, dedup.ErrLeaseLost) {
		t.Fatalf("the first attempt's retry: %v, want ErrLeaseLost", err)
	}
	if h := history(e.claim(t, "shop", "evt_late").Intents["a"]); len(h) != 2 || !strings.HasPrefix(h[1], "1 retry 503") {
		t.Fatalf("history %q: want attempt 2's park, then attempt 1's retry once", h)
	}
	if err := cs.Resolve(ctx, shown, "a", "ada (test)", "done by hand"); err != nil {
		t.Fatal(err)
	}
	in := e.claim(t, "shop", "evt_late").Intents["a"]
	if h := history(in); len(h) != 3 || !strings.HasPrefix(h[1], "1 retry 503") || !in.History[1].Late || in.History[0].Late || in.History[2].Outcome != dedup.IntentResolved {
		t.Fatalf("history %q (%+v): want the late entry kept by the resolve", h, in.History)
	}
}

// A claim's place in the pending index follows its intents: its due shard while one is open
// and none parked, its due-parked shard while one is open and one parked (the parked view and
// the sweeper both read it), its parked shard once none is open, out of the index once none is
// parked either; each transition writes it, a retry and a lease leave it.
func TestAClaimIsUnderTheShardItsIntentsCallFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	c := e.outboxClaim(t, "evt_place")
	due := dedup.PendingShard(c.PK)
	want := func(step, shard string) {
		t.Helper()
		if c = e.claim(t, "shop", "evt_place"); c.PendingShard != shard {
			t.Fatalf("%s: under %q (%+v), want %q", step, c.PendingShard, c.Intents, shard)
		}
	}
	lease := func(name string) *dedup.Lease {
		t.Helper()
		l, err := cs.Lease(ctx, e.claim(t, "shop", "evt_place"), name, dedup.LeaseOptions{For: leaseFor})
		if err != nil || l == nil {
			t.Fatal(l, err)
		}
		return l
	}
	if err := cs.Park(ctx, lease("a"), "http 422"); err != nil {
		t.Fatal(err)
	}
	want("a parked, b pending", dedup.DueParkedShardFor(due))
	parkedSince := c.PendingSince
	e.clock.Advance(time.Second)
	if err := cs.Retry(ctx, lease("b"), e.clock.Now().Add(time.Hour), "http 503"); err != nil {
		t.Fatal(err)
	}
	if want("b retried", dedup.DueParkedShardFor(due)); c.PendingSince != parkedSince {
		t.Fatalf("a retry moved the claim's time in the parked view: %d, was %d", c.PendingSince, parkedSince)
	}
	if err := cs.Redrive(ctx, c, "a"); err != nil {
		t.Fatal(err)
	}
	want("a re-driven", due)
	if err := cs.Park(ctx, lease("a"), "http 422"); err != nil {
		t.Fatal(err)
	}
	want("a parked again", dedup.DueParkedShardFor(due))
	if err := cs.Resolve(ctx, c, "a", "ada (test)", "done by hand"); err != nil {
		t.Fatal(err)
	}
	want("a resolved, b pending", due)
	e.clock.Advance(time.Hour)
	if err := cs.Park(ctx, lease("b"), "http 422"); err != nil {
		t.Fatal(err)
	}
	want("b parked, a resolved", dedup.ParkedShardFor(due))
	if err := cs.Resolve(ctx, c, "b", "ada (test)", "done by hand"); err != nil {
		t.Fatal(err)
	}
	want("both resolved", "")
}

// indexWritesFail refuses every write that only moves a claim in the pending index (a Settle),
// as a throttled table would: what a transition writes with the intent's status stands alone.
type indexWritesFail struct{ api dedup.UpdateAPI }

func (f indexWritesFail) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if u := *in.UpdateExpression; strings.HasPrefix(u, "SET pending_shard") || strings.HasPrefix(u, "REMOVE pending_shard") {
		return nil, errors.New("ProvisionedThroughputExceededException: the table is throttling")
	}
	return f.api.UpdateItem(ctx, in, o...)
}

// A finish decided from its lease's read, which showed its sibling parked, while an operator
// re-drove that sibling since: its write moves the claim only on condition that the sibling is
// still parked, so it is refused and written again from the claim as it is, and the claim
// stays among the due work, with no Settle to repair it.
func TestAFinishFromAStaleReadNeverHidesAReDrivenIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	c := e.outboxClaim(t, "evt_stale_finish")
	b, err := cs.Lease(ctx, c, "b", dedup.LeaseOptions{For: leaseFor})
	if err != nil || b == nil {
		t.Fatal(b, err)
	}
	if err := cs.Park(ctx, b, "http 422"); err != nil {
		t.Fatal(err)
	}
	a, err := cs.Lease(ctx, e.claim(t, "shop", "evt_stale_finish"), "a", dedup.LeaseOptions{For: leaseFor}) // its read: b parked
	if err != nil || a == nil {
		t.Fatal(a, err)
	}
	if err := cs.Redrive(ctx, e.claim(t, "shop", "evt_stale_finish"), "b"); err != nil {
		t.Fatal(err)
	}
	if err := e.claims(indexWritesFail{e.client}).Done(ctx, a, ""); err != nil {
		t.Fatal(err)
	}
	if c := e.claim(t, "shop", "evt_stale_finish"); c.PendingShard != dedup.PendingShard(c.PK) || c.Intents["b"].Status != dedup.IntentPending {
		t.Fatalf("under %q with b %s: the re-driven intent must stay among the due work", c.PendingShard, c.Intents["b"].Status)
	}
}

// An operator's action is conditional on the intent's state as shown (parked, at the attempt
// count shown, in the incarnation shown), each on its own: a claim whose history is as stored
// (the console's, read just before, with the state its form carried) acts on nothing else.
func TestAnOperatorsActionIsConditionalOnTheStateShown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		shown func(t *testing.T, e *env, now *dedup.Claim) *dedup.Claim
	}{
		{"an intent not parked", func(t *testing.T, e *env, now *dedup.Claim) *dedup.Claim {
			if err := e.claims(e.client).Redrive(context.Background(), now, "a"); err != nil {
				t.Fatal(err)
			}
			return shownAs(e.claim(t, "shop", now.EventID), "a", dedup.IntentParked, now.Intents["a"].Attempts, now.CommitToken)
		}},
		{"another attempt count", func(t *testing.T, e *env, now *dedup.Claim) *dedup.Claim {
			return shownAs(now, "a", dedup.IntentParked, now.Intents["a"].Attempts-1, now.CommitToken)
		}},
		{"another incarnation", func(t *testing.T, e *env, now *dedup.Claim) *dedup.Claim {
			return shownAs(now, "a", dedup.IntentParked, now.Intents["a"].Attempts, "0123456789abcdef0123456789abcdef")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			shown := c.shown(t, e, e.parkBoth(t, "evt_shown"))
			before := e.claim(t, "shop", "evt_shown")
			ctx := context.Background()
			if err := e.claims(e.client).Redrive(ctx, shown, "a"); !errors.Is(err, dedup.ErrNotParked) {
				t.Fatalf("redrive: %v, want ErrNotParked", err)
			}
			if err := e.claims(e.client).Resolve(ctx, shown, "a", "ada (test)", "closed"); !errors.Is(err, dedup.ErrNotParked) {
				t.Fatalf("resolve: %v, want ErrNotParked", err)
			}
			if after := e.claim(t, "shop", "evt_shown"); after.Intents["a"].Status != before.Intents["a"].Status || len(after.Intents["a"].History) != len(before.Intents["a"].History) {
				t.Fatalf("an action on a state not shown wrote: %+v, was %+v", after.Intents["a"], before.Intents["a"])
			}
		})
	}
}

// shownAs is claim as a form carried it: intent in status at attempts, in incarnation commit.
func shownAs(claim *dedup.Claim, intent, status string, attempts int, commit string) *dedup.Claim {
	shown := *claim
	shown.CommitToken = commit
	shown.Intents = maps.Clone(claim.Intents)
	in := shown.Intents[intent]
	in.Status, in.Attempts = status, attempts
	shown.Intents[intent] = in
	return &shown
}

// threeIntents commits one event with intents a, b and c and returns its claim as stored.
func (e *env) threeIntents(t *testing.T, id string) *dedup.Claim {
	t.Helper()
	_, err := e.store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)}, dedup.Plan{
		Intents: []dedup.Intent{{Name: "a", Target: "email", Payload: []byte(`{}`)}, {Name: "b", Target: "email", Payload: []byte(`{}`)}, {Name: "c", Target: "email", Payload: []byte(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	return e.claim(t, "shop", id)
}

// strandedOver leases at-most-once intent "a" of a new claim id (mine), lets its call outlive
// the lease and its margin, and has another worker take the stranded lease over it.
func (e *env) strandedOver(t *testing.T, cs *dedup.Claims, id string) (mine, stranded *dedup.Lease) {
	t.Helper()
	ctx := context.Background()
	amo := dedup.LeaseOptions{For: time.Second, AtMostOnce: true, StrandedAfter: time.Second}
	mine, err := cs.Lease(ctx, e.outboxClaim(t, id), "a", amo)
	if err != nil || mine == nil || mine.Stranded {
		t.Fatal(mine, err)
	}
	e.clock.Advance(3 * time.Second) // our call outlived the lease and its margin
	stranded, err = cs.Lease(ctx, e.claim(t, "shop", id), "a", amo)
	if err != nil || stranded == nil || !stranded.Stranded {
		t.Fatalf("%+v %v, want a stranded lease", stranded, err)
	}
	return mine, stranded
}

// A stranded lease makes no call: when the attempt it was to park finished meanwhile (its
// worker recorded it done just after the lease and its margin ran out), its park is refused,
// and nothing of it belongs in the history: no late entry, and the attempt once, as it ended.
func TestARefusedStrandedParkAddsNothingToTheHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	mine, stranded := e.strandedOver(t, cs, "evt_stranded_late")
	if err := cs.Done(ctx, mine, "msg_1"); err != nil {
		t.Fatal(err)
	}
	if err := cs.Park(ctx, stranded, "at-most-once: attempt 1 may have been sent"); !errors.Is(err, dedup.ErrLeaseLost) {
		t.Fatalf("the stranded park: %v, want ErrLeaseLost", err)
	}
	in := e.claim(t, "shop", "evt_stranded_late").Intents["a"]
	if h := history(in); in.Status != dedup.IntentDone || len(h) != 1 || !strings.HasPrefix(h[0], "1 done") {
		t.Fatalf("%s, history %q: want done, attempt 1 once, as it ended (a stranded lease called nothing)", in.Status, h)
	}
}

// A redrive decided from a read that showed the claim under its due-parked shard (another
// intent open then), while that intent finished since and moved the claim to its parked shard:
// the re-driven intent is open, so the claim must be where the sweeper reads, not left under
// the parked shard, which it never reads.
func TestARedriveFromAStaleReadPutsTheClaimAmongTheDueWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	e.threeIntents(t, "evt_stale_redrive")
	for _, name := range []string{"a", "b"} {
		l, err := cs.Lease(ctx, e.claim(t, "shop", "evt_stale_redrive"), name, dedup.LeaseOptions{For: leaseFor})
		if err != nil || l == nil {
			t.Fatal(l, err)
		}
		if err := cs.Park(ctx, l, "http 422"); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cs.Lease(ctx, e.claim(t, "shop", "evt_stale_redrive"), "c", dedup.LeaseOptions{For: leaseFor})
	if err != nil || c == nil {
		t.Fatal(c, err)
	}
	shown := e.claim(t, "shop", "evt_stale_redrive") // the operator's page: a and b parked, c running
	if !dedup.IsDueParkedShard(shown.PendingShard) {
		t.Fatalf("setup: under %q, want its due-parked shard", shown.PendingShard)
	}
	if err := cs.Done(ctx, c, ""); err != nil {
		t.Fatal(err)
	}
	if err := cs.Redrive(ctx, shown, "a"); err != nil {
		t.Fatal(err)
	}
	now := e.claim(t, "shop", "evt_stale_redrive")
	if want := dedup.DueParkedShardFor(now.PendingShard); now.PendingShard != want {
		t.Fatalf("a %s, b %s, c %s under %q, want %q: the re-driven intent is out of every shard the sweeper reads",
			now.Intents["a"].Status, now.Intents["b"].Status, now.Intents["c"].Status, now.PendingShard, want)
	}
}

// A park decided from a read that showed another intent parked (the claim under its due-parked
// shard), while an operator re-drove that intent since (the claim back under its due shard):
// the write that parks must itself put the claim where the parked view reads, as the finish
// that re-drove nothing does, whatever becomes of the Settle after it (a throttled table).
func TestAParkFromAStaleReadPutsTheClaimInTheParkedView(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	e.threeIntents(t, "evt_stale_park")
	b, err := cs.Lease(ctx, e.claim(t, "shop", "evt_stale_park"), "b", dedup.LeaseOptions{For: leaseFor})
	if err != nil || b == nil {
		t.Fatal(b, err)
	}
	if err := cs.Park(ctx, b, "http 422"); err != nil {
		t.Fatal(err)
	}
	a, err := cs.Lease(ctx, e.claim(t, "shop", "evt_stale_park"), "a", dedup.LeaseOptions{For: leaseFor}) // its read: b parked, c pending
	if err != nil || a == nil {
		t.Fatal(a, err)
	}
	if err := cs.Redrive(ctx, e.claim(t, "shop", "evt_stale_park"), "b"); err != nil {
		t.Fatal(err)
	}
	_ = e.claims(indexWritesFail{e.client}).Park(ctx, a, "http 422") // its Settle is throttled
	now := e.claim(t, "shop", "evt_stale_park")
	if now.Intents["a"].Status != dedup.IntentParked {
		t.Fatalf("a %s, want parked", now.Intents["a"].Status)
	}
	if want := dedup.DueParkedShardFor(now.PendingShard); now.PendingShard != want {
		t.Fatalf("a parked, b %s, c %s under %q, want %q: the parked intent is out of every shard the parked view reads",
			now.Intents["b"].Status, now.Intents["c"].Status, now.PendingShard, want)
	}
}

// An attempt whose lease was taken over, and whose retry is refused, is not the next
// attempt's retry because both name the same due time and error (a backoff without jitter, or
// one that lands on the same millisecond; the same downstream failing alike): its call was
// made, so it is in the history, late, and its worker hears of the lost lease.
func TestARefusedRetryIsNotTakenForTheNextAttemptsRetryOfTheSameDueTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	first, second := e.takeover(t, cs, "evt_same_retry")
	next := e.clock.Now().Add(5 * time.Second)
	second.Code = 503
	if err := cs.Retry(ctx, second, next, "http 503"); err != nil {
		t.Fatal(err)
	}
	first.Code = 503
	err := cs.Retry(ctx, first, next, "http 503")
	in := e.claim(t, "shop", "evt_same_retry").Intents["a"]
	late := false
	for _, h := range in.History {
		late = late || (h.Attempt == 1 && h.Late)
	}
	if !errors.Is(err, dedup.ErrLeaseLost) || !late {
		t.Fatalf("the first attempt's retry: %v, history %q: want ErrLeaseLost and attempt 1's late entry", err, history(in))
	}
}
