package receiver_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/receiver"
)

// The receiver as an http.Handler: the same statuses and the same single write as through
// API Gateway, over a real HTTP server.
func TestTheReceiverServesPlainHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := httptest.NewServer(e.handler)
	defer srv.Close()
	post := func(path, body string, hdr http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	body := orderBody("msg_http_1", "ord_http_1")
	signed := e.request("shop", body, nil, "msg_http_1")
	hdr := http.Header{}
	for k, v := range signed.Headers {
		hdr.Set(k, v)
	}
	e.counter.Reset()
	if code, got := post("/hooks/shop", body, hdr); code != 200 || got != `{"received":true,"duplicate":false}` {
		t.Fatalf("first delivery: %d %s", code, got)
	}
	if e.counter.Total() != 1 {
		t.Fatalf("%d DynamoDB calls for one delivery, want 1", e.counter.Total())
	}
	if code, got := post("/hooks/shop", body, hdr); code != 200 || got != `{"received":true,"duplicate":true}` {
		t.Fatalf("the same delivery again: %d %s", code, got)
	}
	if n := e.countPrefix(dedup.ClaimKey("shop", "msg_http_1")); n != 1 {
		t.Fatalf("%d claims", n)
	}
	hdr.Set("Webhook-Signature", "v1,AAAA")
	if code, _ := post("/hooks/shop", body, hdr); code != http.StatusUnauthorized {
		t.Fatalf("a forged signature: %d", code)
	}
	if code, _ := post("/hooks/nobody", body, hdr); code != http.StatusNotFound {
		t.Fatalf("an unknown source: %d", code)
	}
	resp, err := srv.Client().Get(srv.URL + "/hooks/shop")
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("a GET: %v %v", resp, err)
	}
	// The largest body any source accepts is 1 MiB (the default); shop's own limit is 64 KiB.
	if code, _ := post("/hooks/shop", string(bytes.Repeat([]byte("x"), 70_000)), hdr); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the source's limit: %d", code)
	}
	if code, _ := post("/hooks/shop", string(bytes.Repeat([]byte("x"), 2<<20)), hdr); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over every source's limit: %d", code)
	}
}

// brokenBody is a request body whose read fails part way (a client that hung up).
type brokenBody struct{ sent bool }

func (b *brokenBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, `{"type":"order.paid"`), nil
	}
	return 0, errors.New("connection reset by peer")
}

func (b *brokenBody) Close() error { return nil }

// TestEveryRequestServeHTTPAnswersIsTracedAndLogged: with tracing on, docs/operations.md says
// "a delivery is a server span, POST /hooks/{source} ... a root of its own trace", and each
// delivery has its log line ("the receiver's delivery line ... lead[s] to the trace").
// ServeHTTP (a receiver served over net/http, launch.NewHTTPReceiver) is documented as "the
// same code path as Handle: the same statuses". The same request answered through Handle is a
// delivery span and a delivery line; answered by ServeHTTP's own refusals, before it calls the
// shared path (a body over the largest max_body_bytes: 413; a body that could not be read:
// 400), it is neither: no span, no log line, nothing for an operator to find the refusal by.
//
// The space: ServeHTTP's two early answers; each is compared with Handle's answer to the same
// request where Handle can be given it.
func TestEveryRequestServeHTTPAnswersIsTracedAndLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := tracetest.NewSpanRecorder()
	var logs bytes.Buffer
	planners := receiver.NewPlanners()
	for _, name := range e.file.Names() {
		orders.Register(planners, name)
	}
	h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: e.store, Planners: planners,
		Now: e.clock, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	if err != nil {
		t.Fatal(err)
	}

	huge := string(bytes.Repeat([]byte("x"), 2<<20)) // over every source's max_body_bytes (1 MiB at most)

	// Through Handle: a span and a line.
	if r := e.handlerAnswer(h, "shop", huge); r != http.StatusRequestEntityTooLarge {
		t.Fatalf("Handle answered %d", r)
	}
	if n := len(rec.Ended()); n == 0 || !strings.Contains(logs.String(), `"msg":"delivery"`) {
		t.Fatalf("Handle: %d spans, log %q: want the delivery's span and line", n, logs.String())
	}

	for _, c := range []struct {
		name string
		body func() *http.Request
		want int
	}{
		{"a body over the largest max_body_bytes", func() *http.Request {
			return httptest.NewRequest(http.MethodPost, "/hooks/shop", strings.NewReader(huge))
		}, http.StatusRequestEntityTooLarge},
		{"a body that could not be read", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/hooks/shop", nil)
			r.Body = &brokenBody{}
			return r
		}, http.StatusBadRequest},
	} {
		rec.Reset()
		logs.Reset()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, c.body())
		if w.Code != c.want {
			t.Fatalf("%s: ServeHTTP answered %d, want %d", c.name, w.Code, c.want)
		}
		spans := rec.Ended()
		traced := false
		for _, s := range spans {
			if !s.Parent().IsValid() && strings.HasSuffix(s.Name(), "/hooks/{source}") {
				traced = true
			}
		}
		logged := strings.Contains(logs.String(), `"msg":"delivery"`)
		if !traced || !logged {
			t.Errorf("%s: ServeHTTP answered %d with no delivery span (%d spans) and no delivery log line (logged: %v); every answer through Handle is a span and a line",
				c.name, w.Code, len(spans), logged)
		}
	}
}

// handlerAnswer is h's Handle answer to an unsigned POST of body to source.
func (e *env) handlerAnswer(h *receiver.Handler, source, body string) int {
	e.t.Helper()
	r := e.request(source, "{}", nil, "msg_a7_huge")
	r.Body = body
	resp, err := h.Handle(e.t.Context(), r)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode
}
