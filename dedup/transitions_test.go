package dedup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
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
	} {
		l := lease("evt_lost_" + c.status + c.name)
		if err := c.then(l); err != nil {
			t.Fatalf("%s: %v, want our own write recognised", c.name, err)
		}
		if in := e.claim(t, "shop", l.Claim.EventID).Intents["a"]; in.Status != c.status || in.Attempts != 1 {
			t.Fatalf("%s: %+v, want %s at attempt 1", c.name, in, c.status)
		}
	}
	// A redrive of the parked one, its answer lost too.
	parked := e.claim(t, "shop", "evt_lost_parkedpark")
	if err := lossy.RedriveBy(ctx, parked, "a", "ada (test)"); err != nil {
		t.Fatalf("redrive: %v, want our own write recognised", err)
	}
	if in := e.claim(t, "shop", "evt_lost_parkedpark").Intents["a"]; in.Status != dedup.IntentPending || in.Spent() != 0 {
		t.Fatalf("redriven: %+v, want pending with a fresh budget", in)
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

// A worker whose at-most-once call failed after its lease was over records its own park, or
// learns that it could not: another worker's stranded park of the same attempt ("may have been
// sent") carries the same attempt and lease owner, but it is not this worker's write, and must
// not pass for it (the call's own error would be lost without a word).
func TestAParkDoesNotTakeAStrandedParkOfItsAttemptForItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cs := e.claims(e.client)
	amo := dedup.LeaseOptions{For: time.Second, AtMostOnce: true, StrandedAfter: time.Second}
	mine, err := cs.Lease(ctx, e.outboxClaim(t, "evt_park_stranded"), "a", amo)
	if err != nil || mine == nil || mine.Stranded {
		t.Fatal(mine, err)
	}
	e.clock.Advance(3 * time.Second) // our call outlived the lease and its margin
	stranded, err := cs.Lease(ctx, e.claim(t, "shop", "evt_park_stranded"), "a", amo)
	if err != nil || stranded == nil || !stranded.Stranded {
		t.Fatalf("%+v %v, want a stranded lease", stranded, err)
	}
	if err := cs.Park(ctx, stranded, "stranded: may have been sent"); err != nil {
		t.Fatal(err)
	}
	err = cs.Park(ctx, mine, "timeout: context deadline exceeded")
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
