package console_test

// Findings of a security review of the console (attack26): each test names what must never
// happen, and fails while it does.

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/console"
	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// A confirmation is the operator's decision about the parked intent they were shown. Sent
// again later (a browser's reload of the result page resubmits the POST, a stale tab's
// "Re-drive all shown"), it must re-drive nothing more, as docs/console.md promises, even
// when the intent has been parked again since: that is a new failure nobody has looked at.
func TestAReplayedConfirmationDoesNotRedriveAnIntentParkedAgainSince(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_again", false)
	refused := key("shop", "evt_again", "email.send")
	e.down.setRefuse(refused, true)
	e.drain()
	b := e.serve(nil)

	page := b.get("/parked")
	confirm := b.post("/redrive", url.Values{"ref": refs(page), "csrf": {csrf(t, page)}})
	form := url.Values{"ref": refs(confirm), "csrf": {csrf(t, confirm)}, "confirm": {"yes"}}
	mustContain(t, b.post("/redrive", form), "re-driven by")

	e.drain() // the downstream still refuses: parked again, one attempt later
	parkedAgain := e.claim("shop", "evt_again").Intents["email.send"]
	if parkedAgain.Status != dedup.IntentParked {
		t.Fatalf("after the redrive's attempt: %+v, want parked again", parkedAgain)
	}

	// The same confirmation, sent again (a reload).
	again := b.post("/redrive", form)
	if in := e.claim("shop", "evt_again").Intents["email.send"]; in.Status != dedup.IntentParked || in.Attempts != parkedAgain.Attempts {
		t.Fatalf("a replayed confirmation re-drove an intent parked again since it was confirmed: %+v (page: %s)", in, results(again))
	}
}

// results is the redrive page's result column, for a failure message.
func results(r response) string {
	i := strings.Index(r.Body, `<table id="results">`)
	if i < 0 {
		return r.Body
	}
	return r.Body[i:min(len(r.Body), i+600)]
}

// Two redrives of one parked intent made in the same millisecond (two operators, the console
// and hookctl redrive, or a clock coarser than a millisecond): one re-drove it, the other
// found it pending. The other must say so, not report that it re-drove it: the intent's record
// names the first operator only.
func TestARedriveThatFoundTheIntentAlreadyRedrivenSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_twice", false)
	e.down.setRefuse(key("shop", "evt_twice", "email.send"), true)
	e.drain()
	now := time.Now().Truncate(time.Millisecond)
	b := e.serve(func(c *console.Config) { c.Now = func() time.Time { return now } })

	// Someone else re-drives it first, at the same millisecond.
	cl := e.claim("shop", "evt_twice")
	if err := outbox.RedriveBy(context.Background(), e.client, e.table, cl, "email.send", now, "bob (hookctl)"); err != nil {
		t.Fatal(err)
	}
	// The console's confirmation of the page it showed before.
	form := url.Values{"ref": {"s=shop&e=evt_twice&i=email.send"}, "csrf": {csrf(t, b.get("/parked"))}, "confirm": {"yes"}}
	page := b.post("/redrive", form)
	in := e.claim("shop", "evt_twice").Intents["email.send"]
	if in.RedrivenBy != "bob (hookctl)" {
		t.Fatalf("the record: %+v", in)
	}
	if strings.Contains(page.Body, "re-driven by ada") || !strings.Contains(page.Body, "not parked any more") {
		t.Fatalf("the console reports a redrive it did not make (the record says %q):\n%s", in.RedrivenBy, results(page))
	}
}
