package console_test

// Findings of a security review of the console (attack26): each test names what must never
// happen, and fails while it does.

import (
	"net/url"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/dedup"
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
