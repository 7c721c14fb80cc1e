// Package harness drives a deployed receiver the way providers do, for `hookctl storm` and the
// end-to-end tests: signed deliveries of generated order.paid events, each sent several times
// by concurrent workers (concurrent doubles), with latency and outcome counts; and a local
// downstream that, like a real email or payment API, applies each Idempotency-Key once.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncehook/oncehook/webhook"
)

// Sender signs and POSTs deliveries for one source.
type Sender struct {
	URL    string
	Scheme webhook.Scheme
	Secret string
	Client *http.Client
}

// Send delivers body under message id (signed, or with a broken signature when forge) and
// returns the HTTP status and the response body.
func (s *Sender) Send(ctx context.Context, id string, body []byte, forge bool) (status int, resp []byte, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := s.Scheme.Sign(req.Header, body, s.Secret, id, time.Now()); err != nil {
		return 0, nil, err
	}
	if forge {
		for k, v := range req.Header { // keep the shape, break the signature
			if strings.Contains(strings.ToLower(k), "signature") || strings.Contains(strings.ToLower(k), "hmac") {
				req.Header.Set(k, strings.Replace(v[0], v[0][len(v[0])-4:], "AAA=", 1))
			}
		}
	}
	r, err := s.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	return r.StatusCode, b, nil
}

// IsDuplicate reports whether a receiver's 200 body says duplicate.
func IsDuplicate(resp []byte) bool { return bytes.Contains(resp, []byte(`"duplicate":true`)) }

// Order returns the id and body of event i of a run: an order.paid for order ord_<run>_<i>.
func Order(run string, i int) (id string, body []byte) {
	id = fmt.Sprintf("msg_%s_%06d", run, i)
	return id, fmt.Appendf(nil, `{"type":"order.paid","data":{"order_id":"ord_%s_%06d","customer_email":"c%d@example.com"}}`, run, i, i)
}

// StormConfig is one storm: Events distinct events, each sent Copies times, by Concurrency
// workers. Copies of one event are queued back to back, so different workers send them at
// nearly the same time.
type StormConfig struct {
	Run         string // prefix of the generated ids; unique per storm
	Events      []int  // which events of the run to send (Order(Run, i))
	Copies      int
	Concurrency int
	// Progress, when set, is called after each delivery with the number done.
	Progress func(done int)
}

// StormReport is what a storm saw.
type StormReport struct {
	Sent, Accepted, Duplicates int
	Statuses                   map[int]int // every non-200 status, counted
	Errors                     int         // transport errors
	Elapsed                    time.Duration
	latencies                  []time.Duration
}

// Latency returns the q-quantile (0..1) of the deliveries' latencies.
func (r *StormReport) Latency(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(int(q*float64(len(r.latencies))), len(r.latencies)-1)]
}

// PerSecond is deliveries per second over the storm.
func (r *StormReport) PerSecond() float64 { return float64(r.Sent) / r.Elapsed.Seconds() }

// Storm sends the configured deliveries and counts what came back.
func Storm(ctx context.Context, s *Sender, cfg StormConfig) *StormReport {
	rep := &StormReport{Statuses: map[int]int{}}
	type result struct {
		status int
		dup    bool
		err    error
		took   time.Duration
	}
	work := make(chan int)
	results := make(chan result, 1024)
	var wg sync.WaitGroup
	for range max(cfg.Concurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				id, body := Order(cfg.Run, i)
				start := time.Now()
				status, resp, err := s.Send(ctx, id, body, false)
				results <- result{status, IsDuplicate(resp), err, time.Since(start)}
			}
		}()
	}
	start := time.Now()
	go func() {
		for _, i := range cfg.Events {
			for range max(cfg.Copies, 1) {
				work <- i
			}
		}
		close(work)
		wg.Wait()
		close(results)
	}()
	var done atomic.Int64
	for r := range results {
		rep.Sent++
		rep.latencies = append(rep.latencies, r.took)
		switch {
		case r.err != nil:
			rep.Errors++
		case r.status != http.StatusOK:
			rep.Statuses[r.status]++
		case r.dup:
			rep.Duplicates++
		default:
			rep.Accepted++
		}
		if cfg.Progress != nil {
			cfg.Progress(int(done.Add(1)))
		}
	}
	rep.Elapsed = time.Since(start)
	sort.Slice(rep.latencies, func(i, j int) bool { return rep.latencies[i] < rep.latencies[j] })
	return rep
}

// Downstream is a local stand-in for a downstream API with its own idempotency.
type Downstream struct {
	mu      sync.Mutex
	calls   map[string]int
	applied map[string]bool
	srv     *http.Server
}

// StartDownstream listens on addr (127.0.0.1:8025 for the local stack's "email" target).
func StartDownstream(addr string) (*Downstream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	d := &Downstream{calls: map[string]int{}, applied: map[string]bool{}}
	d.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		_, _ = io.Copy(io.Discard, r.Body)
		d.mu.Lock()
		d.calls[key]++
		d.applied[key] = true
		d.mu.Unlock()
		_, _ = w.Write([]byte(`{"ok":true}`))
	})}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

// Close stops the server.
func (d *Downstream) Close() error { return d.srv.Close() }

// Seen counts the distinct keys starting with prefix and the calls that carried them.
func (d *Downstream) Seen(prefix string) (keys, calls int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, n := range d.calls {
		if strings.HasPrefix(k, prefix) {
			keys++
			calls += n
		}
	}
	return keys, calls
}
