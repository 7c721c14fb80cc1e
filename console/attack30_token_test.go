package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/console"
)

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
	if console.CheckAddr("0.0.0.0:8030", weak) == nil {
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

// docs/console.md: a token guards an address other machines can reach only if it is strong,
// "so a word, a number, a repeated or cycled pattern is refused at start". The estimate counts
// distinct neighbouring pairs, so any string of 24 or more characters that does not repeat
// itself passes: the alphabet, a keyboard row, the best-known passphrase there is, the
// project's own name and the year. Each is among an attacker's first guesses, and the bound on
// guesses (10 a minute) lets a list of thousands through in a day.
func TestCheckAddrRefusesWellKnownGuessableTokens(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{
		"abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789abcdefghijklmn",
		"qwertyuiopasdfghjklzxcvbnm", "1qaz2wsx3edc4rfv5tgb6yhn",
		"correcthorsebatterystaple", "the-quick-brown-fox-jumps", "ThisIsMyConsolePassword!",
		"oncehook-console-token-2026",
	} {
		if err := console.CheckAddr("0.0.0.0:8030", tok); err == nil {
			t.Errorf("CheckAddr(0.0.0.0:8030, %q) takes it as strong", tok)
		}
	}
}

// A proxy on the same machine (nginx's proxy_pass keeps Host as written) relays every client
// from a loopback peer: without a strong token, a request a proxy says it relayed is refused,
// whatever its peer and Host.
func TestAConsoleWithoutAStrongTokenRefusesWhatAProxyRelays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, token := range []string{"", "tok-3f9a"} {
		h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, hdr := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "X-Forwarded-Host", "Via"} {
			req := httptest.NewRequest(http.MethodGet, "/audit", nil)
			req.Host, req.RemoteAddr = "127.0.0.1:8030", "127.0.0.1:40000"
			req.Header.Set(hdr, "203.0.113.7")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
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
