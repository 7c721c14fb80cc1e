package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/ops/console"
	"github.com/oncehook/oncehook/outbox"
)

// pauseShown is the pause a resume's confirmation names in its form.
func pauseShown(t *testing.T, page response) string {
	t.Helper()
	m := regexp.MustCompile(`name="pause" value="([^"]*)"`).FindStringSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no pause in the resume's form:\n%s", page.Body)
	}
	return html.UnescapeString(m[1])
}

func (e *env) paused() map[string]outbox.Pause {
	e.t.Helper()
	p, err := (&outbox.Targets{API: e.client, Table: e.table}).Paused(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// An operator pauses a target from the overview, through a confirmation that says what it
// will do; the pause is recorded by outbox.Targets with the operator's name and reason, shown
// on the overview and on the backlog (its due intents held), and honoured by the worker; the
// resume, confirmed the same way, clears it.
func TestATargetIsPausedAndResumedFromTheOverview(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.serve(nil)
	overview := b.get("/")
	mustContain(t, overview, `action="/pause"`, `<option value="email">`, "No target is paused")
	why := "warehouse maintenance <until 14:00>"
	confirm := b.post("/pause", url.Values{"csrf": {csrf(t, overview)}, "target": {"email"}, "why": {why}})
	mustContain(t, confirm, "Pause email?", "no worker and no sweep calls it", "by <strong>ada (test)</strong>", "warehouse maintenance &lt;until 14:00&gt;", `id="confirm-pause"`)
	if p := e.paused(); len(p) != 0 {
		t.Fatalf("the confirmation paused: %v", p)
	}
	done := b.post("/pause", url.Values{"csrf": {csrf(t, confirm)}, "target": {"email"}, "why": {why}, "confirm": {"yes"}})
	if done.Status != http.StatusSeeOther || done.Header.Get("Location") != "/#paused" {
		t.Fatalf("confirmed pause: %d %q, want 303 to the overview", done.Status, done.Header.Get("Location"))
	}
	p, ok := e.paused()["email"]
	if !ok || p.By != "ada (test)" || p.Why != why || p.At.IsZero() {
		t.Fatalf("paused: %+v %v", p, ok)
	}

	e.commit("shop", "evt_held", false)
	e.drain()
	if c := e.claim("shop", "evt_held"); c.Intents["email.send"].Status != dedup.IntentPending || c.Intents["email.send"].Attempts != 0 ||
		c.Intents["crm.update"].Status != dedup.IntentDone {
		t.Fatalf("the worker under the console's pause: %+v", c.Intents)
	}
	overview = b.get("/")
	mustContain(t, overview, `<tr data-paused="email"><td>email</td>`, "ada (test)", "warehouse maintenance &lt;until 14:00&gt;", `id="resume-email"`)
	mustNotContain(t, overview, `<option value="email">`, "No target is paused")
	mustContain(t, b.get("/backlog"), `data-paused="email"`, "held by the pause")
	mustNotContain(t, b.get("/backlog"), `data-paused="crm"`)

	confirm = b.post("/resume", url.Values{"csrf": {csrf(t, overview)}, "target": {"email"}})
	mustContain(t, confirm, "Resume email?", "by <strong>ada (test)</strong>", `id="confirm-pause"`)
	if _, ok := e.paused()["email"]; !ok {
		t.Fatal("the resume's confirmation resumed")
	}
	done = b.post("/resume", url.Values{"csrf": {csrf(t, confirm)}, "target": {"email"}, "confirm": {"yes"}, "pause": {pauseShown(t, confirm)}})
	if done.Status != http.StatusSeeOther {
		t.Fatalf("confirmed resume: %d", done.Status)
	}
	if p := e.paused(); len(p) != 0 {
		t.Fatalf("after the resume: %v", p)
	}
	mustContain(t, b.get("/"), "No target is paused")
	mustNotContain(t, b.get("/backlog"), "held by the pause")
}

// A pause and a resume have a redrive's guards: POST only, this browser's CSRF token, not
// from another site, not on a read-only console; and a pause takes a target of the sources
// file, with a reason. None of the refused requests writes the pause.
func TestAPauseIsRefusedWithoutARedrivesGuardsOrForATargetNotInTheSourcesFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.serve(nil)
	token := csrf(t, b.get("/"))
	pause := url.Values{"csrf": {token}, "target": {"email"}, "why": {"maintenance"}, "confirm": {"yes"}}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for name, vs := range pause {
			f[name] = vs
		}
		f.Set(k, v)
		return f
	}
	noSources := e.serve(func(c *console.Config) { c.Sources = nil })
	e.park("shop", "evt_p", "email", "422", time.Now()) // for a form, and its CSRF token, on a console without sources
	readOnly := e.serve(func(c *console.Config) { c.ReadOnly = true })
	overview := readOnly.get("/")
	mustNotContain(t, overview, `action="/pause"`, `action="/resume"`)
	for name, c := range map[string]struct {
		r      response
		status int
	}{
		"read-only pause":        {readOnly.post("/pause", pause), http.StatusForbidden},
		"read-only resume":       {readOnly.post("/resume", pause), http.StatusForbidden},
		"cross-site":             {b.post("/pause", pause, "Sec-Fetch-Site", "cross-site"), http.StatusForbidden},
		"cross-origin":           {b.post("/pause", pause, "Origin", "http://attacker.example"), http.StatusForbidden},
		"no CSRF token":          {b.post("/pause", with("csrf", "")), http.StatusForbidden},
		"another browser's":      {newBrowser(t, b.base).signIn().post("/pause", pause), http.StatusForbidden},
		"GET":                    {b.get("/pause?" + pause.Encode()), http.StatusMethodNotAllowed},
		"not in the sources":     {b.post("/pause", with("target", "billing")), http.StatusBadRequest},
		"resume of a stranger":   {b.post("/resume", with("target", "billing")), http.StatusBadRequest},
		"no reason":              {b.post("/pause", with("why", "")), http.StatusBadRequest},
		"a control character":    {b.post("/pause", with("why", "down\nnow")), http.StatusBadRequest},
		"without a sources file": {noSources.post("/pause", with("csrf", csrf(t, noSources.get("/parked")))), http.StatusBadRequest},
		"a form past its bound":  {b.post("/pause", with("why", string(make([]byte, 8<<10)))), http.StatusBadRequest},
	} {
		if c.r.Status != c.status {
			t.Errorf("%s: %d, want %d\n%s", name, c.r.Status, c.status, c.r.Body)
		}
	}
	if p := e.paused(); len(p) != 0 {
		t.Fatalf("a refused request paused: %v", p)
	}
	// A target paused under a name the sources file lacks (hookctl pause without it) is
	// resumed from the console.
	if err := (&outbox.Targets{API: e.client, Table: e.table}).Pause(context.Background(), "billing", "bob", "typo"); err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.get("/"), `id="resume-billing"`)
	ro := readOnly.get("/")
	mustContain(t, ro, `<tr data-paused="billing">`, "typo")
	mustNotContain(t, ro, `action="/resume"`)
	resume := with("target", "billing")
	resume.Set("pause", pauseShown(t, b.post("/resume", url.Values{"csrf": {token}, "target": {"billing"}})))
	if r := b.post("/resume", resume); r.Status != http.StatusSeeOther || len(e.paused()) != 0 {
		t.Fatalf("resuming a paused target the sources file lacks: %d, %v", r.Status, e.paused())
	}
}

// A resume's confirmation shows the pause it lifts: who paused the target, when and why. Like
// a redrive's, the confirmed form is the operator's decision about what they were shown, and
// sent again later (a stale tab, a second operator's old confirmation) it must not lift
// another pause: bob's maintenance ends and he resumes, carol pauses the target for hers, and
// ada's confirmation of bob's pause, submitted now, lets the calls go into carol's downstream
// maintenance.
func TestAResumeConfirmedForOnePauseDoesNotLiftALaterOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	targets := &outbox.Targets{API: e.client, Table: e.table, Now: func() time.Time { return now }}
	ctx := context.Background()
	if err := targets.Pause(ctx, "email", "bob", "relay upgrade"); err != nil {
		t.Fatal(err)
	}
	b := e.serve(nil)
	confirm := b.post("/resume", url.Values{"csrf": {csrf(t, b.get("/"))}, "target": {"email"}})
	mustContain(t, confirm, "Resume email?", "bob", "relay upgrade")
	shown := url.Values{"csrf": {csrf(t, confirm)}, "target": {"email"}, "why": {""}, "confirm": {"yes"}}

	if err := targets.Resume(ctx, "email"); err != nil { // bob resumes
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	if err := targets.Pause(ctx, "email", "carol", "database migration"); err != nil { // carol pauses
		t.Fatal(err)
	}
	b.post("/resume", shown) // ada's confirmation of bob's pause
	if p, ok := e.paused()["email"]; !ok || p.By != "carol" {
		t.Errorf("after a confirmation of bob's pause was sent: email paused %v (%+v), want carol's pause kept", ok, p)
	}
}

// A resume confirmed for a pause that has changed since (resumed and paused again, or paused
// again over it) lifts nothing and says so: 409, the confirmation of the pause as it is now,
// whose own form then resumes it. One sent after the target was resumed lifts nothing either.
func TestAStaleResumeIsAnsweredWithThePauseAsItIsNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	targets := &outbox.Targets{API: e.client, Table: e.table}
	ctx := context.Background()
	if err := targets.Pause(ctx, "email", "bob", "relay upgrade"); err != nil {
		t.Fatal(err)
	}
	b := e.serve(nil)
	confirm := b.post("/resume", url.Values{"csrf": {csrf(t, b.get("/"))}, "target": {"email"}})
	shown := url.Values{"csrf": {csrf(t, confirm)}, "target": {"email"}, "confirm": {"yes"}, "pause": {pauseShown(t, confirm)}}
	if err := targets.Pause(ctx, "email", "carol", "database migration"); err != nil { // paused again over bob's
		t.Fatal(err)
	}
	stale := b.post("/resume", shown)
	if stale.Status != http.StatusConflict {
		t.Fatalf("a stale resume: %d, want 409", stale.Status)
	}
	mustContain(t, stale, `id="stale"`, "Not resumed", "carol", "database migration", `id="confirm-pause"`)
	if p, ok := e.paused()["email"]; !ok || p.By != "carol" {
		t.Fatalf("after a stale resume: %+v %v, want carol's pause kept", p, ok)
	}
	again := url.Values{"csrf": {csrf(t, stale)}, "target": {"email"}, "confirm": {"yes"}, "pause": {pauseShown(t, stale)}}
	if r := b.post("/resume", again); r.Status != http.StatusSeeOther || len(e.paused()) != 0 {
		t.Fatalf("the resume confirmed again: %d, paused %v", r.Status, e.paused())
	}
	if r := b.post("/resume", again); r.Status != http.StatusConflict || !strings.Contains(r.Body, "resumed already") {
		t.Fatalf("the same resume sent again: %d\n%s", r.Status, r.Body)
	}
}

// A pause's confirmation is the operator's decision about the target as it showed it: not
// paused. Confirmed after another operator paused it (carol, for her database migration), it
// must not replace her pause, whose reason, author and id her own resume form names: it
// answers 409 with the confirmation of the pause as it is now, and carol's pause is kept.
func TestAPauseConfirmedForATargetNotPausedDoesNotReplaceAPauseMadeSince(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.serve(nil)
	confirm := b.post("/pause", url.Values{"csrf": {csrf(t, b.get("/"))}, "target": {"email"}, "why": {"relay upgrade"}})
	mustContain(t, confirm, "Pause email?", `id="confirm-pause"`)
	mustNotContain(t, confirm, "It is paused already")
	shown := url.Values{"csrf": {csrf(t, confirm)}, "target": {"email"}, "why": {"relay upgrade"}, "confirm": {"yes"}}

	targets := &outbox.Targets{API: e.client, Table: e.table}
	if err := targets.Pause(context.Background(), "email", "carol", "database migration"); err != nil { // carol pauses
		t.Fatal(err)
	}
	stale := b.post("/pause", shown) // ada's confirmation of a target that was not paused
	if p, ok := e.paused()["email"]; !ok || p.By != "carol" || p.Why != "database migration" {
		t.Errorf("after ada's confirmation of an unpaused target was sent: email paused %v (%+v), want carol's pause kept", ok, p)
	}
	if stale.Status != http.StatusConflict {
		t.Fatalf("a pause confirmed for a target that has been paused since: %d, want 409", stale.Status)
	}
	mustContain(t, stale, "carol", "database migration")
}
