package outbox_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/oncehook/oncehook/outbox"
)

// leaks is every place of the ended spans that holds one of secrets: a status description, an
// attribute, an event's attribute.
func leaks(spans []sdktrace.ReadOnlySpan, secrets ...string) []string {
	var found []string
	has := func(s string) bool {
		for _, x := range secrets {
			if strings.Contains(s, x) {
				return true
			}
		}
		return false
	}
	for _, s := range spans {
		if has(s.Status().Description) {
			found = append(found, s.Name()+" status: "+s.Status().Description)
		}
		for _, kv := range s.Attributes() {
			if has(kv.Value.Emit()) {
				found = append(found, s.Name()+" "+string(kv.Key)+": "+kv.Value.Emit())
			}
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				if has(kv.Value.Emit()) {
					found = append(found, s.Name()+" event "+ev.Name+" "+string(kv.Key)+": "+kv.Value.Emit())
				}
			}
		}
	}
	return found
}

// TestAFailedCallToAnyFormOfWebhookURLNeverRecordsItsPathOrPassword: a call that never reached
// an answer (a refused connection) is described in its span by the URL's scheme and host,
// whatever form the target's URL takes. net/http names the URL in its error as it re-writes
// it (the password as ***, the scheme lower-cased, a space escaped), so a description that
// only replaces net/http's form of the URL leaves the executor's own "POST <url>:" prefix,
// the URL as configured, in the span: its path, and its userinfo's password.
func TestAFailedCallToAnyFormOfWebhookURLNeverRecordsItsPathOrPassword(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]string{
		"userinfo":     "http://hook:pw-SECRETPASS@127.0.0.1:1/services/T000SECRET/B000SECRET",
		"upper scheme": "HTTP://127.0.0.1:1/services/T000SECRET/B000SECRET",
		"space":        "http://127.0.0.1:1/services/T000SECRET B000SECRET",
		"non-ascii":    "http://127.0.0.1:1/services/T000SECRET/\u00e9B000SECRET",
	} {
		rec, tp := recorder()
		x := &outbox.HTTPExecutor{URL: url}
		ctx, span := tp.Tracer("test").Start(context.Background(), "call hook")
		err := x.Execute(ctx, outbox.Task{Source: "shop", EventID: "e", Intent: "i", IdempotencyKey: "shop:e:i", Payload: []byte(`{}`)})
		span.End()
		if err == nil {
			t.Fatalf("%s: the call succeeded", name)
		}
		for _, l := range leaks(rec.Ended(), "SECRET") {
			t.Errorf("%s: a span holds the URL's path or password: %s", name, l)
		}
	}
}

// TestADownstreamsStatusLineNeverPutsTheURLsPathInASpan: a non-2xx answer is described in a
// span "by its status alone", since what the downstream says may quote the path it was called
// on ("Cannot POST /hooks/<token>"). The status line's reason phrase is the downstream's text
// as much as its body is: a server that answers "404 Cannot POST /services/<token>" must not
// put the token in the span.
func TestADownstreamsStatusLineNeverPutsTheURLsPathInASpan(t *testing.T) {
	t.Parallel()
	// As some frameworks answer: the reason phrase names the route that was not found.
	addr := rawServer(t, func(_ int, req *http.Request) string {
		return "HTTP/1.1 404 Cannot POST " + req.URL.Path + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
	})
	rec, tp := recorder()
	x := &outbox.HTTPExecutor{URL: "http://" + addr + "/services/T000SECRET/B000SECRET"}
	ctx, span := tp.Tracer("test").Start(context.Background(), "call hook")
	err := x.Execute(ctx, outbox.Task{Source: "shop", EventID: "e", Intent: "i", IdempotencyKey: "shop:e:i", Payload: []byte(`{}`)})
	span.End()
	if err == nil {
		t.Fatal("the call succeeded")
	}
	for _, l := range leaks(rec.Ended(), "SECRET") {
		t.Errorf("a span holds the URL's path, as the downstream's status line quoted it: %s", l)
	}
}
