package console_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/ops/console"
)

// Nothing is answered without the token; with a weak one, only loopback hosts are answered
// (a DNS-rebinding page names its own host).
func TestAccessIsByTokenAndLoopbackOnlyWithAWeakOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	weak := e.serve(func(c *console.Config) { c.Token = "1234" })
	req, _ := http.NewRequest(http.MethodGet, weak.base+"/", nil)
	req.Host = "attacker.example:8030"
	req.Header.Set("Authorization", "Bearer 1234")
	if r := weak.do(req); r.Status != http.StatusMisdirectedRequest {
		t.Fatalf("a foreign Host with a weak token: %d", r.Status)
	}
	for _, host := range []string{"localhost:8030", "[::1]:8030", "127.0.0.1"} {
		req, _ := http.NewRequest(http.MethodGet, weak.base+"/events", nil)
		req.Host = host
		if r := weak.do(req); r.Status != http.StatusUnauthorized {
			t.Errorf("Host %s without the token: %d, want 401", host, r.Status)
		}
		req.Header.Set("Authorization", "Bearer 1234")
		if r := weak.do(req); r.Status != http.StatusOK {
			t.Errorf("Host %s: %d", host, r.Status)
		}
	}

	b := e.serve(func(c *console.Config) { c.Token = "4f1c9a7e2b8d6035e1a9c4f7b2d8e063" })
	for _, p := range []string{"/", "/events/shop/evt_1", "/parked", "/backlog", "/audit"} {
		if r := b.get(p); r.Status != http.StatusUnauthorized || !strings.Contains(r.Body, `action="/login"`) {
			t.Fatalf("%s without the token: %d", p, r.Status)
		}
	}
	if r := b.post("/login", url.Values{"token": {"wrong"}}); r.Status != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", r.Status)
	}
	if r := b.post("/login", url.Values{"token": {"4f1c9a7e2b8d6035e1a9c4f7b2d8e063"}}); r.Status != http.StatusSeeOther {
		t.Fatalf("the token: %d", r.Status)
	}
	if r := b.get("/parked"); r.Status != http.StatusOK {
		t.Fatalf("after signing in: %d", r.Status)
	}
	bearer := newBrowser(t, b.base)
	req, _ = http.NewRequest(http.MethodGet, b.base+"/backlog", nil)
	req.Header.Set("Authorization", "Bearer 4f1c9a7e2b8d6035e1a9c4f7b2d8e063")
	req.Host = "console.internal:8030" // any host, with the token
	if r := bearer.do(req); r.Status != http.StatusOK {
		t.Fatalf("a bearer token: %d", r.Status)
	}
}

// Loopback is served with any token (a console refuses none); any other address only with a
// strong token and over TLS: off loopback the token, the login cookie and every page cross
// the network.
func TestCheckAddrServesOtherMachinesOnlyWithAStrongTokenOverTLS(t *testing.T) {
	t.Parallel()
	const strong = "4f1c9a7e2b8d6035e1a9c4f7b2d8e063"
	for _, c := range []struct {
		addr, token string
		tls, ok     bool
		says        string
	}{
		{"127.0.0.1:8030", "", false, true, ""}, {"[::1]:8030", "", false, true, ""}, {"localhost:8030", "", false, true, ""},
		{"127.0.0.1:8030", "t", false, true, ""},
		{"0.0.0.0:8030", "", true, false, "set a token"}, {":8030", "", true, false, "set a token"}, {"10.0.0.5:8030", "", true, false, "set a token"},
		{"nonsense", "", false, false, "nonsense"}, {"0.0.0.0:8030", "t", true, false, "guessable"},
		{"0.0.0.0:8030", strong, false, false, "-tls-cert and -tls-key"}, {"10.0.0.5:8030", strong, false, false, "TLS"},
		{"0.0.0.0:8030", strong, true, true, ""},
	} {
		err := console.CheckAddr(c.addr, c.token, c.tls)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), c.says)) {
			t.Errorf("%s (token %q, TLS %v): %v, want ok %v saying %q", c.addr, c.token, c.tls, err, c.ok, c.says)
		}
	}
}

// The token is all that guards a console on a non-loopback address: a token a person can
// guess in a few tries is a configuration that cannot work, and is refused where it is
// configured. docs/console.md: a token guards an address other machines can reach only if it
// is strong, "so a word, a number, a repeated or cycled pattern is refused at start". Nor may a
// string of 24 or more characters that does not repeat itself pass for strong when it is among
// the first guesses (the bound on guesses, 10 a minute, lets a list of thousands through in a
// day): the alphabet, a keyboard row, the best-known passphrase there is, the project's own
// name and the year.
func TestCheckAddrRefusesAGuessableTokenOnANonLoopbackAddress(t *testing.T) {
	t.Parallel()
	for _, token := range []string{
		"x", "1234", " ", "password",
		"abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789abcdefghijklmn",
		"qwertyuiopasdfghjklzxcvbnm", "1qaz2wsx3edc4rfv5tgb6yhn",
		"correcthorsebatterystaple", "the-quick-brown-fox-jumps", "ThisIsMyConsolePassword!",
		"oncehook-console-token-2026",
	} {
		if err := console.CheckAddr("0.0.0.0:8030", token, true); err == nil {
			t.Errorf("CheckAddr(0.0.0.0:8030, %q) accepted it", token)
		}
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
		if err := console.CheckAddr("0.0.0.0:8030", tok, true); err != nil {
			t.Fatalf("a generated token %q refused: %v", tok, err)
		}
	}
	weak := []string{"", " ", "x", "1234", "password", "hunter2", strings.Repeat("a", 100), strings.Repeat("ab", 40),
		strings.Repeat("abcd", 20), strings.Repeat("password", 3), "123456789012345678901234", strings.Repeat(" ", 64),
		hex.EncodeToString(random(11)),                   // 22 characters: too short
		base64.RawURLEncoding.EncodeToString(random(18)), // 24 characters: too short
		strings.Repeat("0", 63) + "1"}
	for _, tok := range weak {
		if err := console.CheckAddr("0.0.0.0:8030", tok, true); err == nil {
			t.Errorf("CheckAddr(0.0.0.0:8030, %q) accepted it", tok)
		}
		if err := console.CheckAddr("[::1]:8030", tok, false); err != nil {
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

// A guessable token guards loopback only (CheckAddr allows it there; the console refuses
// remote peers with it). Loopback without a token refuses a request addressed to a foreign
// host (421): that is what stops a DNS-rebinding page, whose requests come from the
// operator's own browser, a loopback peer. With a weak token that check is gone: a rebinding
// page, same-origin with itself, takes its guesses at the token (the bound allows 10 at once,
// then one every 6 seconds: a short token falls in hours) and, once right, signs in, reads
// every page and the CSRF token, and re-drives. Setting a weak token makes a laptop's console
// easier to reach than setting none.
func TestAConsoleWithAGuessableTokenAnswersNoForeignHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_rebound", false)
	const weak = "tok-3f9a"
	if console.CheckAddr("0.0.0.0:8030", weak, true) == nil {
		t.Fatalf("setup: %q is a strong token", weak)
	}
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, Token: weak})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveHandler(t, h))
	const rebound = "rebound.attacker.example:8030"
	asPage := func(req *http.Request) *http.Request {
		req.Host = rebound
		req.Header.Set("Origin", "http://"+rebound)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		return req
	}
	req, _ := http.NewRequest(http.MethodPost, b.base+"/login", strings.NewReader(url.Values{"token": {weak}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if r := b.do(asPage(req)); r.Status != http.StatusMisdirectedRequest {
		t.Errorf("a sign-in addressed to %s: %d, want 421", rebound, r.Status)
	}
	req, _ = http.NewRequest(http.MethodGet, b.base+"/events/shop/evt_rebound", nil)
	if r := b.do(asPage(req)); r.Status != http.StatusMisdirectedRequest || strings.Contains(r.Body, "evt_rebound") {
		t.Errorf("the event page addressed to %s, signed in: %d, want 421 and nothing of the event", rebound, r.Status)
	}
}

// A proxy on the same machine (nginx's proxy_pass keeps Host as written) relays every client
// from a loopback peer: without a strong token, a request a proxy says it relayed is refused,
// whatever its peer and Host.
func TestAConsoleWithoutAStrongTokenRefusesWhatAProxyRelays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, token := range []string{"1234", "tok-3f9a"} {
		h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, hdr := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "X-Forwarded-Host", "Via"} {
			req := httptest.NewRequest(http.MethodGet, "/audit", nil)
			req.Host, req.RemoteAddr = "127.0.0.1:8030", "127.0.0.1:40000"
			req.Header.Set(hdr, "203.0.113.7")
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusForbidden {
				t.Errorf("token %q, relayed (%s): %d, want 403", token, hdr, rec.Code)
			}
		}
	}
	// A strong token guards the console wherever its clients are: a proxy may relay them.
	const strong = "4f1c9a7e2b8d6035e1a9c4f7b2d8e063"
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, Token: strong})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/audit", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	req.Header.Set("Authorization", "Bearer "+strong)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("a relayed request with the strong token: %d, want 200", rec.Code)
	}
}

// A visitor without access gets nothing of the deployment: the layout around the page names
// the table (the stack's name) and the console's modes.
//
//   - A visitor without the token gets the sign-in page.
//   - "A DNS-rebinding page cannot reach a console on a laptop": it cannot act, but it reads the
//     421 answer (the page's own origin, rebound to 127.0.0.1, made the request).
func TestTheAnswerToAVisitorWithoutAccessShowsNothingOfTheDeployment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, token, host string
		status            int
	}{
		{"the sign-in page", "a-long-enough-token-0123456789", "", http.StatusUnauthorized},
		{"the answer to a foreign host", "1234", "rebound.attacker.example:8030", http.StatusMisdirectedRequest},
	} {
		h, err := console.New(console.Config{DynamoDB: fakeTable{}, Table: "Oncehook-OncehookTable-SECRET-STACK", Token: c.token, ShowPayloads: true})
		if err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t, serveHandler(t, h))
		req, err := http.NewRequest(http.MethodGet, b.base+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.host != "" {
			req.Host = c.host
		}
		r := b.do(req)
		if r.Status != c.status {
			t.Fatalf("%s: %d, want %d", c.name, r.Status, c.status)
		}
		mustNotContain(t, r, "SECRET-STACK", "payloads shown")
	}
}

// Whatever a visitor without access gets (the sign-in page, a wrong token, too many guesses,
// a foreign host, a remote peer) names nothing of the deployment: not the table (the stack),
// not the console's modes, not the sources, and sets no cookie but the login's.
func TestNoAnswerToAVisitorWithoutAccessShowsTheDeployment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const table = "Oncehook-OncehookTable-SECRET-STACK"
	secret := []string{"SECRET-STACK", "read-only", "payloads shown", "shop", "/parked", "/backlog"}
	mk := func(token string) http.Handler {
		h, err := console.New(console.Config{DynamoDB: fakeTable{}, Table: table, Token: token, ReadOnly: true, ShowPayloads: true, Sources: e.file})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	withToken, weak := mk("4f1c9a7e2b8d6035e1a9c4f7b2d8e063"), mk("1234")
	type visit struct {
		h            http.Handler
		method, path string
		host, peer   string
		body, bearer string
		status       int
	}
	visits := map[string]visit{
		"the sign-in page":          {withToken, "GET", "/login", "", "", "", "", http.StatusOK},
		"a page without the token":  {withToken, "GET", "/parked", "", "", "", "", http.StatusUnauthorized},
		"a wrong token":             {withToken, "POST", "/login", "", "", "token=nope", "", http.StatusUnauthorized},
		"a wrong bearer":            {withToken, "GET", "/", "", "", "", "nope", http.StatusUnauthorized},
		"no such page":              {withToken, "GET", "/nowhere", "", "", "", "", http.StatusUnauthorized},
		"a foreign host":            {weak, "GET", "/", "rebound.attacker.example:8030", "", "", "", http.StatusMisdirectedRequest},
		"a remote peer":             {weak, "GET", "/", "localhost", "203.0.113.7:40000", "", "", http.StatusForbidden},
		"a remote peer, weak token": {weak, "GET", "/", "localhost", "203.0.113.7:40000", "", "1234", http.StatusForbidden},
	}
	for name, v := range visits {
		var body io.Reader
		if v.body != "" {
			body = strings.NewReader(v.body)
		}
		req := httptest.NewRequest(v.method, v.path, body)
		if v.body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if v.host != "" {
			req.Host = v.host
		}
		if v.peer != "" {
			req.RemoteAddr = v.peer
		}
		if v.bearer != "" {
			req.Header.Set("Authorization", "Bearer "+v.bearer)
		}
		rec := httptest.NewRecorder()
		v.h.ServeHTTP(rec, req)
		if rec.Code != v.status {
			t.Errorf("%s: %d, want %d", name, rec.Code, v.status)
		}
		for _, s := range secret {
			if strings.Contains(rec.Body.String(), s) {
				t.Errorf("%s shows %q:\n%s", name, s, rec.Body.String())
			}
		}
		if c := rec.Header().Values("Set-Cookie"); len(c) != 0 {
			t.Errorf("%s sets cookies %v", name, c)
		}
	}
	// Past the bound on guesses too.
	for range 20 {
		req := httptest.NewRequest("POST", "/login", strings.NewReader("token=nope"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		withToken.ServeHTTP(rec, req)
		if rec.Code == http.StatusTooManyRequests {
			for _, s := range secret {
				if strings.Contains(rec.Body.String(), s) {
					t.Fatalf("the 429 shows %q", s)
				}
			}
			return
		}
	}
	t.Fatal("no 429 after 20 wrong tokens")
}

// Nothing of the deployment to a visitor without access: on every route, by every method, a visitor without access (no token, a wrong
// one, a foreign Host, a remote peer) gets a page with nothing of the deployment on it.
func TestNoRouteTellsAVisitorWithoutAccessAboutTheDeployment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_private", false)
	const table = "Oncehook-OncehookTable-SECRET-STACK"
	mk := func(token string) http.Handler {
		h, err := console.New(console.Config{DynamoDB: e.client, Table: table, Token: token, ReadOnly: true, ShowPayloads: true, Sources: e.file})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	withToken, weak := mk("4f1c9a7e2b8d6035e1a9c4f7b2d8e063"), mk("1234")
	routes := []string{"/", "/events", "/events?source=shop", "/events?id=evt_private", "/events/shop/evt_private", "/events/shop",
		"/parked", "/parked?source=shop", "/redrive", "/redrive/query", "/pause", "/resume", "/events?key=ORDER%23evt_private", "/backlog", "/audit", "/login", "/nowhere", "/events/nosuch/x"}
	secret := []string{"SECRET-STACK", "read-only", "payloads shown", "shop", "evt_private", "/parked", "/backlog", "gh"}
	visitors := []struct {
		name       string
		h          http.Handler
		host, peer string
		bearer     string
	}{
		{"no token", withToken, "", "", ""},
		{"a wrong bearer", withToken, "", "", "4f1c9a7e2b8d6035e1a9c4f7b2d8e064"},
		{"a foreign host", weak, "rebound.attacker.example:8030", "", ""},
		{"a remote peer", weak, "localhost:8030", "203.0.113.7:40000", ""},
	}
	for _, v := range visitors {
		for _, route := range routes {
			for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete} {
				req := httptest.NewRequest(method, route, strings.NewReader("ref=s%3Dshop%26e%3Devt_private%26i%3Demail.send&confirm=yes&token=nope"))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if v.host != "" {
					req.Host = v.host
				}
				if v.peer != "" {
					req.RemoteAddr = v.peer
				}
				if v.bearer != "" {
					req.Header.Set("Authorization", "Bearer "+v.bearer)
				}
				rec := httptest.NewRecorder()
				v.h.ServeHTTP(rec, req)
				if rec.Code < 400 && !(route == "/login" && rec.Code == http.StatusOK) {
					t.Errorf("%s: %s %s: %d, want a refusal", v.name, method, route, rec.Code)
				}
				body := rec.Body.String()
				for _, s := range secret {
					if strings.Contains(body, s) {
						t.Errorf("%s: %s %s (%d) shows %q", v.name, method, route, rec.Code, s)
					}
				}
				if c := rec.Header().Values("Set-Cookie"); len(c) != 0 {
					t.Errorf("%s: %s %s sets %v", v.name, method, route, c)
				}
			}
		}
	}
	if in := e.claim("shop", "evt_private").Intents["email.send"]; in.Status != dedup.IntentPending || in.RedrivenBy != "" {
		t.Fatalf("a visitor without access changed an intent: %+v", in)
	}
}

// everyCall counts the console's DynamoDB calls, the table's description included.
type everyCall struct{ *countingAPI }

func (c everyCall) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	c.calls.Add(1)
	return c.API.DescribeTable(ctx, in, o...)
}

// A page costs DynamoDB reads (up to MaxIndexReads entries of the index), and a browser sends
// the console's cookie with what another page makes it request from the same site: another
// port of localhost is the same site, so an <img> or a <script> on any local dev server the
// operator opens would make those reads, as would a cross-site one where the cookie went
// along. A request the browser marks (Sec-Fetch-Site) as from another origin is refused
// before any read, unless it is a navigation (a link followed); one typed in, from the
// console's own pages, or without the headers (curl with the token) is served.
func TestARequestAnotherSitesPageMakesIsRefusedBeforeAnyRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const token = "4f1c9a7e2b8d6035e1a9c4f7b2d8e063"
	api := &countingAPI{API: e.client}
	h, err := console.New(console.Config{DynamoDB: everyCall{api}, Table: e.table, Sources: e.file, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveHandler(t, h))
	if r := b.post("/login", url.Values{"token": {token}}); r.Status != http.StatusSeeOther {
		t.Fatalf("signing in: %d", r.Status)
	}
	get := func(site, mode, dest string) response {
		req, _ := http.NewRequest(http.MethodGet, b.base+"/backlog", nil)
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
			req.Header.Set("Sec-Fetch-Mode", mode)
			req.Header.Set("Sec-Fetch-Dest", dest)
		}
		return b.do(req)
	}
	for name, hdr := range map[string][3]string{
		"an <img> on another site":                {"cross-site", "no-cors", "image"},
		"a fetch() on another site":               {"cross-site", "cors", "empty"},
		"an <object> on another site":             {"cross-site", "navigate", "object"},
		"a <script> on another port of localhost": {"same-site", "no-cors", "script"},
		"a fetch() on another port of localhost":  {"same-site", "cors", "empty"},
	} {
		if r := get(hdr[0], hdr[1], hdr[2]); r.Status != http.StatusForbidden || strings.Contains(r.Body, "/parked") {
			t.Errorf("%s: %d, want 403 and nothing of the console", name, r.Status)
		}
	}
	if n := api.calls.Load(); n != 0 {
		t.Errorf("the refused requests made %d DynamoDB calls, want none", n)
	}
	for name, hdr := range map[string][3]string{
		"a link followed from another site": {"cross-site", "navigate", "document"},
		"the console's own link":            {"same-origin", "navigate", "document"},
		"typed in the address bar":          {"none", "navigate", "document"},
		"curl":                              {"", "", ""},
	} {
		if r := get(hdr[0], hdr[1], hdr[2]); r.Status != http.StatusOK {
			t.Errorf("%s: %d, want 200", name, r.Status)
		}
	}
}

// No configuration serves without a token: on loopback too, any process of the machine, and
// any page the operator's browser opens, would read every page and re-drive with the
// operator's AWS credentials.
func TestNoConsoleServesWithoutAToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file})
	var invalid *dedup.InvalidError
	if !errors.As(err, &invalid) || invalid.Field != "Token" {
		t.Fatalf("a console without a token: %v, want refused naming Token", err)
	}
}

// The sign-in link hookctl console prints, /login?token=, signs a browser in: it sets the
// login cookie and sends the browser on to the overview, so the token leaves the address bar.
// A wrong token in it is a wrong guess.
func TestTheSignInLinkSignsIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const token = "4f1c9a7e2b8d6035e1a9c4f7b2d8e063"
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveHandler(t, h))
	if r := b.get("/login?token=4f1c9a7e2b8d6035e1a9c4f7b2d8e064"); r.Status != http.StatusUnauthorized {
		t.Fatalf("the link with a wrong token: %d, want 401", r.Status)
	}
	if r := b.get("/audit"); r.Status != http.StatusUnauthorized {
		t.Fatalf("setup: /audit before signing in: %d", r.Status)
	}
	if r := b.get("/login?token=" + token); r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Fatalf("the link: %d to %q, want 303 to /", r.Status, r.Header.Get("Location"))
	}
	if r := b.get("/audit"); r.Status != http.StatusOK {
		t.Fatalf("/audit signed in by the link: %d", r.Status)
	}
}

// A page that frames the console (an <iframe>, a <frame>) makes the browser navigate the
// frame, cookie and all when the page is of the same site: another port of localhost. The
// console is never shown framed (frame-ancestors 'none', X-Frame-Options: DENY), so serving the
// frame only spends its reads for the framing page: a hidden frame per page, as many as it
// likes, each up to MaxIndexReads of the index, and no person sees them. A framed navigation
// from another origin is refused before any read, as an <img> is.
func TestAFrameAnotherPageEmbedsReadsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := &countingAPI{API: e.client}
	h, err := console.New(console.Config{DynamoDB: everyCall{api}, Table: e.table, Sources: e.file, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	b := signedIn(t, h)
	for _, site := range []string{"same-site", "cross-site"} {
		for _, dest := range []string{"iframe", "frame"} {
			for _, path := range []string{"/", "/backlog", "/parked", "/events?source=shop"} {
				req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
				req.Header.Set("Sec-Fetch-Site", site)
				req.Header.Set("Sec-Fetch-Mode", "navigate")
				req.Header.Set("Sec-Fetch-Dest", dest)
				if r := b.do(req); r.Status != http.StatusForbidden {
					t.Errorf("%s in a %s %s: %d, want 403", path, site, dest, r.Status)
				}
			}
		}
	}
	if n := api.calls.Load(); n != 0 {
		t.Errorf("the framed requests made %d DynamoDB calls, want none", n)
	}
}

// Guesses at the token are bounded (10, then one every 6 s), and past the bound none is
// compared, the right one neither: the operator's sign-in link and their scripts' bearer token
// are answered 429. So what may spend the bound matters: any page the operator's browser
// opens can frame /login?token=<anything> (a navigation, which the console serves whatever
// site asks), a frame every 6 seconds, and keep the operator out of their own console for as
// long as the tab stays open. A guess another site's page made is not the operator's: it must
// not spend their bound.
func TestAnotherSitesPageCannotSpendTheGuessesAtTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveHandler(t, h))
	for range 12 { // a hidden frame of another site's page, loaded again and again
		req, _ := http.NewRequest(http.MethodGet, b.base+"/login?token=not-the-token", nil)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		req.Header.Set("Sec-Fetch-Dest", "iframe")
		b.do(req)
	}
	req, _ := http.NewRequest(http.MethodGet, b.base+"/audit", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if r := b.do(req); r.Status != http.StatusOK {
		t.Errorf("the operator's script with the right token, after another site's frames: %d, want 200", r.Status)
	}
	if r := b.get("/login?token=" + testToken); r.Status != http.StatusSeeOther {
		t.Errorf("the operator's sign-in link, after another site's frames: %d, want 303", r.Status)
	}
}

// A sign-in link is the operator's when they open it: from a terminal or the address bar
// (Sec-Fetch-Site: none), or with a client that sends no Fetch Metadata. One another origin's
// page navigates the window to (a link, window.open, a form with target=_top), as often as it
// likes, is not compared with the token and spends none of the bound: it is answered with the
// sign-in form and sets no cookie, whatever token it carries.
func TestASignInLinkAnotherOriginOpensIsNotAGuess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveHandler(t, h))
	open := func(site, token string) response {
		req, _ := http.NewRequest(http.MethodGet, b.base+"/login?token="+token, nil)
		req.Header.Set("Sec-Fetch-Site", site)
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		req.Header.Set("Sec-Fetch-Dest", "document")
		return b.do(req)
	}
	for _, site := range []string{"cross-site", "same-site"} {
		for i := range 12 {
			if r := open(site, fmt.Sprintf("guess-%d", i)); r.Status != http.StatusForbidden || !strings.Contains(r.Body, `action="/login"`) {
				t.Fatalf("a %s page's sign-in link: %d, want 403 and the sign-in form", site, r.Status)
			}
		}
		if r := open(site, testToken); r.Status != http.StatusForbidden || len(r.Header.Values("Set-Cookie")) != 0 {
			t.Errorf("a %s page's sign-in link with the right token: %d %v, want 403 and no cookie", site, r.Status, r.Header.Values("Set-Cookie"))
		}
	}
	if r := open("none", "not-the-token"); r.Status != http.StatusUnauthorized {
		t.Errorf("the operator's link with a wrong token: %d, want 401 (a guess)", r.Status)
	}
	if r := open("none", testToken); r.Status != http.StatusSeeOther {
		t.Errorf("the operator's sign-in link, after another origin's: %d, want 303", r.Status)
	}
}
