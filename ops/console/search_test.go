package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// Search finds an event by its id, with or without its source, and a source alone lists its
// recent events.
func TestSearchFindsAnEventByItsIDWithOrWithoutTheSource(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_1", false)
	b := e.serve(nil)
	for _, q := range []string{"source=shop&id=evt_1", "id=evt_1", "id=+evt_1+"} {
		r := b.get("/events?" + q)
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/events/shop/evt_1" {
			t.Fatalf("%s: %d %q, want a redirect to the event", q, r.Status, r.Header.Get("Location"))
		}
	}
	recent := b.get("/events?source=shop")
	mustContain(t, recent, `href="/events/shop/evt_1"`)
	if r := b.get("/events?id=evt_none"); r.Status != http.StatusNotFound {
		t.Fatalf("an unknown id: %d, want 404", r.Status)
	}
}

// The search page says "Paste the provider's event id, as its dashboard shows it". GitHub's
// dashboard shows a delivery's GUID (X-GitHub-Delivery), but a github source's claim is
// <hook-id>:<GUID> (docs/hookctl.md, GitHub ids), which hookctl inspect finds from the GUID
// alone or with -scope. The console looks the GUID up as it is, finds nothing, and says the
// event "was never accepted, or its claim expired": an operator told that an accepted,
// claimed delivery was lost. The page must find it, or say that the source's ids are scoped
// and how to give the scope.
func TestAGitHubDeliverysGUIDIsNotSaidToHaveNeverBeenAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const guid = "8f2f5c4e-9a4e-11ef-8c6d-1b2c3d4e5f60"
	e.commit("gh", "12345678:"+guid, false)
	b := e.serve(nil)
	for _, q := range []string{"/events?id=" + guid, "/events?source=gh&id=" + guid} {
		r := b.get(q)
		if r.Status == http.StatusSeeOther {
			r = b.get(r.Header.Get("Location"))
		}
		if r.Status == http.StatusOK && strings.Contains(r.Body, "12345678:"+guid) {
			continue // found
		}
		if strings.Contains(r.Body, "never accepted") {
			t.Errorf("%s (%d) says the delivery was never accepted", q, r.Status)
		}
		if !strings.Contains(r.Body, "X-GitHub-Hook-ID") {
			t.Errorf("%s (%d) neither finds the claim nor says its ids are scoped by X-GitHub-Hook-ID:\n%s", q, r.Status, r.Body)
		}
	}
}

// An address whose path is not valid percent-encoding gets 400 ("Unreadable address"); one
// whose query is not is read as if the unreadable parameter were absent: a search for an id
// lists the source's recent events instead, and the Parked page filtered by an unreadable
// source lists every source's parked intents, with "Re-drive all shown" for them, as if no
// filter had been asked for.
func TestAnUnreadableQueryGetsAClearPageNotAnotherOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_1", false)
	b := e.serve(nil)
	for _, p := range []string{"/events?source=shop&id=evt%ZZ1", "/events?id=%ZZ", "/parked?source=sh%ZZop", "/parked?source=shop&error=%G0"} {
		if r := b.get(p); r.Status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", p, r.Status)
		}
	}
}

// The scope the hint asks for finds the delivery with one key lookup.
func TestAScopedSearchFindsAGitHubDeliveryByItsGUID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const guid = "5e2f5c4e-9a4e-11ef-8c6d-1b2c3d4e5f61"
	e.commit("gh", "87654321:"+guid, false)
	b := e.serve(nil)
	r := b.get("/events?source=gh&scope=87654321&id=" + guid)
	if r.Status == http.StatusSeeOther {
		r = b.get(r.Header.Get("Location"))
	}
	if r.Status != http.StatusOK || !strings.Contains(r.Body, "87654321:"+guid) {
		t.Fatalf("a search with the scope: %d, want the event page of 87654321:%s:\n%s", r.Status, guid, r.Body)
	}
}
