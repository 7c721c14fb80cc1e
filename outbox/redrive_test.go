package outbox_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// A redrive is conditional on the claim it is given: an operator's page read before the event
// expired and was claimed again names the earlier incarnation, and re-drives nothing of the new
// one, even where the new one's intent is parked at the same attempt count.
func TestARedriveOfAnEarlierIncarnationWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusUnprocessableEntity, 0 }
	w := e.worker(nil)
	commit := e.readmittable("evt_inc_redrive")
	commit()
	if _, err := w.Process(context.Background(), e.claim("evt_inc_redrive")); err != nil {
		t.Fatal(err)
	}
	shown := e.claim("evt_inc_redrive") // what the operator was shown: parked at attempt 1
	if in := shown.Intents["email.send"]; in.Status != dedup.IntentParked || in.Attempts != 1 {
		t.Fatalf("setup: %+v, want parked at attempt 1", in)
	}
	e.advance(2 * time.Hour) // the claim expires; the event is claimed again, and parks alike
	commit()
	if _, err := w.Process(context.Background(), e.claim("evt_inc_redrive")); err != nil {
		t.Fatal(err)
	}
	now := e.claim("evt_inc_redrive")
	if in := now.Intents["email.send"]; in.Status != dedup.IntentParked || in.Attempts != 1 || now.CommitToken == shown.CommitToken {
		t.Fatalf("setup: %+v (incarnation %s), want the new incarnation parked at attempt 1", in, now.CommitToken)
	}
	if err := redriveByAt(context.Background(), e.client, e.table, shown, "email.send", e.now(), "ada (test)"); err != dedup.ErrNotParked {
		t.Fatalf("a redrive of the earlier incarnation: %v, want ErrNotParked", err)
	}
	if in := e.claim("evt_inc_redrive").Intents["email.send"]; in.Status != dedup.IntentParked || in.RedrivenBy != "" {
		t.Fatalf("the new incarnation was re-driven from the earlier one's page: %+v", in)
	}
	if err := redriveByAt(context.Background(), e.client, e.table, now, "email.send", e.now(), "ada (test)"); err != nil {
		t.Fatalf("a redrive of the incarnation shown: %v", err)
	}
}

// A redrive given an intent's state from before its last attempt (a stale page: parked, run
// again after someone else's redrive, parked again) re-drives nothing.
func TestARedriveOfAnIntentParkedAgainSinceItWasReadWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusUnprocessableEntity, 0 }
	w := e.worker(nil)
	e.commit(1)
	w.HandleStream(context.Background(), batch(e.records()))
	shown := e.claims()[0]
	if err := redriveByAt(context.Background(), e.client, e.table, shown, "email.send", e.now(), "bob (hookctl)"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Process(context.Background(), e.claims()[0]); err != nil {
		t.Fatal(err)
	}
	again := e.claims()[0].Intents["email.send"]
	if again.Status != dedup.IntentParked || again.Attempts != shown.Intents["email.send"].Attempts+1 {
		t.Fatalf("setup: %+v, want parked again one attempt later", again)
	}
	if err := redriveByAt(context.Background(), e.client, e.table, shown, "email.send", e.now(), "ada (console)"); err != dedup.ErrNotParked {
		t.Fatalf("a redrive of the state shown before: %v, want ErrNotParked", err)
	}
	if in := e.claims()[0].Intents["email.send"]; in.Status != dedup.IntentParked || in.RedrivenBy != "bob (hookctl)" {
		t.Fatalf("%+v: want it parked, bob's redrive the last", in)
	}
}

// A redrive recognises its own write by a nonce of its own, not by the time: the SDK's retry
// after a lost response finds the intent pending with that nonce and reports the redrive
// done; a redrive that finds another's, made in the same millisecond from the same claim (two
// operators, hookctl and the console, a coarse clock), reports ErrNotParked, and the record
// names the other.
func TestARedriveTellsItsOwnLostWriteFromAnothersInTheSameMillisecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusUnprocessableEntity, 0 }
	w := e.worker(nil)
	e.commit(1)
	w.HandleStream(context.Background(), batch(e.records()))
	shown := e.claims()[0]
	now := e.now().Truncate(time.Millisecond)

	lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: 1}
	lossy := awstest.Client(t, awstest.WithTransport(lose))
	if err := redriveByAt(context.Background(), lossy, e.table, shown, "email.send", now, "ada (console)"); err != nil {
		t.Fatalf("a redrive whose answer was lost: %v, want its own write recognised", err)
	}
	if lose.Lost() != 1 {
		t.Fatal("no response was lost")
	}
	if err := redriveByAt(context.Background(), e.client, e.table, shown, "fulfilment.create", now, "ada (console)"); err != nil {
		t.Fatal(err)
	}
	for _, intent := range []string{"email.send", "fulfilment.create"} {
		if err := redriveByAt(context.Background(), e.client, e.table, shown, intent, now, "bob (hookctl)"); err != dedup.ErrNotParked {
			t.Fatalf("%s: a second redrive in the same millisecond: %v, want ErrNotParked", intent, err)
		}
		if in := e.claims()[0].Intents[intent]; in.Status != dedup.IntentPending || in.RedrivenBy != "ada (console)" {
			t.Fatalf("%s: %+v, want it pending, ada's redrive the record", intent, in)
		}
	}
}
