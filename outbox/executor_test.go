package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

func task() outbox.Task {
	return outbox.Task{Source: "shop", EventID: "evt_1", Intent: "email.send", Target: "email",
		Payload: []byte(`{"to":"ada@example.com"}`), IdempotencyKey: "shop:evt_1:email.send", Attempt: 1}
}

// A redirect must never be followed: Go's client turns a 301/302/303 POST into a GET without a
// body, and a 2xx to that GET would record an effect that never happened. 307/308 keep the
// method, but to a URL nobody configured. Every 3xx is permanent, with its Location.
func TestRedirectsAreNeverFollowedAndArePermanent(t *testing.T) {
	t.Parallel()
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			var followed atomic.Int32
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				followed.Add(1)
				w.WriteHeader(http.StatusOK) // a login page, an HTTPS upgrade: 200 to whatever arrives
			}))
			defer target.Close()
			redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+"/login", status)
			}))
			defer redirecting.Close()

			for _, client := range []*http.Client{nil, {}, {CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}} {
				x := &outbox.HTTPExecutor{URL: redirecting.URL, Client: client, Timeout: 2 * time.Second}
				err := x.Execute(context.Background(), task())
				if err == nil || !outbox.IsPermanent(err) {
					t.Fatalf("client %+v: %v, want a permanent error", client, err)
				}
				if !strings.Contains(err.Error(), target.URL+"/login") {
					t.Fatalf("error %q does not name the Location", err)
				}
			}
			if n := followed.Load(); n != 0 {
				t.Fatalf("the redirect was followed %d times", n)
			}
		})
	}
}

func TestStatusesAreClassifiedAsDocumented(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status    int
		retryable bool
	}{
		{200, false}, {201, false}, {204, false},
		{408, true}, {409, true}, {425, true}, {429, true},
		{500, true}, {502, true}, {503, true}, {504, true},
		{400, false}, {401, false}, {403, false}, {404, false}, {410, false}, {413, false}, {422, false},
		{300, false}, {304, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
		}))
		err := (&outbox.HTTPExecutor{URL: srv.URL}).Execute(context.Background(), task())
		srv.Close()
		switch {
		case c.status < 300:
			if err != nil {
				t.Errorf("%d: %v, want done", c.status, err)
			}
		case c.retryable:
			if err == nil || outbox.IsPermanent(err) {
				t.Errorf("%d: %v, want a retryable error", c.status, err)
			}
		default:
			if err == nil || !outbox.IsPermanent(err) {
				t.Errorf("%d: %v, want a permanent error", c.status, err)
			}
		}
		var se *outbox.StatusError
		if c.status >= 300 && (!errors.As(err, &se) || se.StatusCode != c.status) {
			t.Errorf("%d: %v, want a *StatusError with the status", c.status, err)
		}
	}
}

// A configured header can never replace the idempotency key or the body's framing.
func TestStaticHeadersCannotOverrideTheIdempotencyKey(t *testing.T) {
	t.Parallel()
	var got http.Header
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		body = string(b)
	}))
	defer srv.Close()
	x := &outbox.HTTPExecutor{URL: srv.URL, Headers: map[string]string{
		"idempotency-key": "constant", "Content-Type": "text/plain", "X-Api-Version": "2",
	}}
	if err := x.Execute(context.Background(), task()); err != nil {
		t.Fatal(err)
	}
	if got.Get("Idempotency-Key") != "shop:evt_1:email.send" || len(got.Values("Idempotency-Key")) != 1 {
		t.Fatalf("Idempotency-Key %q, want the intent's own key once", got.Values("Idempotency-Key"))
	}
	if got.Get("Content-Type") != "application/json" || got.Get("X-Api-Version") != "2" || body != `{"to":"ada@example.com"}` {
		t.Fatalf("headers %v body %q", got, body)
	}
}

func TestTheExecutorReportsItsLongestCall(t *testing.T) {
	t.Parallel()
	if d := (&outbox.HTTPExecutor{URL: "http://127.0.0.1:1"}).MaxDuration(); d != 10*time.Second {
		t.Fatalf("default MaxDuration %s, want 10s", d)
	}
	if d := (&outbox.HTTPExecutor{URL: "http://127.0.0.1:1", Timeout: 3 * time.Second}).MaxDuration(); d != 3*time.Second {
		t.Fatalf("MaxDuration %s, want 3s", d)
	}
}

// TestTheWorkerAndSweeperWriteExactlyTheirMetricCatalog holds EMFMetrics to
// outbox.EmittedMetrics both ways: the stack's dashboard and alarms are built from that list.
func TestTheWorkerAndSweeperWriteExactlyTheirMetricCatalog(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	m := outbox.NewEMFMetrics(&b, "")
	for _, o := range []string{outbox.OutcomeDone, outbox.OutcomeRetry, outbox.OutcomeParked, outbox.OutcomeLeaseLost, outbox.OutcomeBusy, outbox.OutcomeDeferred, outbox.OutcomeHeld, outbox.OutcomePaused, "unscheduled"} {
		m.Intent("email", o, time.Millisecond)
	}
	m.Sweep(outbox.SweepReport{Summary: outbox.Summary{}})
	m.Sweep(outbox.SweepReport{Summary: outbox.Summary{}, Audit: &dedup.AuditReport{}})
	m.Sweep(outbox.SweepReport{Skipped: true})
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var doc struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name string }
				}
			} `json:"_aws"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		for _, d := range doc.AWS.CloudWatchMetrics {
			if d.Namespace != outbox.Namespace {
				t.Fatalf("namespace %q", d.Namespace)
			}
			for _, mt := range d.Metrics {
				for _, dims := range d.Dimensions {
					got[mt.Name+"/"+strings.Join(dims, ",")] = true
				}
			}
		}
	}
	want := map[string]bool{}
	for _, mt := range outbox.EmittedMetrics() {
		want[mt.Name+"/"+strings.Join(mt.Dimensions, ",")] = true
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("written %v\ncatalog %v", got, want)
	}
}
