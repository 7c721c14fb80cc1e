package console_test

// Findings of a security review of the console (attack26): each test names what must never
// happen, and fails while it does.

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/console"
)

// Without a token the console's only guard is the Host header, which the client writes: a
// console mounted on a listener other clients can reach (console.New takes any; CheckAddr is
// advice) answers a remote client that sends "Host: localhost" with every page, and with
// the page's CSRF token and cookie, a redrive. The DNS-rebinding check is not an access
// check: a request from a non-loopback peer needs a token.
func TestWithoutATokenARemotePeerIsNotAnsweredWhateverItsHostHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_remote", false)
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/events/shop/evt_remote", nil)
	req.Host = "localhost"
	req.RemoteAddr = "203.0.113.7:40000" // a peer on another machine
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == http.StatusOK || strings.Contains(rec.Body.String(), "evt_remote") {
		t.Fatalf("a remote peer without a token was answered %d by naming localhost:\n%.400s", rec.Code, rec.Body.String())
	}
}
