package outbox_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/outbox"
)

// TestAFailedHTTPCallNeverRecordsTheTargetsURLPathInASpan: a webhook URL's path is its secret
// (Slack's, Discord's incoming webhooks), which is why the client span names only the host and
// port. A call that fails (a 500, a refused connection) must not put that path in a span
// either, as the status description of the client span or of the span above it.
func TestAFailedHTTPCallNeverRecordsTheTargetsURLPathInASpan(t *testing.T) {
	t.Parallel()
	const secret = "T000SECRET/B000SECRET/XXXXsecrettokenXXXX"
	down := newHeard(t, http.StatusInternalServerError)
	for name, url := range map[string]string{
		"500":     down.URL + "/services/" + secret,
		"refused": "http://127.0.0.1:1/services/" + secret,
	} {
		rec, tp := recorder()
		x := &outbox.HTTPExecutor{URL: url, Timeout: 2 * time.Second}
		ctx, span := tp.Tracer("test").Start(context.Background(), "call email")
		err := x.Execute(ctx, outbox.Task{Source: "shop", EventID: "e", Intent: "i", IdempotencyKey: "shop:e:i", Payload: []byte(`{}`)})
		span.End()
		if err == nil {
			t.Fatalf("%s: the call succeeded", name)
		}
		for _, s := range rec.Ended() {
			if strings.Contains(s.Status().Description, "secret") {
				t.Errorf("%s: span %q's status holds the URL's path: %q", name, s.Name(), s.Status().Description)
			}
			for _, kv := range s.Attributes() {
				if strings.Contains(kv.Value.Emit(), "secret") {
					t.Errorf("%s: span %q's %s holds the URL's path: %q", name, s.Name(), kv.Key, kv.Value.Emit())
				}
			}
			for _, ev := range s.Events() {
				for _, kv := range ev.Attributes {
					if strings.Contains(kv.Value.Emit(), "secret") {
						t.Errorf("%s: span %q's event %s holds the URL's path", name, s.Name(), ev.Name)
					}
				}
			}
		}
	}
}
