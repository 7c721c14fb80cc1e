package console_test

// Findings of a security review of the console (attack26): each test names what must never
// happen, and fails while it does.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/console"
	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
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

// An at-most-once intent parked after a 503 may have been applied: docs/outbox.md makes its
// redrive "a person's call: check the downstream". The Parked page's "Re-drive all shown"
// selects it with the rest, and neither the list nor the confirmation says which of the
// intents are at-most-once and may have been sent: one confirmation of a batch of 422s sends
// it again.
func TestTheRedriveConfirmationNamesAnAtMostOnceIntentThatMayHaveBeenSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f, err := sources.Parse([]byte(strings.Replace(testSources, `"headers": {"X-Api-Key": "SECRET-HEADER-VALUE"}`,
		`"headers": {"X-Api-Key": "SECRET-HEADER-VALUE"}, "delivery": "at-most-once"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Targets["email"].Delivery != sources.AtMostOnce {
		t.Fatal("setup: email is not at-most-once")
	}
	e.file = f
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable) // it may have applied it, all the same
	}))
	t.Cleanup(busy.Close)
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unknown order", http.StatusUnprocessableEntity)
	}))
	t.Cleanup(refuse.Close)
	email := outbox.AtMostOnce(&outbox.HTTPExecutor{URL: busy.URL, Timeout: 5 * time.Second})
	crm := &outbox.HTTPExecutor{URL: refuse.URL, Timeout: 5 * time.Second}
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": email, "crm": crm},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	e.commit("shop", "evt_amo", false)
	e.drain()
	cl := e.claim("shop", "evt_amo")
	if cl.Intents["email.send"].Status != dedup.IntentParked || cl.Intents["crm.update"].Status != dedup.IntentParked {
		t.Fatalf("setup: %+v, want both parked", cl.Intents)
	}
	b := e.serve(nil)
	page := b.get("/parked")
	all := regexp.MustCompile(`(?s)<form method="post" action="/redrive" class="inline">(.*?)</form>`).FindString(page.Body)
	confirm := b.post("/redrive", url.Values{"ref": refs(response{Body: all}), "csrf": {csrf(t, page)}})
	mustContain(t, confirm, `id="confirm-redrive"`, "email.send", "crm.update")
	if !strings.Contains(confirm.Body, "at-most-once") {
		t.Fatalf("the confirmation of a batch holding an at-most-once intent that may have been sent does not say so:\n%s", confirm.Body)
	}
}

// The Parked page offers "Re-drive all N shown" for every row it shows (up to MaxIndexReads
// claims, each with its parked intents), and the redrive refuses more than 200 at once: past
// 200 parked intents (an outage of one target is exactly that) the button answers 400.
func TestRedriveAllShownWorksForEveryPageTheParkedPageShows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unknown order", http.StatusUnprocessableEntity)
	}))
	t.Cleanup(refuse.Close)
	exec := &outbox.HTTPExecutor{URL: refuse.URL, Timeout: 5 * time.Second}
	var err error
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	for i := range 101 {
		e.commit("shop", fmt.Sprintf("evt_outage_%03d", i), false)
	}
	e.drain() // 202 parked intents
	b := e.serve(nil)
	page := b.get("/parked")
	all := regexp.MustCompile(`(?s)<form method="post" action="/redrive" class="inline">(.*?)</form>`).FindString(page.Body)
	selected := refs(response{Body: all})
	if len(selected) == 0 {
		t.Fatalf("setup: the page shows %d parked intents and no \"Re-drive all shown\"", strings.Count(page.Body, `class="parked-row"`))
	}
	confirm := b.post("/redrive", url.Values{"ref": selected, "csrf": {csrf(t, page)}})
	if confirm.Status != http.StatusOK || !strings.Contains(confirm.Body, `id="confirm-redrive"`) {
		t.Fatalf("Re-drive all %d shown: %d\n%s", len(selected), confirm.Status, confirm.Body)
	}
}

// The Parked page itself says which intents are at-most-once and may have been sent (parked
// after a call that may have reached the downstream), whether the sources file says the
// target is at-most-once or only the worker's record does (no sources file), and the
// confirmation leaves them unticked: a person ticks each after checking the downstream.
func TestAnAtMostOnceIntentThatMayHaveBeenSentIsFlaggedAndNotPreselected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	t.Cleanup(busy.Close)
	email := outbox.AtMostOnce(&outbox.HTTPExecutor{URL: busy.URL, Timeout: 5 * time.Second})
	crm := &outbox.HTTPExecutor{URL: e.down.URL, Timeout: 5 * time.Second}
	var err error
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": email, "crm": crm},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	e.commit("shop", "evt_maybe", false)
	e.down.setRefuse(key("shop", "evt_maybe", "crm.update"), true)
	e.drain()
	for name, file := range map[string]*sources.File{"without the sources file": nil, "with it": e.file} {
		b := e.serve(func(c *console.Config) { c.Sources = file })
		page := b.get("/parked")
		row := ""
		for _, r := range regexp.MustCompile(`(?s)<tr class="parked-row[^"]*">.*?</tr>`).FindAllString(page.Body, -1) {
			if strings.Contains(r, "email.send") {
				row = r
			}
		}
		if !strings.Contains(row, "may have been sent") {
			t.Fatalf("%s: the at-most-once row does not say it may have been sent:\n%s", name, page.Body)
		}
		all := regexp.MustCompile(`(?s)<form method="post" action="/redrive" class="inline">(.*?)</form>`).FindString(page.Body)
		mustContain(t, response{Body: all}, "1 of them at-most-once")
		confirm := b.post("/redrive", url.Values{"ref": refs(response{Body: all}), "csrf": {csrf(t, page)}})
		ticked := regexp.MustCompile(`name="ref" value="([^"]+)"[^>]* checked`).FindAllStringSubmatch(confirm.Body, -1)
		if len(ticked) != 1 || !strings.Contains(ticked[0][1], "i=crm.update") {
			t.Fatalf("%s: ticked %v, want only crm.update (the at-most-once intent left for a person):\n%s", name, ticked, confirm.Body)
		}
	}
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
	if err := redriveByAt(context.Background(), e.client, e.table, cl, "email.send", now, "bob (hookctl)"); err != nil {
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

// The same, with the form as the console serves it (the state shown in its ref): the
// redrive's conditional write then fails on the other operator's redrive, and outbox's check
// for its own lost response must not take that same-millisecond redrive for its own.
func TestARedriveConfirmedAsShownThatFoundItAlreadyRedrivenSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_twice_shown", false)
	e.down.setRefuse(key("shop", "evt_twice_shown", "email.send"), true)
	e.drain()
	now := time.Now().Truncate(time.Millisecond)
	b := e.serve(func(c *console.Config) { c.Now = func() time.Time { return now } })
	list := b.get("/parked")
	confirm := b.post("/redrive", url.Values{"ref": refs(list)[:1], "csrf": {csrf(t, list)}})
	form := url.Values{"ref": refs(confirm), "csrf": {csrf(t, confirm)}, "confirm": {"yes"}}
	// Someone else re-drives it between the confirmation and its submission, at the same
	// millisecond.
	if err := redriveByAt(context.Background(), e.client, e.table, e.claim("shop", "evt_twice_shown"), "email.send", now, "bob (hookctl)"); err != nil {
		t.Fatal(err)
	}
	page := b.post("/redrive", form)
	in := e.claim("shop", "evt_twice_shown").Intents["email.send"]
	if in.RedrivenBy != "bob (hookctl)" {
		t.Fatalf("the record: %+v", in)
	}
	if strings.Contains(page.Body, "re-driven by ada") || !strings.Contains(page.Body, "not parked any more") {
		t.Fatalf("the console reports a redrive it did not make (the record says %q):\n%s", in.RedrivenBy, results(page))
	}
}
