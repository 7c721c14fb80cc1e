package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/ops/console"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// An intent parked by the downstream's refusal is listed with its error, filtered, and
// re-driven from the page only through a confirmation and a POST carrying the page's CSRF
// token; the intent then records who re-drove it and when, and the downstream applies it
// once.
func TestAParkedIntentIsRedrivenFromTheParkedPageOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_refused", false)
	e.commit("shop", "evt_fine", false)
	refused := key("shop", "evt_refused", "email.send")
	e.down.setRefuse(refused, true)
	e.drain()
	b := e.serve(nil)

	page := b.get("/parked")
	mustContain(t, page, "evt_refused", "email.send", "422", "order unknown to the warehouse")
	mustNotContain(t, page, "evt_fine")
	for _, q := range []string{"target=crm", "error=timeout", "source=gh"} {
		if r := b.get("/parked?" + q); strings.Contains(r.Body, `class="parked-row"`) {
			t.Errorf("filter %s kept a row it excludes", q)
		}
	}
	mustContain(t, b.get("/parked?target=email&error=WAREHOUSE"), "evt_refused")
	token := csrf(t, page)
	selected := refs(page)
	if len(selected) == 0 {
		t.Fatal("no redrive form on the parked page")
	}
	one := url.Values{"ref": {selected[0]}}

	// Refused: no token, a wrong token, a cross-site request, a GET.
	for name, r := range map[string]response{
		"no token":    b.post("/redrive", one),
		"wrong token": b.post("/redrive", url.Values{"ref": one["ref"], "csrf": {strings.Repeat("0", 64)}, "confirm": {"yes"}}),
		"cross-site":  b.post("/redrive", url.Values{"ref": one["ref"], "csrf": {token}, "confirm": {"yes"}}, "Sec-Fetch-Site", "cross-site"),
		"other token": newBrowser(t, b.base).signIn().post("/redrive", url.Values{"ref": one["ref"], "csrf": {token}, "confirm": {"yes"}}),
	} {
		if r.Status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, r.Status)
		}
	}
	if r := b.get("/redrive?ref=" + url.QueryEscape(selected[0])); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("GET /redrive: %d", r.Status)
	}
	if in := e.claim("shop", "evt_refused").Intents["email.send"]; in.Status != dedup.IntentParked {
		t.Fatalf("a refused request changed the intent: %+v", in)
	}

	// The confirmation changes nothing; confirming re-drives.
	confirm := b.post("/redrive", url.Values{"ref": one["ref"], "csrf": {token}})
	mustContain(t, confirm, `id="confirm-redrive"`, "evt_refused")
	if in := e.claim("shop", "evt_refused").Intents["email.send"]; in.Status != dedup.IntentParked {
		t.Fatal("the confirmation page re-drove")
	}
	e.down.setRefuse(refused, false) // the operator fixed the downstream
	done := b.post("/redrive", url.Values{"ref": refs(confirm), "csrf": {csrf(t, confirm)}, "confirm": {"yes"}})
	mustContain(t, done, "re-driven by ada (test)")
	in := e.claim("shop", "evt_refused").Intents["email.send"]
	if in.Status != dedup.IntentPending || in.RedrivenBy != "ada (test)" || in.RedrivenAt == "" {
		t.Fatalf("after the redrive: %+v", in)
	}
	// Confirming twice (a double click, a reload) re-drives nothing more.
	again := b.post("/redrive", url.Values{"ref": refs(confirm), "csrf": {csrf(t, confirm)}, "confirm": {"yes"}})
	mustContain(t, again, "not parked any more")
	e.drain()
	if n := e.down.appliedCount(refused); n != 1 {
		t.Fatalf("the downstream applied the re-driven intent %d times, want once", n)
	}
	if c := e.claim("shop", "evt_refused"); c.Intents["email.send"].Status != dedup.IntentDone || c.PendingShard != "" {
		t.Fatalf("%+v: want done and out of the index", c)
	}
	event := b.get("/events/shop/evt_refused")
	mustContain(t, event, "re-driven", "by ada (test)")
	mustContain(t, b.get("/parked"), "No parked intents")
}

func TestAReadOnlyConsoleShowsAndTakesNoAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_refused", false)
	e.down.setRefuse(key("shop", "evt_refused", "email.send"), true)
	e.drain()
	b := e.serve(func(c *console.Config) { c.ReadOnly = true })
	for _, p := range []string{"/parked", "/events/shop/evt_refused"} {
		r := b.get(p)
		mustContain(t, r, "evt_refused")
		mustNotContain(t, r, `action="/redrive"`, `action="/redrive/query"`, `name="ref"`)
	}
	r := b.post("/redrive", url.Values{"ref": {"s=shop&e=evt_refused&i=email.send"}, "confirm": {"yes"}})
	if r.Status != http.StatusForbidden {
		t.Fatalf("a read-only console's redrive: %d", r.Status)
	}
	if r := b.post("/redrive/query", url.Values{"error": {"422"}, "lo": {"0"}}); r.Status != http.StatusForbidden {
		t.Fatalf("a read-only console's redrive by query: %d", r.Status)
	}
	if in := e.claim("shop", "evt_refused").Intents["email.send"]; in.Status != dedup.IntentParked {
		t.Fatal("a read-only console re-drove")
	}
}

// A redrive form names intents by value: a forged or malformed one is refused by name and
// nothing is re-driven.
func TestARedriveOfHostileReferencesIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_refused", false)
	e.down.setRefuse(key("shop", "evt_refused", "email.send"), true)
	e.drain()
	b := e.serve(nil)
	token := csrf(t, b.get("/parked"))
	good := "s=shop&e=evt_refused&i=email.send"
	for name, c := range map[string]struct {
		refs   []string
		status int
	}{
		"nothing":                         {nil, http.StatusBadRequest},
		"not a reference":                 {[]string{"%zz"}, http.StatusBadRequest},
		"two ids":                         {[]string{"s=shop&e=a&e=b&i=email.send"}, http.StatusBadRequest},
		"control char":                    {[]string{"s=shop&e=evt%0A&i=email.send", good}, http.StatusBadRequest},
		"unknown source":                  {[]string{good, "s=nosuch&e=x&i=y"}, http.StatusOK}, // a row saying it has no claim
		"too many":                        {make([]string, 201), http.StatusBadRequest},
		"an intent name no plan can hold": {[]string{"s=shop&e=evt_refused&i=" + strings.Repeat("a", dedup.MaxIntentNameLen+1)}, http.StatusBadRequest},
		"no such intent":                  {[]string{"s=shop&e=evt_refused&i=nope"}, http.StatusOK},
		"no such event id":                {[]string{"s=shop&e=evt_never&i=email.send"}, http.StatusOK},
	} {
		for i := range c.refs {
			if c.refs[i] == "" {
				c.refs[i] = good
			}
		}
		r := b.post("/redrive", url.Values{"ref": c.refs, "csrf": {token}, "confirm": {"yes"}})
		if r.Status != c.status {
			t.Errorf("%s: %d, want %d\n%s", name, r.Status, c.status, r.Body)
		}
	}
	if in := e.claim("shop", "evt_refused").Intents["email.send"]; in.Status != dedup.IntentParked {
		t.Fatalf("a refused request re-drove: %+v", in)
	}
}

// The confirmation shows each selected intent as the table holds it now and carries that
// state: an intent parked again since the list was read is shown with its new attempt count,
// left unticked, and a form naming an intent without the state it was shown in re-drives
// nothing.
func TestTheConfirmationShowsWhatItWillRedriveAsItIsNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_moved", false)
	e.down.setRefuse(key("shop", "evt_moved", "email.send"), true)
	e.drain()
	b := e.serve(nil)
	list := b.get("/parked")
	listed := refs(list)[:1] // its checkbox (the "all shown" form names it too)
	if len(refs(list)) != 2 {
		t.Fatalf("setup: %v", listed)
	}
	// Someone else re-drives it; it is parked again, one attempt later.
	if err := redriveByAt(context.Background(), e.client, e.table, e.claim("shop", "evt_moved"), "email.send", time.Now(), "bob (hookctl)"); err != nil {
		t.Fatal(err)
	}
	e.drain()
	now := e.claim("shop", "evt_moved").Intents["email.send"]
	confirm := b.post("/redrive", url.Values{"ref": listed, "csrf": {csrf(t, list)}})
	mustContain(t, confirm, `class="confirm-row changed"`, "changed since the list was read", `<td class="num">`+strconv.Itoa(now.Attempts)+`</td>`)
	if regexp.MustCompile(`name="ref" value="[^"]*"[^>]* checked`).MatchString(confirm.Body) {
		t.Fatalf("an intent changed since the list is ticked:\n%s", confirm.Body)
	}
	shown := refs(confirm)
	if len(shown) != 1 || shown[0] == listed[0] || !strings.Contains(shown[0], "a="+strconv.Itoa(now.Attempts)) {
		t.Fatalf("the confirmation's ref %v does not carry the state it shows (attempt %d)", shown, now.Attempts)
	}
	// Without the state: nothing re-driven.
	stateless := b.post("/redrive", url.Values{"ref": {"s=shop&e=evt_moved&i=email.send"}, "csrf": {csrf(t, list)}, "confirm": {"yes"}})
	mustContain(t, stateless, "does not say which parked state you confirmed")
	if in := e.claim("shop", "evt_moved").Intents["email.send"]; in.Status != dedup.IntentParked || in.Attempts != now.Attempts {
		t.Fatalf("a ref without its state re-drove: %+v", in)
	}
	// Ticked and confirmed as shown: re-driven.
	mustContain(t, b.post("/redrive", url.Values{"ref": shown, "csrf": {csrf(t, confirm)}, "confirm": {"yes"}}), "re-driven by ada (test)")
}

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
// Without the sources file the other target's delivery cannot be known either (it may be
// at-most-once), so the confirmation ticks neither, and says why.
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
		if file == nil {
			// crm's delivery is the sources file's to say: without it, crm.update may be
			// at-most-once too, and is left for a person, saying why.
			mustContain(t, response{Body: all}, "1 of unknown delivery")
			mustContain(t, confirm, "delivery unknown")
			if len(ticked) != 0 {
				t.Fatalf("%s: ticked %v, want none (neither target's delivery is known):\n%s", name, ticked, confirm.Body)
			}
			continue
		}
		if len(ticked) != 1 || !strings.Contains(ticked[0][1], "i=crm.update") {
			t.Fatalf("%s: ticked %v, want only crm.update (the at-most-once intent left for a person):\n%s", name, ticked, confirm.Body)
		}
	}
}

// Two redrives of one parked intent made in the same millisecond (two operators, the console
// and hookctl redrive, or a clock coarser than a millisecond): one re-drove it, the other
// found it pending. The other must say so, not report that it re-drove it: the intent's record
// names the first operator only. Both with a confirmation of the page the console showed
// before the other redrive, and with the form as the console serves it (the state shown in its
// ref), submitted after the other redrive: the redrive's conditional write then fails on the
// other operator's redrive, and outbox's check for its own lost response must not take that
// same-millisecond redrive for its own.
func TestARedriveThatFoundTheIntentAlreadyRedrivenSaysSo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, id string
		// form is the console's confirmation; it has the other operator re-drive the intent
		// (redriveFirst) at the point the case names.
		form func(t *testing.T, b *browser, redriveFirst func()) url.Values
	}{
		{"a confirmation of the page shown before", "evt_twice", func(t *testing.T, b *browser, redriveFirst func()) url.Values {
			// Someone else re-drives it first, at the same millisecond.
			redriveFirst()
			// The console's confirmation of the page it showed before.
			return url.Values{"ref": {"s=shop&e=evt_twice&i=email.send"}, "csrf": {csrf(t, b.get("/parked"))}, "confirm": {"yes"}}
		}},
		{"confirmed as shown", "evt_twice_shown", func(t *testing.T, b *browser, redriveFirst func()) url.Values {
			list := b.get("/parked")
			confirm := b.post("/redrive", url.Values{"ref": refs(list)[:1], "csrf": {csrf(t, list)}})
			form := url.Values{"ref": refs(confirm), "csrf": {csrf(t, confirm)}, "confirm": {"yes"}}
			// Someone else re-drives it between the confirmation and its submission, at the same
			// millisecond.
			redriveFirst()
			return form
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.commit("shop", c.id, false)
			e.down.setRefuse(key("shop", c.id, "email.send"), true)
			e.drain()
			now := time.Now().Truncate(time.Millisecond)
			b := e.serve(func(c *console.Config) { c.Now = func() time.Time { return now } })
			form := c.form(t, b, func() {
				if err := redriveByAt(context.Background(), e.client, e.table, e.claim("shop", c.id), "email.send", now, "bob (hookctl)"); err != nil {
					t.Fatal(err)
				}
			})
			page := b.post("/redrive", form)
			in := e.claim("shop", c.id).Intents["email.send"]
			if in.RedrivenBy != "bob (hookctl)" {
				t.Fatalf("the record: %+v", in)
			}
			if strings.Contains(page.Body, "re-driven by ada") || !strings.Contains(page.Body, "not parked any more") {
				t.Fatalf("the console reports a redrive it did not make (the record says %q):\n%s", in.RedrivenBy, results(page))
			}
		})
	}
}

// The Parked page lists every parked intent under the parked shards, whatever its source,
// and offers "Re-drive all N shown" for them. A source taken out of the sources file (renamed,
// retired, or the console run with another file) still has claims for their retention, and
// their parked intents are listed with the rest; then the whole "all shown" form is refused
// (404, "not in the sources file"), and so is a selection holding one of them: one stale row
// stops the operator from re-driving the 199 others the page offered. The row's own link
// leads to a 404 too.
func TestRedriveAllShownIsNotRefusedForARowWhoseSourceLeftTheSourcesFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_current", false)
	e.commit("gh", "evt_retired", false)
	for _, id := range []struct{ source, id string }{{"shop", "evt_current"}, {"gh", "evt_retired"}} {
		e.down.setRefuse(key(id.source, id.id, "email.send"), true)
	}
	e.drain()
	// The sources file the console runs with no longer has gh.
	f, err := sources.Parse([]byte(strings.Replace(testSources,
		`"gh": {"scheme": "github", "secrets": [{"env": "SECRET_ENV_GH"}], "retry_horizon": "72h", "redrive_window": "30d"}`, `"other": {"scheme": "github", "secrets": [{"env": "SECRET_ENV_GH"}], "retry_horizon": "72h", "redrive_window": "30d"}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	b := e.serve(func(c *console.Config) { c.Sources = f })
	page := b.get("/parked")
	mustContain(t, page, "evt_current", "evt_retired")
	all := regexp.MustCompile(`(?s)<form method="post" action="/redrive" class="inline">(.*?)</form>`).FindString(page.Body)
	confirm := b.post("/redrive", url.Values{"ref": refs(response{Body: all}), "csrf": {csrf(t, page)}})
	if confirm.Status != http.StatusOK || !regexp.MustCompile(`value="[^"]*e=evt_current[^"]*"[^>]* checked`).MatchString(confirm.Body) {
		t.Fatalf("Re-drive all shown, one row of a source no longer in the sources file: %d, want the confirmation with evt_current ticked:\n%s",
			confirm.Status, confirm.Body)
	}
	// The row's own link shows the claim.
	if r := b.get("/events/gh/evt_retired"); r.Status != http.StatusOK || !strings.Contains(r.Body, "evt_retired") {
		t.Errorf("the event page of a source no longer in the sources file, whose claim is kept: %d", r.Status)
	}
	// A source the file never had, with no claim, is still said to be unknown.
	if r := b.get("/events/nosuch/evt_1"); r.Status != http.StatusNotFound || !strings.Contains(r.Body, "not in the sources file") {
		t.Errorf("an unknown source without a claim: %d", r.Status)
	}
}

// form is a POST form as a page serves it: its fields as a browser sends them with every box
// ticked.
type form struct {
	name   string
	fields url.Values
}

var formRe = regexp.MustCompile(`(?s)<form method="post" action="/redrive"[^>]*>(.*?)</form>`)
var inputRe = regexp.MustCompile(`<input type="(?:hidden|checkbox)" name="([a-z]+)" value="([^"]*)"`)

func forms(name string, page response) []form {
	var out []form
	for i, m := range formRe.FindAllStringSubmatch(page.Body, -1) {
		f := form{name: fmt.Sprintf("%s, form %d", name, i+1), fields: url.Values{}}
		for _, in := range inputRe.FindAllStringSubmatch(m[1], -1) {
			f.fields.Add(in[1], htmlUnescape(in[2]))
		}
		out = append(out, f)
	}
	return out
}

// Nothing is re-driven or resolved that the operator was not shown: every redrive form the
// console serves (the Parked page's selection and "all shown", the event page's button, the
// confirmation), captured while the intent was parked and sent again later, as served and with
// confirm=yes added, to /redrive and, with a reason, to /resolve (whose forms carry the same
// refs), re-drives and resolves nothing once the intent has moved on: re-driven and pending,
// run and parked again, its event claimed again (another incarnation, parked at the same
// attempt count as the one shown).
func TestNoReplayOfARedriveOrResolveFormActsOnWhatTheOperatorWasNotShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Claims kept an hour. The store and the worker read a clock that later moves three hours
	// on, when the claim has expired and the event can be claimed again. (The clock moves
	// forward, not the claim's commit back: a claim committed already expired is one the
	// table's TTL may delete mid-test.)
	var offset time.Duration
	clock := func() time.Time { return time.Now().Add(offset) }
	store, err := dedup.New(e.client, dedup.Config{Table: e.table, Now: clock,
		Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour, Keep: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": e.exec, "crm": e.exec},
		Backoff: func(int) time.Duration { return time.Hour }, Now: clock}); err != nil {
		t.Fatal(err)
	}
	e.commit("shop", "evt_replay", false)
	e.down.setRefuse(key("shop", "evt_replay", "email.send"), true)
	e.drain()
	b := e.serve(nil)

	list := b.get("/parked")
	captured := forms("parked page", list)
	captured = append(captured, forms("event page", b.get("/events/shop/evt_replay"))...)
	var selection url.Values
	for _, f := range captured {
		if len(f.fields["ref"]) == 1 && f.fields.Get("confirm") == "" {
			selection = f.fields
		}
	}
	confirm := b.post("/redrive", selection)
	captured = append(captured, forms("confirmation", confirm)...)
	if len(captured) != 4 {
		t.Fatalf("setup: %d forms captured, want the parked page's 2, the event page's and the confirmation's", len(captured))
	}
	// The operator's own confirmation, once.
	var confirmation url.Values
	for _, f := range captured {
		if f.fields.Get("confirm") == "yes" {
			confirmation = f.fields
		}
	}
	mustContain(t, b.post("/redrive", confirmation), "re-driven by ada (test)")

	replayAll := func(when string) {
		t.Helper()
		before := e.claim("shop", "evt_replay")
		for _, f := range captured {
			for _, to := range []string{"/redrive", "/resolve"} {
				for _, confirmed := range []bool{false, true} {
					v := url.Values{}
					for k, vs := range f.fields {
						v[k] = slices.Clone(vs)
					}
					if confirmed {
						v.Set("confirm", "yes")
					}
					if to == "/resolve" {
						v.Set("why", "done by hand")
					}
					r := b.post(to, v)
					if r.Status != http.StatusOK {
						t.Fatalf("%s: %s sent again to %s (confirm %v): %d\n%s", when, f.name, to, confirmed, r.Status, r.Body)
					}
					if strings.Contains(r.Body, `<tr class="ok">`) {
						t.Fatalf("%s: %s sent again to %s (confirm %v) says it acted:\n%s", when, f.name, to, confirmed, results(r))
					}
					if after := e.claim("shop", "evt_replay"); !reflect.DeepEqual(after.Intents, before.Intents) || after.CommitToken != before.CommitToken {
						t.Fatalf("%s: %s sent again to %s (confirm %v) changed the intent:\nbefore %+v\nafter  %+v", when, f.name, to, confirmed,
							before.Intents["email.send"], after.Intents["email.send"])
					}
				}
			}
		}
	}
	replayAll("re-driven, not yet run")
	e.drain()
	if in := e.claim("shop", "evt_replay").Intents["email.send"]; in.Status != dedup.IntentParked || in.Attempts != 2 {
		t.Fatalf("setup: %+v, want parked again at attempt 2", in)
	}
	replayAll("parked again")

	// The claim expired; the event is claimed again and parks at attempt 1, as first shown.
	offset = 3 * time.Hour
	first := e.claim("shop", "evt_replay").CommitToken
	e.commit("shop", "evt_replay", false)
	e.drain()
	again := e.claim("shop", "evt_replay")
	if in := again.Intents["email.send"]; in.Status != dedup.IntentParked || in.Attempts != 1 || again.CommitToken == first {
		t.Fatalf("setup: %+v (incarnation %s), want the new incarnation parked at attempt 1", in, again.CommitToken)
	}
	replayAll("claimed again, parked at the attempt count first shown")
}

// redriveByAt is an operator's redrive at now that records who re-drove it (dedup.Claims.RedriveBy).
func redriveByAt(ctx context.Context, api dedup.UpdateAPI, table string, c *dedup.Claim, intent string, now time.Time, by string) error {
	return (&dedup.Claims{API: api, Table: table, Now: func() time.Time { return now }}).RedriveBy(ctx, c, intent, by)
}

// A parked intent an operator resolved (dedup.Claims.Resolve: hookctl resolve) leaves the parked
// page, and its event's story says who resolved it, when and why.
func TestAResolvedIntentLeavesTheParkedPageAndItsStorySaysWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_given_up", false)
	e.down.setRefuse(key("shop", "evt_given_up", "email.send"), true)
	e.drain()
	b := e.serve(nil)
	mustContain(t, b.get("/parked"), "evt_given_up")
	if err := (&dedup.Claims{API: e.client, Table: e.table}).Resolve(context.Background(), e.claim("shop", "evt_given_up"), "email.send",
		"bob (hookctl)", "the warehouse will never know this order"); err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.get("/parked"), "No parked intents")
	mustContain(t, b.get("/events/shop/evt_given_up"), "resolved", "by bob (hookctl): the warehouse will never know this order")
}

// A parked intent is resolved from the Parked page, with a reason, through the redrive's
// confirmation: it leaves the parked view and its claim records why and who; the same form
// sent again resolves nothing more. A resolve needs a reason, and a read-only console
// refuses it.
func TestAParkedIntentIsResolvedFromTheParkedPageWithWhyAndWho(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_by_hand", false)
	e.down.setRefuse(key("shop", "evt_by_hand", "email.send"), true)
	e.drain()
	b := e.serve(nil)
	page := b.get("/parked")
	mustContain(t, page, `formaction="/resolve"`, `id="resolve-selected"`)
	one := url.Values{"ref": refs(page)[:1], "csrf": {csrf(t, page)}}

	if r := b.post("/resolve", one); r.Status != http.StatusBadRequest {
		t.Fatalf("a resolve without a reason: %d, want 400", r.Status)
	}
	one.Set("why", "sent by hand from the mail client")
	confirm := b.post("/resolve", one)
	mustContain(t, confirm, `id="confirm-resolve"`, `action="/resolve"`, "evt_by_hand", `value="sent by hand from the mail client"`)
	if in := e.claim("shop", "evt_by_hand").Intents["email.send"]; in.Status != dedup.IntentParked {
		t.Fatal("the confirmation page resolved")
	}
	form := url.Values{"ref": refs(confirm), "csrf": {csrf(t, confirm)}, "why": {"sent by hand from the mail client"}, "confirm": {"yes"}}
	if r := b.post("/resolve", url.Values{"ref": form["ref"], "csrf": form["csrf"], "confirm": {"yes"}}); r.Status != http.StatusBadRequest {
		t.Fatalf("a confirmed resolve without a reason: %d, want 400", r.Status)
	}
	mustContain(t, b.post("/resolve", form), "resolved by ada (test): sent by hand from the mail client")
	c := e.claim("shop", "evt_by_hand")
	if in := c.Intents["email.send"]; in.Status != dedup.IntentResolved || in.Resolution != "sent by hand from the mail client" ||
		in.ResolvedBy != "ada (test)" || in.ResolvedAt == "" {
		t.Fatalf("after the resolve: %+v", in)
	}
	mustContain(t, b.get("/parked"), "No parked intents")
	again := b.post("/resolve", form)
	mustContain(t, again, "not parked any more")
	mustNotContain(t, again, "resolved by ada")
	if after := e.claim("shop", "evt_by_hand"); after.Intents["email.send"].ResolvedAt != c.Intents["email.send"].ResolvedAt ||
		len(after.Intents["email.send"].History) != len(c.Intents["email.send"].History) {
		t.Fatalf("the form sent again wrote: %+v", after.Intents["email.send"])
	}

	ro := e.serve(func(c *console.Config) { c.ReadOnly = true })
	e.commit("shop", "evt_kept", false)
	e.down.setRefuse(key("shop", "evt_kept", "email.send"), true)
	e.drain()
	for _, p := range []string{"/parked", "/events/shop/evt_kept"} {
		r := ro.get(p)
		mustContain(t, r, "evt_kept")
		mustNotContain(t, r, `action="/resolve"`, `formaction="/resolve"`)
	}
	r := ro.post("/resolve", url.Values{"ref": {"s=shop&e=evt_kept&i=email.send"}, "why": {"x"}, "confirm": {"yes"}})
	if r.Status != http.StatusForbidden {
		t.Fatalf("a read-only console's resolve: %d, want 403", r.Status)
	}
	if in := e.claim("shop", "evt_kept").Intents["email.send"]; in.Status != dedup.IntentParked {
		t.Fatal("a read-only console resolved")
	}
}

// A parked intent is resolved from its event page, beside its Redrive.
func TestAParkedIntentIsResolvedFromItsEventPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_never", false)
	e.down.setRefuse(key("shop", "evt_never", "email.send"), true)
	e.drain()
	b := e.serve(nil)
	event := b.get("/events/shop/evt_never")
	mustContain(t, event, `action="/resolve"`, "Resolve email.send")
	confirm := b.post("/resolve", url.Values{"ref": refs(event)[:1], "csrf": {csrf(t, event)}, "why": {"the order was cancelled"}})
	mustContain(t, confirm, `id="confirm-resolve"`)
	mustContain(t, b.post("/resolve", url.Values{"ref": refs(confirm), "csrf": {csrf(t, confirm)}, "why": {"the order was cancelled"}, "confirm": {"yes"}}),
		"resolved by ada (test)")
	mustContain(t, b.get("/events/shop/evt_never"), "by ada (test): the order was cancelled")
}

var bulkFormRe = regexp.MustCompile(`(?s)<form method="post" action="/redrive/query"[^>]*>(.*?)</form>`)

// bulkForm is a page's form re-driving by query, as a browser sends it (nil: none).
func bulkForm(page response) url.Values {
	m := bulkFormRe.FindStringSubmatch(page.Body)
	if m == nil {
		return nil
	}
	v := url.Values{}
	for _, in := range inputRe.FindAllStringSubmatch(m[1], -1) {
		v.Add(in[1], htmlUnescape(in[2]))
	}
	return v
}

// statuses counts the intents of the events named by ids by status.
func (e *env) statuses(ids []string) map[string]int {
	e.t.Helper()
	n := map[string]int{}
	for _, id := range ids {
		n[e.claim("shop", id).Intents["email.send"].Status]++
	}
	return n
}

// "Redrive what parked during the outage": from the Parked page filtered by a window and an
// error, one form re-drives every matching parked intent, at-most-once ones excluded: first a
// page with the count and what it will do, then rounds of at most 200, each a POST carrying
// the query and the round's range, showing what it did, to a summary. Every form sent again
// (a reload, a double click, a stale tab) re-drives nothing more. With a read bound smaller
// than the outage, the rounds still reach every matching intent.
func TestEveryParkedIntentMatchingAQueryIsRedrivenInRounds(t *testing.T) {
	t.Parallel()
	for _, maxReads := range []int{500, 40} {
		e := newEnv(t)
		now := time.Now()
		var outage, cautious, other []string
		n := map[int]int{500: 230, 40: 90}[maxReads]
		for i := range n {
			id := fmt.Sprintf("evt_outage_%03d", i)
			outage = append(outage, id)
			e.park("shop", id, "email", "permanent: 503 relay down", now.Add(-30*time.Minute+time.Duration(i)*50*time.Millisecond))
		}
		for i := range 2 {
			id := fmt.Sprintf("evt_maysent_%d", i)
			cautious = append(cautious, id)
			e.park("shop", id, "email", "permanent: at-most-once: 503 relay down, and the call may have been sent", now.Add(-20*time.Minute+time.Duration(i)*time.Second))
		}
		for i := range 5 {
			id := fmt.Sprintf("evt_before_%d", i)
			other = append(other, id)
			e.park("shop", id, "email", "permanent: 503 relay down", now.Add(-3*time.Hour+time.Duration(i)*time.Second))
		}
		for i := range 3 {
			id := fmt.Sprintf("evt_crm_%d", i)
			other = append(other, id)
			e.park("shop", id, "crm", "permanent: 422 unknown order", now.Add(-25*time.Minute+time.Duration(i)*time.Second))
		}
		b := e.serve(func(c *console.Config) { c.MaxIndexReads = maxReads })
		where := fmt.Sprintf("MaxIndexReads %d", maxReads)

		first := bulkForm(b.get("/parked?since=2h&error=503"))
		if first == nil {
			t.Fatalf("%s: the Parked page offers no redrive of every matching intent", where)
		}
		forged := url.Values{"error": {"503"}, "lo": {"0"}}
		if r := b.post("/redrive/query", forged); r.Status != http.StatusForbidden || e.statuses(outage)[dedup.IntentPending] != 0 {
			t.Fatalf("%s: a redrive by query without the page's CSRF token: %d", where, r.Status)
		}
		plan := b.post("/redrive/query", first)
		if plan.Status != http.StatusOK {
			t.Fatalf("%s: the plan: %d\n%s", where, plan.Status, plan.Body)
		}
		mustContain(t, plan, "at-most-once")
		if maxReads == 500 {
			mustContain(t, plan, `id="remaining">`+strconv.Itoa(n)+`<`)
		}
		if got := e.statuses(outage); got[dedup.IntentParked] != n {
			t.Fatalf("%s: the plan page re-drove: %v", where, got)
		}
		sent := []url.Values{first}
		next := bulkForm(plan)
		for round := 0; next != nil; round++ {
			if round == 3*n {
				t.Fatalf("%s: the rounds do not end", where)
			}
			sent = append(sent, next)
			page := b.post("/redrive/query", next)
			if page.Status != http.StatusOK {
				t.Fatalf("%s: round %d: %d\n%s", where, round, page.Status, page.Body)
			}
			if maxReads == 500 && round == 0 {
				if got := e.statuses(outage); got[dedup.IntentPending] != maxRedrive {
					t.Fatalf("%s: after the first round: %v, want %d re-driven", where, got, maxRedrive)
				}
				before := e.statuses(outage)
				b.post("/redrive/query", next) // sent twice
				if got := e.statuses(outage); got[dedup.IntentPending] != before[dedup.IntentPending] {
					t.Fatalf("%s: the first round sent again re-drove more: %v, was %v", where, got, before)
				}
			}
			next = bulkForm(page)
			if next == nil {
				mustContain(t, page, `id="summary"`, `id="total-done">`+strconv.Itoa(n)+`<`)
			}
		}
		if got := e.statuses(outage); got[dedup.IntentPending] != n {
			t.Fatalf("%s: after every round: %v, want all %d re-driven", where, got, n)
		}
		if got := e.statuses(append(cautious, other...)); got[dedup.IntentParked] != len(cautious)+len(other) {
			t.Fatalf("%s: an intent outside the query, or at-most-once, was re-driven: %v", where, got)
		}
		// Every form sent again, after the rounds: nothing more.
		for _, f := range sent {
			b.post("/redrive/query", f)
		}
		if got := e.statuses(append(cautious, other...)); got[dedup.IntentParked] != len(cautious)+len(other) {
			t.Fatalf("%s: a form sent again re-drove: %v", where, got)
		}
		for _, id := range outage {
			if in := e.claim("shop", id).Intents["email.send"]; in.RedrivenBy != "ada (test)" || in.AttemptsBase != 1 {
				t.Fatalf("%s: %s: %+v, want re-driven once by ada (test)", where, id, in)
			}
		}
	}
}

const maxRedrive = 200

// An intent parks while another intent of its event is still open: a retry waiting on its
// backoff (hours, past a few failures), or a target paused for its downstream's maintenance.
// The outbox leaves the claim under its due shard until nothing of it is open, and the Parked
// page reads the parked shards only: the parked intent is missing from the list, from "all
// shown" and from a redrive by query, and the page's total, written exact, says there is
// nothing parked, while the overview counts it parked and its event page offers its Redrive.
func TestTheParkedPageListsAnIntentParkedBesideAnOpenOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.down.setRefuse(key("shop", "evt_beside", "email.send"), true)   // 422: parked
	e.down.setUnavailable(key("shop", "evt_beside", "crm.update"), 1) // 503: retried in an hour
	e.commit("shop", "evt_beside", false)
	e.drain()
	cl := e.claim("shop", "evt_beside")
	if cl.Intents["email.send"].Status != dedup.IntentParked || cl.Intents["crm.update"].Status != dedup.IntentPending {
		t.Fatalf("setup: %+v, want email.send parked and crm.update pending", cl.Intents)
	}
	b := e.serve(nil)
	mustContain(t, b.get("/events/shop/evt_beside"), `action="/redrive"`)
	parked := b.get("/parked")
	total := regexp.MustCompile(`<strong id="total">([^<]*)</strong>`).FindStringSubmatch(parked.Body)
	if total == nil || !strings.Contains(parked.Body, "evt_beside") {
		t.Errorf("the Parked page does not list the parked intent of evt_beside (total %q)", total)
	}
	if total != nil && total[1] == "0" {
		t.Errorf("the Parked page's total is an exact 0 while email.send of evt_beside is parked")
	}
}

// An at-most-once target's intent parked by a clean refusal (a 422: the call reached the
// downstream, which said no) carries no "at-most-once:" mark: only the sources file's
// delivery says what it is. hookctl console runs without a sources file (it says only that
// sources are not checked by name and fewer secrets are redacted), and its redrive by query
// then counts no at-most-once intent among the matches ("0 excluded") and re-drives it with the
// rest: a second call of an at-most-once intent nobody chose to send.
func TestARedriveByQueryWithoutTheSourcesFileSendsNoAtMostOnceIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The deployment's sources file says email is at-most-once; the console is not given it.
	f, err := sources.Parse([]byte(strings.Replace(testSources, `"headers": {"X-Api-Key": "SECRET-HEADER-VALUE"}`,
		`"headers": {"X-Api-Key": "SECRET-HEADER-VALUE"}, "delivery": "at-most-once"`, 1)))
	if err != nil || f.Targets["email"].Delivery != sources.AtMostOnce {
		t.Fatalf("setup: %v", err)
	}
	e.down.setRefuse(key("shop", "evt_amo_422", "email.send"), true)
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": outbox.AtMostOnce(e.exec), "crm": e.exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	e.commit("shop", "evt_amo_422", false)
	e.drain()
	if in := e.claim("shop", "evt_amo_422").Intents["email.send"]; in.Status != dedup.IntentParked {
		t.Fatalf("setup: %+v, want parked", in)
	}
	b := e.serve(func(c *console.Config) { c.Sources = nil })
	parked := b.get("/parked")
	mustContain(t, parked, "delivery unknown", "started without the sources file")
	next := bulkForm(parked)
	for round := 0; next != nil && round < 5; round++ {
		page := b.post("/redrive/query", next)
		if round == 0 { // the page that re-drives nothing says what it leaves, and why
			mustContain(t, page, "leaves them parked", "started without the sources file")
		}
		next = bulkForm(page)
	}
	if in := e.claim("shop", "evt_amo_422").Intents["email.send"]; in.Status != dedup.IntentParked {
		t.Errorf("the at-most-once intent was re-driven by query: %s, redriven by %q", in.Status, in.RedrivenBy)
	}
}

// A redrive by query's window is what the Parked page read; a window whose start is after now
// (a from typed in the wrong zone) holds nothing, and a query that cannot be one is refused
// as bad input, 400 naming the field, before anything is read: not a 502 blaming DynamoDB for
// the console's own query.
func TestARedriveByQueryWhoseWindowStartsAfterNowIsRefusedNamingFrom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.park("shop", "evt_parked", "email", "permanent: 503 relay down", time.Now().Add(-time.Hour))
	b := e.serve(nil)
	tok := csrf(t, b.get("/parked"))
	from := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	for _, f := range []url.Values{{"csrf": {tok}, "from": {from}}, {"csrf": {tok}, "from": {from}, "lo": {"0"}}} {
		r := b.post("/redrive/query", f)
		if r.Status != http.StatusBadRequest || !strings.Contains(r.Body, "from") {
			t.Errorf("a redrive by query from %s (after now), to the open end: %d, want 400 naming from\n%s", from, r.Status, r.Body)
		}
	}
	if got := e.statuses([]string{"evt_parked"}); got[dedup.IntentParked] != 1 {
		t.Fatalf("the refused query re-drove: %v", got)
	}
}

// A redrive by query fixes its window's end when its first page is read, so that what it
// re-drives is what that page counted, and a round sent again (a reload, a stale tab)
// re-drives nothing more: an intent re-driven, then parked again, entered the index after the
// end. A window whose end the Parked page was given in the future (to=, the end of the day)
// must be fixed no later than now too: otherwise an intent parked after the plan was shown is
// re-driven by the round, and a round sent again re-drives an intent parked again since.
func TestARedriveByQueryActsOnlyOnIntentsParkedBeforeItsPlanWhateverTheWindowsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	e.park("shop", "evt_outage", "email", "permanent: 503 relay down", now.Add(-10*time.Minute))
	b := e.serve(nil)
	q := url.Values{"error": {"503"}, "from": {now.Add(-time.Hour).UTC().Format(time.RFC3339)}, "to": {now.Add(24 * time.Hour).UTC().Format(time.RFC3339)}}
	first := bulkForm(b.get("/parked?" + q.Encode()))
	if first == nil {
		t.Fatal("the Parked page offers no redrive of every matching intent")
	}
	plan := b.post("/redrive/query", first)
	mustContain(t, plan, `id="remaining">1<`)
	round := bulkForm(plan)
	if round == nil {
		t.Fatalf("the plan offers no round:\n%s", plan.Body)
	}

	time.Sleep(5 * time.Millisecond)
	e.park("shop", "evt_later", "email", "permanent: 503 relay down", time.Now()) // parked after the plan was shown
	if r := b.post("/redrive/query", round); r.Status != http.StatusOK {
		t.Fatalf("the round: %d\n%s", r.Status, r.Body)
	}
	if got := e.statuses([]string{"evt_outage"}); got[dedup.IntentPending] != 1 {
		t.Fatalf("the round did not re-drive the intent its plan counted: %v", got)
	}
	if got := e.statuses([]string{"evt_later"}); got[dedup.IntentParked] != 1 {
		t.Errorf("the round re-drove an intent parked after its plan was shown: %v", got)
	}

	time.Sleep(5 * time.Millisecond)
	e.park("shop", "evt_outage", "email", "permanent: 503 relay down", time.Now()) // re-driven, then parked again
	b.post("/redrive/query", round)                                                // the round sent again
	if got := e.statuses([]string{"evt_outage"}); got[dedup.IntentParked] != 1 {
		t.Errorf("the round sent again re-drove an intent parked again since: %v", got)
	}
}
