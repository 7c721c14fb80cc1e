package outbox_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/oncehook/oncehook/outbox"
)

// TestAMalformedAnswerNeverPutsTheDownstreamsWordsInASpan: a span never holds a downstream's
// answer, and the webhook URL's path is its secret. An answer net/http cannot read (a header
// line it refuses, a Content-Length or Transfer-Encoding it does not take) fails the call with
// an error that quotes the offending bytes of the answer; the span's status must describe the
// failure without them, as it describes a non-2xx answer by its code alone. Every kind of
// malformed answer below quotes the path the downstream was called on, as a framework's error
// answer does ("Cannot POST /services/<token>").
func TestAMalformedAnswerNeverPutsTheDownstreamsWordsInASpan(t *testing.T) {
	t.Parallel()
	const secret = "SECRET"
	answers := map[string]func(path string) string{
		"header line without a colon": func(p string) string {
			return "HTTP/1.1 404 Not Found\r\nCannot POST " + p + "\r\nContent-Length: 0\r\n\r\n"
		},
		"header name with a space": func(p string) string {
			return "HTTP/1.1 404 Not Found\r\nRequested Path: " + p + "\r\nContent-Length: 0\r\n\r\n"
		},
		"continuation line first": func(p string) string {
			return "HTTP/1.1 404 Not Found\r\n Cannot POST " + p + "\r\nContent-Length: 0\r\n\r\n"
		},
		"bad Content-Length": func(p string) string {
			return "HTTP/1.1 404 Not Found\r\nContent-Length: " + p + "\r\n\r\n"
		},
		"unknown Transfer-Encoding": func(p string) string {
			return "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: " + p + "\r\n\r\n"
		},
		"not a status line": func(p string) string {
			return "Cannot-POST-" + p + "\r\n\r\n"
		},
		"bad version": func(p string) string {
			return "HTTP/x" + p + " 404 Not Found\r\nContent-Length: 0\r\n\r\n"
		},
	}
	for name, answer := range answers {
		addr := rawServer(t, func(_ int, req *http.Request) string { return answer(req.URL.Path) })
		rec, tp := recorder()
		x := &outbox.HTTPExecutor{URL: "http://" + addr + "/services/T0" + secret + "/B0" + secret}
		ctx, span := tp.Tracer("test").Start(context.Background(), "call hook")
		err := x.Execute(ctx, outbox.Task{Source: "shop", EventID: "e", Intent: "i", IdempotencyKey: "shop:e:i", Payload: []byte(`{}`)})
		span.End()
		if err == nil {
			t.Errorf("%s: the call succeeded", name)
			continue
		}
		for _, l := range leaks(rec.Ended(), secret) {
			t.Errorf("%s: a span holds the downstream's answer, quoting the URL's path: %s", name, l)
		}
	}
}
