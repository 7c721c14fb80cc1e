package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/console"
	"github.com/oncehook/oncehook/dedup"
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
		"other token": newBrowser(t, b.base).post("/redrive", url.Values{"ref": one["ref"], "csrf": {token}, "confirm": {"yes"}}),
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
		mustNotContain(t, r, `action="/redrive"`, `name="ref"`)
	}
	r := b.post("/redrive", url.Values{"ref": {"s=shop&e=evt_refused&i=email.send"}, "confirm": {"yes"}})
	if r.Status != http.StatusForbidden {
		t.Fatalf("a read-only console's redrive: %d", r.Status)
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
		"nothing":          {nil, http.StatusBadRequest},
		"not a reference":  {[]string{"%zz"}, http.StatusBadRequest},
		"two ids":          {[]string{"s=shop&e=a&e=b&i=email.send"}, http.StatusBadRequest},
		"control char":     {[]string{"s=shop&e=evt%0A&i=email.send", good}, http.StatusBadRequest},
		"unknown source":   {[]string{good, "s=nosuch&e=x&i=y"}, http.StatusOK}, // a row saying it has no claim
		"too many":         {make([]string, 201), http.StatusBadRequest},
		"no such intent":   {[]string{"s=shop&e=evt_refused&i=nope"}, http.StatusOK},
		"no such event id": {[]string{"s=shop&e=evt_never&i=email.send"}, http.StatusOK},
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

// redriveByAt is an operator's redrive at now that records who re-drove it (dedup.Claims.RedriveBy).
func redriveByAt(ctx context.Context, api dedup.UpdateAPI, table string, c *dedup.Claim, intent string, now time.Time, by string) error {
	return (&dedup.Claims{API: api, Table: table, Now: func() time.Time { return now }}).RedriveBy(ctx, c, intent, by)
}
