package console_test

// Findings of a security review of the console (attack26): each test names what must never
// happen, and fails while it does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/console"
	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
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
	target := echo.URL + "/hooks/SECRET-URL-PATH?token=SECRET-URL-QUERY"
	// The sources file names the URL the executor calls, as a deployment's does: a console
	// that knows it has all it needs to hide it.
	f, err := sources.Parse([]byte(strings.ReplaceAll(testSources, "http://127.0.0.1:1/SECRET-URL-PATH", target)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	exec := &outbox.HTTPExecutor{URL: target, Timeout: 5 * time.Second}
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

// secretTarget is a target URL whose every secret part (userinfo, path segments, query
// values) and header value holds the marker qz7: no page may show any of them, in any
// encoding a downstream's error might quote them in.
const secretTarget = "https://ops:pw-Qz7Pass9@hooks.example.test/services/T0Qz7SECRa/B0Qz7SECRb/Qz7tokenValue9x?token=Qz7Query1&sig=Qz7Sig%2Fa%3D%3D"

// decodings are the ways a reader could undo an encoding of the page's text: as served,
// HTML-unescaped, then percent-decoded (leniently, every valid %XX) and JSON-unescaped.
func decodings(s string) []string {
	h := html.UnescapeString(s)
	pct := regexp.MustCompile(`%[0-9a-fA-F]{2}`).ReplaceAllStringFunc(h, func(m string) string {
		b, _ := strconv.ParseUint(m[1:], 16, 8)
		return string(rune(b))
	})
	js := strings.NewReplacer(`\/`, "/", `\u0026`, "&", `\u003c`, "<", `\u003e`, ">", `\u003d`, "=").Replace(pct)
	return []string{s, h, pct, js, strings.ReplaceAll(pct, "+", " ")}
}

// The space around a downstream's error quoting a target's secrets: each secret part of the
// target's URL and headers, in every encoding (as configured, decoded, path- and
// query-escaped, every byte escaped, JSON, HTML, lower-case hex), inside the shapes errors
// take (Express's "Cannot POST", a JSON body, an HTML page, a bare token), and cut by the
// worker's 512-byte truncation at every length, is shown on no page.
func TestNoEncodingOfATargetsSecretShowsInAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f, err := sources.Parse([]byte(strings.Replace(strings.Replace(testSources, "http://127.0.0.1:1/SECRET-URL-PATH", secretTarget, 1),
		`"X-Api-Key": "SECRET-HEADER-VALUE"`, `"X-Api-Key": "Qz7HeaderKey42"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	u, _ := url.Parse(secretTarget)
	pw, _ := u.User.Password()
	var pieces []string
	pieces = append(pieces, u.EscapedPath(), u.Path, u.RawQuery, u.EscapedPath()+"?"+u.RawQuery, u.Path+"?"+u.RawQuery, pw, "Qz7HeaderKey42")
	for _, seg := range strings.Split(u.Path, "/") {
		if strings.Contains(seg, "Qz7") {
			pieces = append(pieces, seg)
		}
	}
	for k, vs := range u.Query() {
		pieces = append(pieces, vs[0], k+"="+vs[0], k+"="+url.QueryEscape(vs[0]))
	}
	escapeAll := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, "%%%02X", s[i])
		}
		return b.String()
	}
	jsonOf := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	encoders := map[string]func(string) string{
		"as is": func(s string) string { return s }, "path-escaped": url.PathEscape, "query-escaped": url.QueryEscape,
		"every byte escaped": escapeAll, "lower-case hex": func(s string) string { return strings.ToLower(escapeAll(s)) },
		"json": jsonOf, "json, slashes escaped": func(s string) string { return strings.ReplaceAll(jsonOf(s), "/", `\/`) },
		"html": html.EscapeString, "upper-case": strings.ToUpper,
	}
	shapes := []func(string) string{
		func(p string) string { return "Cannot POST " + p },
		func(p string) string { return `404: {"error":"no route","path":"` + p + `"}` },
		func(p string) string { return "<html><body><h1>Not Found</h1><p>" + p + "</p></body></html>" },
		func(p string) string { return "invalid token " + p + ", check your configuration" },
		func(p string) string { return p },
	}
	var msgs []string
	for _, p := range pieces {
		for _, enc := range slices.Sorted(maps.Keys(encoders)) {
			for _, shape := range shapes {
				msgs = append(msgs, shape(encoders[enc](p)))
			}
		}
		// Cut by the worker's truncation (the stored error, "permanent: " and the message, is
		// cut at 512 bytes, then "…") keeping every length of the piece from 4 bytes (fewer
		// tell nothing of a secret, and are shown).
		for keep := 4; keep < len(p); keep++ {
			msgs = append(msgs, strings.Repeat("x", 512-len("permanent: ")-keep)+p)
		}
	}
	byKey := map[string]string{}
	exec := outbox.ExecutorFunc(func(_ context.Context, task outbox.Task) error {
		if m, ok := byKey[task.IdempotencyKey]; ok {
			return outbox.Permanent(errors.New(m))
		}
		return nil
	})
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		id := fmt.Sprintf("evt_enc_%04d", i)
		byKey[key("shop", id, "email.send")] = m
		e.commit("shop", id, false)
	}
	e.drain()
	b := e.serve(func(c *console.Config) { c.MaxIndexReads = len(msgs) + 10 })
	check := func(where string, r response) {
		t.Helper()
		for _, d := range decodings(r.Body) {
			if i := strings.Index(strings.ToLower(d), "qz7"); i >= 0 {
				t.Fatalf("%s shows a secret of the target: …%s…", where, d[max(0, i-80):min(len(d), i+40)])
			}
		}
	}
	for i := range msgs {
		r := b.get(fmt.Sprintf("/events/shop/evt_enc_%04d", i))
		if r.Status != http.StatusOK || !strings.Contains(r.Body, `class="last-error"`) {
			t.Fatalf("evt_enc_%04d: %d, no last error shown", i, r.Status)
		}
		check(fmt.Sprintf("the event page of %q", msgs[i]), r)
	}
	check("the parked page", b.get("/parked"))
}
