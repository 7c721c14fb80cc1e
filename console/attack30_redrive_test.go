package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/console"
	"github.com/oncehook/oncehook/sources"
)

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
