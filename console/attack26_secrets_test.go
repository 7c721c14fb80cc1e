package console_test

// Findings of a security review of the console (attack26): each test names what must never
// happen, and fails while it does.

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// A target's token is often in its URL's path (a Slack or Discord webhook URL). The console
// shows a URL in an error by its scheme and host only, but a downstream that answers with the
// path it was called on (Express's "Cannot POST /path", many frameworks' 404s) puts the
// path, token and all, in last_error without a scheme, and the event and parked pages show it.
func TestAnErrorEchoingTheTargetsPathDoesNotShowIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Cannot POST "+r.URL.RequestURI(), http.StatusNotFound)
	}))
	t.Cleanup(echo.Close)
	exec := &outbox.HTTPExecutor{URL: echo.URL + "/hooks/SECRET-URL-PATH?token=SECRET-URL-QUERY", Timeout: 5 * time.Second}
	w, err := outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }})
	if err != nil {
		t.Fatal(err)
	}
	e.worker = w
	e.commit("shop", "evt_echo", false)
	e.drain()
	if in := e.claim("shop", "evt_echo").Intents["email.send"]; in.Status != dedup.IntentParked || !strings.Contains(in.LastError, "SECRET-URL") {
		t.Fatalf("setup: %+v, want parked with the echoed path in last_error", in)
	}
	b := e.serve(nil)
	for _, p := range []string{"/events/shop/evt_echo", "/parked"} {
		r := b.get(p)
		mustContain(t, r, "evt_echo")
		mustNotContain(t, r, "SECRET-URL")
	}
}
