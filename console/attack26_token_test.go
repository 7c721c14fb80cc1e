package console_test

// Findings of a security review of the console (attack26): each test names what must never
// happen, and fails while it does.

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/console"
)

// The token is all that guards a console on a non-loopback address, and /login takes
// unlimited guesses: a token a person can guess in a few tries is a configuration that cannot
// work, and should be refused where it is configured.
func TestCheckAddrRefusesAGuessableTokenOnANonLoopbackAddress(t *testing.T) {
	for _, token := range []string{"x", "1234", " ", "password"} {
		if err := console.CheckAddr("0.0.0.0:8030", token); err == nil {
			t.Errorf("CheckAddr(0.0.0.0:8030, %q) accepted it", token)
		}
	}
}

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

// /login and the Authorization header take guesses at the token: past a few, the console
// stops evaluating them for a while (429, even for the right token, so a guess past the bound
// learns nothing), and a visitor already signed in is not affected.
func TestGuessesAtTheTokenAreBounded(t *testing.T) {
	t.Parallel()
	const token = "4f1c9a7e2b8d6035e1a9c4f7b2d8e063"
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t)
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Token: token, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	base := serveHandler(t, h)
	signedIn := newBrowser(t, base)
	if r := signedIn.post("/login", url.Values{"token": {token}}); r.Status != http.StatusSeeOther {
		t.Fatalf("signing in: %d", r.Status)
	}
	guesser := newBrowser(t, base)
	refused := 0
	for i := range 100 {
		var r response
		if i%2 == 0 {
			r = guesser.post("/login", url.Values{"token": {fmt.Sprintf("guess-%d", i)}})
		} else {
			req, _ := http.NewRequest(http.MethodGet, base+"/audit", nil)
			req.Header.Set("Authorization", fmt.Sprintf("Bearer guess-%d", i))
			r = guesser.do(req)
		}
		if r.Status == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused < 80 {
		t.Fatalf("%d of 100 guesses refused unevaluated, want all but a few", refused)
	}
	if r := guesser.post("/login", url.Values{"token": {token}}); r.Status != http.StatusTooManyRequests {
		t.Fatalf("the right token past the bound: %d, want 429 (not evaluated)", r.Status)
	}
	if r := signedIn.get("/audit"); r.Status != http.StatusOK {
		t.Fatalf("a signed-in visitor during the guessing: %d", r.Status)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if r := guesser.post("/login", url.Values{"token": {token}}); r.Status != http.StatusSeeOther {
		t.Fatalf("the right token an hour later: %d, want 303", r.Status)
	}
}

// The token rule's space: every generated shape passes; every short or guessable one is
// refused for a non-loopback address, and a loopback address takes any.
func TestCheckAddrTakesGeneratedTokensAndRefusesGuessableShapes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(30, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var strong []string
	for range 200 {
		strong = append(strong, hex.EncodeToString(random(16)), hex.EncodeToString(random(32)),
			base64.RawURLEncoding.EncodeToString(random(24)), base64.StdEncoding.EncodeToString(random(24)))
		u := random(16)
		strong = append(strong, fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:]))
	}
	for _, tok := range strong {
		if err := console.CheckAddr("0.0.0.0:8030", tok); err != nil {
			t.Fatalf("a generated token %q refused: %v", tok, err)
		}
	}
	weak := []string{"", " ", "x", "1234", "password", "hunter2", strings.Repeat("a", 100), strings.Repeat("ab", 40),
		strings.Repeat("abcd", 20), strings.Repeat("password", 3), "123456789012345678901234", strings.Repeat(" ", 64),
		hex.EncodeToString(random(11)),                   // 22 characters: too short
		base64.RawURLEncoding.EncodeToString(random(18)), // 24 characters: too short
		strings.Repeat("0", 63) + "1"}
	for _, tok := range weak {
		if err := console.CheckAddr("0.0.0.0:8030", tok); err == nil {
			t.Errorf("CheckAddr(0.0.0.0:8030, %q) accepted it", tok)
		}
		if err := console.CheckAddr("[::1]:8030", tok); err != nil {
			t.Errorf("CheckAddr([::1]:8030, %q): %v, want loopback served with any token", tok, err)
		}
	}
}

// A console mounted by a team on a listener of its own, behind a weak token, answers no peer
// other than loopback, whatever it presents: CheckAddr's rule, per request.
func TestAWeakTokenGuardsOnlyLoopbackPeers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Token: "1234"})
	if err != nil {
		t.Fatal(err)
	}
	for peer, want := range map[string]int{"203.0.113.7:40000": http.StatusForbidden, "127.0.0.1:40000": http.StatusOK} {
		req := httptest.NewRequest(http.MethodGet, "/audit", nil)
		req.Header.Set("Authorization", "Bearer 1234")
		req.Host = "127.0.0.1:8030"
		req.RemoteAddr = peer
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("peer %s with the weak token: %d, want %d", peer, rec.Code, want)
		}
	}
	// Nor does a remote peer's sign-in take a guess: the right token and a wrong one get the
	// same answer.
	for _, tok := range []string{"1234", "4321"} {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("token="+tok))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Host = "127.0.0.1:8030"
		req.RemoteAddr = "203.0.113.7:40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || len(rec.Header().Values("Set-Cookie")) != 0 {
			t.Errorf("a remote sign-in with %q: %d %v, want 403 and no cookie", tok, rec.Code, rec.Header().Values("Set-Cookie"))
		}
	}
}

// The login cookie expires: in the browser (Max-Age) and at the console, which signs its end
// into it, so a copied cookie stops working too.
func TestTheLoginCookieExpires(t *testing.T) {
	t.Parallel()
	const token = "4f1c9a7e2b8d6035e1a9c4f7b2d8e063"
	e := newEnv(t)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Token: token, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveHandler(t, h))
	r := b.post("/login", url.Values{"token": {token}})
	var login *http.Cookie
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "oncehook_console" {
			login = c
		}
	}
	if login == nil || login.MaxAge <= 0 || login.MaxAge > 24*3600 {
		t.Fatalf("the login cookie %+v: want a Max-Age of at most a day", login)
	}
	if r := b.get("/audit"); r.Status != http.StatusOK {
		t.Fatalf("signed in: %d", r.Status)
	}
	mu.Lock()
	now = now.Add(time.Duration(login.MaxAge)*time.Second + time.Minute)
	mu.Unlock()
	// A browser would have dropped it; one copied elsewhere is sent all the same.
	req, _ := http.NewRequest(http.MethodGet, b.base+"/audit", nil)
	req.AddCookie(&http.Cookie{Name: login.Name, Value: login.Value})
	if r := newBrowser(t, b.base).do(req); r.Status != http.StatusUnauthorized {
		t.Fatalf("the login cookie past its end: %d, want 401", r.Status)
	}
}
