package outbox_test

import (
	"bufio"
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/outbox"
)

// TestNoFormOfWebhookURLOrAnswerPutsItsSecretInASpan is the invariant behind the webhook URL's
// redaction, over generated URLs rather than examples: whatever form the target's URL takes
// (scheme in any case, a password, the secret in the path, the query or the fragment, raw,
// percent-encoded or not ASCII, a URL that does not parse) and however the call fails (refused,
// an answer whose reason phrase, body or redirect Location quotes the secret, a malformed answer
// quoting it), no span's status, attribute or event holds the secret.
func TestNoFormOfWebhookURLOrAnswerPutsItsSecretInASpan(t *testing.T) {
	t.Parallel()
	const secret = "SECRET"
	srv := quotingServer(t, secret)
	rng := rand.New(rand.NewPCG(25, 3))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	for i := range 400 {
		scheme := pick("http", "HTTP", "Http")
		user := pick("", "hook@", "hook:pw-"+secret+"@", secret+"@", "u:%53ECRET"+secret+"@")
		host := pick("127.0.0.1:1", srv) // refused, or the quoting server
		path := pick("/services/T0"+secret+"/B0", "/"+secret, "/a b/"+secret, "/\u00e9"+secret, "/%2F"+secret, "", "/ok")
		query := pick("", "?token="+secret, "?"+secret)
		frag := pick("", "#"+secret)
		broken := pick("", "", "", "%zz", ":bad port") // a URL that does not parse, now and then
		raw := scheme + "://" + user + host + path + broken + query + frag
		rec, tp := recorder()
		x := &outbox.HTTPExecutor{URL: raw}
		ctx, span := tp.Tracer("test").Start(context.Background(), "call hook")
		err := x.Execute(ctx, outbox.Task{Source: "shop", EventID: "e", Intent: "i", IdempotencyKey: "shop:e:i", Payload: []byte(`{}`)})
		span.End()
		if err == nil && !strings.Contains(raw, secret) {
			continue // the server answers 2xx to a path without the secret
		}
		for _, l := range leaks(rec.Ended(), secret, "%53ECRET") {
			t.Errorf("case %d, %q: %s", i, raw, l)
		}
	}
}

// quotingServer answers every request with a status that quotes what it was asked, as some
// frameworks do: a 404 whose reason phrase and body name the path, a 301 to a Location holding
// it, or an answer net/http cannot read whose bad line names it; a request for /ok gets 200.
func quotingServer(t *testing.T, secret string) string {
	return rawServer(t, func(n int, req *http.Request) string {
		switch {
		case req.URL.Path == "/ok" && !strings.Contains(req.URL.RawQuery, secret):
			return "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
		case n%3 == 2: // not HTTP that net/http reads: its error quotes the line
			return "HTTP/1.1 404 Not Found\r\nCannot POST " + req.URL.String() + "\r\nContent-Length: 0\r\n\r\n"
		case n%3 == 0:
			body := "Cannot POST " + req.URL.String()
			return "HTTP/1.1 404 Cannot POST " + req.URL.String() + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		default:
			return "HTTP/1.1 301 Moved " + req.URL.Path + "\r\nLocation: http://elsewhere.example/" + secret + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
		}
	})
}

// rawServer is a downstream on a raw TCP listener (its address): it reads each connection's
// request and writes answer's bytes as they are, however malformed, then closes the
// connection. n counts the requests, from 0.
func rawServer(t *testing.T, answer func(n int, req *http.Request) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(n int) {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(answer(n, req)))
			}(n)
		}
	}()
	return ln.Addr().String()
}
