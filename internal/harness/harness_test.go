package harness

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/faults"
	"github.com/oncehook/oncehook/webhook"
)

// A receiver that answers every event's first delivery 503 with Retry-After: the storm sends
// it again, and every delivery ends answered.
func TestStormRetries503s(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Webhook-Id")
		mu.Lock()
		seen[id]++
		n := seen[id]
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, `{"received":true,"duplicate":%t}`, n > 2)
	}))
	defer srv.Close()
	scheme, _ := webhook.New("standard-webhooks", webhook.Options{})
	s := &Sender{URL: srv.URL, Scheme: scheme, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Client: srv.Client()}
	rep := Storm(context.Background(), s, StormConfig{Run: "t", Events: []int{0, 1, 2, 3, 4}, Copies: 2, Concurrency: 4, Retries: 3, RetryDelay: 10 * time.Millisecond})
	if rep.Retried != 5 || rep.Sent != 15 || rep.Accepted != 5 || rep.Duplicates != 5 || len(rep.Statuses) != 0 || !AnswersAddUp(rep, 5, 10) {
		t.Fatalf("%+v", rep)
	}
	// Without retries the 503s are final, and the answers do not add up.
	mu.Lock()
	seen = map[string]int{}
	mu.Unlock()
	rep = Storm(context.Background(), s, StormConfig{Run: "u", Events: []int{0}, Copies: 1, Concurrency: 1})
	if rep.Statuses[http.StatusServiceUnavailable] != 1 || AnswersAddUp(rep, 1, 1) {
		t.Fatalf("%+v", rep)
	}
}

func TestDownstreamFaults(t *testing.T) {
	d, err := StartDownstream("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	srv := httptest.NewServer(http.HandlerFunc(d.serve))
	defer srv.Close()
	call := func(key string, timeout time.Duration) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	draws := []float64{0.05, 0.15, 0.25, 0.35, 0.9, 0.9}
	var mu sync.Mutex
	d.SetFaults(faults.Rates{Throttle: 0.1, Error: 0.1, Lose: 0.1, Timeout: 0.1}, func() float64 {
		mu.Lock()
		defer mu.Unlock()
		u := draws[0]
		draws = draws[1:]
		return u
	})
	if got := call("k:1", time.Second); got != http.StatusTooManyRequests {
		t.Fatalf("throttle: %d", got)
	}
	if got := call("k:1", time.Second); got != http.StatusInternalServerError || d.Applied("k:1") {
		t.Fatalf("error: %d, applied %v", got, d.Applied("k:1"))
	}
	if got := call("k:1", time.Second); got != http.StatusInternalServerError || !d.Applied("k:1") {
		t.Fatalf("lose: %d, applied %v", got, d.Applied("k:1"))
	}
	if got := call("k:2", 100*time.Millisecond); got != 0 || d.Applied("k:2") {
		t.Fatalf("timeout: %d, applied %v", got, d.Applied("k:2"))
	}
	if call("k:1", time.Second) != 200 || call("k:2", time.Second) != 200 {
		t.Fatal("no fault: want 200")
	}
	st := d.Stats("k:")
	if st.Keys != 2 || st.Applied != 2 || st.Calls != 6 || st.Repeats != 1 ||
		st.Injected[faults.Throttle] != 1 || st.Injected[faults.Error] != 1 || st.Injected[faults.Lose] != 1 || st.Injected[faults.Timeout] != 1 {
		t.Fatalf("%+v", st)
	}
}
