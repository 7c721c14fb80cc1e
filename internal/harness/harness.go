// Package harness drives a deployed receiver the way providers do, for `hookctl storm` and the
// end-to-end tests: signed deliveries of generated order.paid events, each sent several times
// by concurrent workers (concurrent doubles), with latency and outcome counts; and a local
// downstream that, like a real email or payment API, applies each Idempotency-Key once.
package harness

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

// Sender signs and POSTs deliveries for one source. With File and Source set it sends each
// delivery as that source's provider would (receivertest.HTTPRequest: the provider's headers,
// the id and type where the sources file locates them); otherwise it signs with Scheme alone
// (the id is the scheme's message id: Standard Webhooks).
type Sender struct {
	URL    string
	Scheme webhook.Scheme
	Secret string
	Client *http.Client
	// File and Source, when set, shape deliveries as the source's provider; Type is the event
	// type for a source that reads it from a header (GitHub's X-GitHub-Event).
	File   *sources.File
	Source string
	Type   string
}

// Send delivers body under message id (signed, or with a broken signature when forge) and
// returns the HTTP status and the response body.
func (s *Sender) Send(ctx context.Context, id string, body []byte, forge bool) (status int, resp []byte, err error) {
	status, resp, _, err = s.send(ctx, id, body, forge)
	return status, resp, err
}

// send is Send that also returns the Retry-After the receiver asked for (0 when none).
func (s *Sender) send(ctx context.Context, id string, body []byte, forge bool) (status int, resp []byte, retryAfter time.Duration, err error) {
	var req *http.Request
	if s.File != nil {
		opts := []receivertest.Option{receivertest.WithEventID(id)}
		if s.Type != "" {
			opts = append(opts, receivertest.WithEventType(s.Type))
		}
		if req, err = receivertest.HTTPRequest(s.File, s.Source, s.Secret, s.URL, body, opts...); err != nil {
			return 0, nil, 0, err
		}
		req = req.WithContext(ctx)
	} else {
		if req, err = http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body)); err != nil {
			return 0, nil, 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		if err := s.Scheme.Sign(req.Header, body, s.Secret, id, time.Now()); err != nil {
			return 0, nil, 0, err
		}
	}
	if forge {
		for k, v := range req.Header { // keep the shape, break the signature
			if len(v) > 0 && (strings.Contains(strings.ToLower(k), "signature") || strings.Contains(strings.ToLower(k), "hmac")) {
				req.Header.Set(k, forged(v[0]))
			}
		}
	}
	r, err := s.Client.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err == nil && n > 0 {
		retryAfter = time.Duration(n) * time.Second
	}
	return r.StatusCode, b, retryAfter, nil
}

// forged is a signature header's value with its end broken: its last four characters (all of
// it when shorter) become "AAA=", or "BBB=" when they already are.
func forged(v string) string {
	keep, end := v[:max(0, len(v)-4)], "AAA="
	if keep+end == v {
		end = "BBB="
	}
	return keep + end
}

// IsDuplicate reports whether a receiver's 200 body says duplicate.
func IsDuplicate(resp []byte) bool { return bytes.Contains(resp, []byte(`"duplicate":true`)) }

// Order returns the id and body of event i of a run: an order.paid for order OrderID(run, i).
func Order(run string, i int) (id string, body []byte) {
	return EventID(run, i), fmt.Appendf(nil, `{"type":"order.paid","data":{"order_id":"%s","customer_email":"c%d@example.com"}}`, OrderID(run, i), i)
}

// OrderID is the order of event i of a run: ord_<run>_<i>.
func OrderID(run string, i int) string { return fmt.Sprintf("ord_%s_%06d", run, i) }

// EventID is the id of event i of a run: msg_<run>_<i>.
func EventID(run string, i int) string { return fmt.Sprintf("msg_%s_%06d", run, i) }

// StormConfig is one storm: Events distinct events, each sent Copies times, by Concurrency
// workers. Copies of one event are queued back to back, so different workers send them at
// nearly the same time.
type StormConfig struct {
	Run    string // prefix of the generated ids; unique per storm
	Events []int  // which events of the run to send
	// Event gives event i's id and body; Order when nil.
	Event       func(run string, i int) (id string, body []byte)
	Copies      int
	Concurrency int
	// Progress, when set, is called after each delivery with the number done.
	Progress func(done int)
	// Retries is how many times a delivery answered 503 is sent again, as a provider retries
	// a delivery the receiver could not take (0: never). Each retry waits the answer's
	// Retry-After, at most RetryDelay (default 1 s), less up to half at random.
	Retries    int
	RetryDelay time.Duration
}

// StormReport is what a storm saw. Accepted, Duplicates, Statuses and Errors count each
// delivery's final answer; Sent counts every request, retries included.
type StormReport struct {
	Sent, Accepted, Duplicates int
	Retried                    int         // 503 answers sent again later
	Statuses                   map[int]int // every final non-200 status, counted
	Errors                     int         // transport errors
	Elapsed                    time.Duration
	latencies                  []time.Duration
	// Events is what each event's deliveries were answered, by event number.
	Events map[int]*EventAnswers
}

// EventAnswers is what one event's deliveries got.
type EventAnswers struct {
	Accepted, Duplicates, Unavailable int
	// first503Sent is when the first delivery answered 503 was sent; firstDuplicate is when
	// the first "duplicate" answer arrived. A duplicate with no accept is explained only by a
	// 503 whose write had landed, and that delivery must have been sent before it.
	first503Sent, firstDuplicate time.Time
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

// AnswerProblems checks a storm's answers for events distinct events in total deliveries, and
// says what is wrong: every delivery must be finally answered 200, and, event by event, at most
// one accepted and the rest duplicates. An event may have no accepted answer only when one of
// its deliveries was answered 503 after its write had landed (a lost response the SDK's retries
// could not recover): that delivery must have been sent before the event's first duplicate
// answer came.
func AnswerProblems(rep *StormReport, events, total int) []string {
	var p []string
	if rep.Errors > 0 || len(rep.Statuses) > 0 {
		p = append(p, fmt.Sprintf("%d transport errors, final statuses %v", rep.Errors, rep.Statuses))
	}
	if rep.Accepted+rep.Duplicates != total {
		p = append(p, fmt.Sprintf("%d accepted + %d duplicates, want %d deliveries", rep.Accepted, rep.Duplicates, total))
	}
	if len(rep.Events) != events {
		p = append(p, fmt.Sprintf("answers for %d events, want %d", len(rep.Events), events))
	}
	for _, i := range slices.Sorted(maps.Keys(rep.Events)) {
		a := rep.Events[i]
		switch {
		case a.Accepted > 1:
			p = append(p, fmt.Sprintf("event %d accepted %d times", i, a.Accepted))
		case a.Accepted == 0 && a.Duplicates == 0:
			p = append(p, fmt.Sprintf("event %d: never accepted, and none of its deliveries was answered 200 (%d answered 503)", i, a.Unavailable))
		case a.Accepted == 0 && a.Unavailable == 0:
			p = append(p, fmt.Sprintf("event %d: %d duplicates and never accepted, with no 503 to explain it", i, a.Duplicates))
		case a.Accepted == 0 && !a.first503Sent.Before(a.firstDuplicate):
			p = append(p, fmt.Sprintf("event %d: never accepted, and its first duplicate came before any delivery answered 503 was sent", i))
		}
		if len(p) > 20 {
			return append(p, "...")
		}
	}
	return p
}

// Storm sends the configured deliveries and counts what came back. A 503 is sent again
// later (cfg.Retries), by whichever worker is free then.
func Storm(ctx context.Context, s *Sender, cfg StormConfig) *StormReport {
	rep := &StormReport{Statuses: map[int]int{}, Events: map[int]*EventAnswers{}}
	type delivery struct{ event, attempt int }
	type result struct {
		d          delivery
		status     int
		dup        bool
		err        error
		sent       time.Time
		took       time.Duration
		retryAfter time.Duration
	}
	event := cfg.Event
	if event == nil {
		event = Order
	}
	retryDelay := cmp.Or(max(cfg.RetryDelay, 0), time.Second)
	work := make(chan delivery)
	results := make(chan result, 1024)
	var workers sync.WaitGroup
	for range max(cfg.Concurrency, 1) {
		workers.Go(func() {
			for d := range work {
				id, body := event(cfg.Run, d.event)
				start := time.Now()
				status, resp, retryAfter, err := s.send(ctx, id, body, false)
				results <- result{d, status, IsDuplicate(resp), err, start, time.Since(start), retryAfter}
			}
		})
	}
	// open counts deliveries not yet finally answered; work closes when none is left (every
	// first send has been queued, and no retry is waiting).
	var open sync.WaitGroup
	open.Add(len(cfg.Events) * max(cfg.Copies, 1))
	start := time.Now()
	go func() {
		for _, i := range cfg.Events {
			for range max(cfg.Copies, 1) {
				work <- delivery{event: i}
			}
		}
		open.Wait()
		close(work)
		workers.Wait()
		close(results)
	}()
	done := 0
	for r := range results {
		rep.Sent++
		rep.latencies = append(rep.latencies, r.took)
		ev := rep.Events[r.d.event]
		if ev == nil {
			ev = &EventAnswers{}
			rep.Events[r.d.event] = ev
		}
		if r.err == nil && r.status == http.StatusServiceUnavailable {
			ev.Unavailable++
			if ev.first503Sent.IsZero() || r.sent.Before(ev.first503Sent) {
				ev.first503Sent = r.sent
			}
			if r.d.attempt < cfg.Retries && ctx.Err() == nil {
				rep.Retried++
				wait := min(max(r.retryAfter, 100*time.Millisecond), retryDelay)
				wait -= rand.N(wait/2 + 1)
				next := delivery{event: r.d.event, attempt: r.d.attempt + 1}
				time.AfterFunc(wait, func() { work <- next })
				continue
			}
		}
		switch {
		case r.err != nil:
			rep.Errors++
		case r.status != http.StatusOK:
			rep.Statuses[r.status]++
		case r.dup:
			rep.Duplicates++
			ev.Duplicates++
			if ev.firstDuplicate.IsZero() {
				ev.firstDuplicate = time.Now()
			}
		default:
			rep.Accepted++
			ev.Accepted++
		}
		done++
		open.Done()
		if cfg.Progress != nil {
			cfg.Progress(done)
		}
	}
	rep.Elapsed = time.Since(start)
	slices.Sort(rep.latencies)
	return rep
}

// Downstream is a local stand-in for a downstream API with its own idempotency: each
// Idempotency-Key is applied once, and a repeat is answered 200 without applying it again.
// With SetFaults it fails a share of its calls the way real APIs do.
type Downstream struct {
	mu      sync.Mutex
	calls   map[string]int
	applied map[string]bool
	repeats map[string]int // calls for a key already applied (answered by the idempotency)
	faulted map[string]map[faults.Kind]int
	rates   faults.Rates
	rnd     func() float64
	onCall  func(key string, h http.Header)
	refused map[string]bool
	latency time.Duration // each call's answer waits this long (SetLatency)
	starts  []time.Time   // when each call arrived
	srv     *http.Server
}

// StartDownstream listens on addr (127.0.0.1:8025 for the local stack's "email" target).
func StartDownstream(addr string) (*Downstream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	d := &Downstream{calls: map[string]int{}, applied: map[string]bool{}, repeats: map[string]int{},
		faulted: map[string]map[faults.Kind]int{}, refused: map[string]bool{}}
	d.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(d.serve)}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

// SetFaults makes a share of the calls fail from now on, one draw of rnd per call
// (faults.NewDice for a seeded one): Throttle answers 429 with Retry-After, Error 500 before
// applying, Timeout holds the call without applying it until the caller gives up, Lose applies
// the key and then answers 500 (the caller cannot know it landed), Reject answers 422 without
// applying (a permanent refusal: the intent is parked). Zero rates turn faults off.
func (d *Downstream) SetFaults(r faults.Rates, rnd func() float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rates, d.rnd = r, rnd
}

// SetLatency makes every call take d before it is answered (after it is applied): a slow
// downstream, which sets the outbox's pace.
func (d *Downstream) SetLatency(l time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.latency = l
}

// MostIn is the most calls that arrived within any span of length span: the rate the
// downstream saw.
func (d *Downstream) MostIn(span time.Duration) int {
	d.mu.Lock()
	starts := slices.Clone(d.starts)
	d.mu.Unlock()
	return MostIn(starts, span)
}

// MostIn is the most of times (in any order; sorted in place) within any span of length span.
func MostIn(starts []time.Time, span time.Duration) int {
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	most, j := 0, 0
	for i := range starts {
		for starts[i].Sub(starts[j]) >= span {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// OnCall makes every call run f with its key and headers first, before it is answered and
// before a fault is drawn for it (nil: none): a test can look at the intent's claim while its
// attempt is running, or read what a call carried (its traceparent).
func (d *Downstream) OnCall(f func(key string, h http.Header)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onCall = f
}

// Refuse makes every call for key answer 422 without applying it (a Reject, counted as one),
// until Refuse(key, false): one chosen intent is parked, whatever else runs.
func (d *Downstream) Refuse(key string, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refused[key] = on
}

func (d *Downstream) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	_, _ = io.Copy(io.Discard, r.Body)
	d.mu.Lock()
	onCall := d.onCall
	d.mu.Unlock()
	if onCall != nil {
		onCall(key, r.Header.Clone())
	}
	d.mu.Lock()
	d.calls[key]++
	d.starts = append(d.starts, time.Now())
	latency := d.latency
	kind := faults.None
	if !d.rates.Zero() && d.rnd != nil {
		kind = d.rates.Pick(d.rnd())
	}
	if d.refused[key] {
		kind = faults.Reject
	}
	if kind != faults.None {
		if d.faulted[key] == nil {
			d.faulted[key] = map[faults.Kind]int{}
		}
		d.faulted[key][kind]++
	}
	apply := kind == faults.None || kind == faults.Lose
	if apply {
		if d.applied[key] {
			d.repeats[key]++
		}
		d.applied[key] = true
	}
	d.mu.Unlock()
	if latency > 0 {
		time.Sleep(latency)
	}
	switch kind {
	case faults.Throttle:
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":"rate limited (injected)"}`, http.StatusTooManyRequests)
	case faults.Error:
		http.Error(w, `{"error":"internal error (injected)"}`, http.StatusInternalServerError)
	case faults.Lose:
		http.Error(w, `{"error":"applied, then failed (injected)"}`, http.StatusInternalServerError)
	case faults.Reject:
		http.Error(w, `{"error":"unprocessable (injected)"}`, http.StatusUnprocessableEntity)
	case faults.Timeout:
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		http.Error(w, `{"error":"timed out (injected)"}`, http.StatusGatewayTimeout)
	default:
		_, _ = w.Write([]byte(`{"ok":true}`))
	}
}

// Close stops the server.
func (d *Downstream) Close() error { return d.srv.Close() }

// Seen counts the distinct keys starting with prefix and the calls that carried them.
func (d *Downstream) Seen(prefix string) (keys, calls int) {
	st := d.Stats(prefix)
	return st.Keys, st.Calls
}

// DownstreamStats is what the downstream saw for the keys of one prefix.
type DownstreamStats struct {
	Keys    int // distinct keys called
	Applied int // distinct keys applied (each once: that is the downstream's idempotency)
	Calls   int // calls, failed and retried ones included
	Repeats int // calls for a key already applied, answered 200 without applying again
	// Injected counts the calls failed on purpose, by kind; Rejected the keys refused with an
	// injected 422 (each an intent parked on purpose).
	Injected map[faults.Kind]int
	Rejected int
	// Unexplained counts the repeats no lost answer (Lose: applied, then 500) explains: beyond
	// them, a repeat was a second execution of a done intent, unless a fault injected into the
	// worker's own writes explains it. Worst names up to five such keys.
	Unexplained int
	Worst       []string
}

// Stats counts what the downstream saw for keys starting with prefix.
func (d *Downstream) Stats(prefix string) DownstreamStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := DownstreamStats{Injected: map[faults.Kind]int{}}
	for _, k := range slices.Sorted(maps.Keys(d.calls)) {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		n, f := d.calls[k], d.faulted[k]
		st.Keys++
		st.Calls += n
		st.Repeats += d.repeats[k]
		if d.applied[k] {
			st.Applied++
		}
		for kind, m := range f {
			st.Injected[kind] += m
		}
		if f[faults.Reject] > 0 {
			st.Rejected++
		}
		if extra := d.repeats[k] - f[faults.Lose]; extra > 0 {
			st.Unexplained += extra
			if len(st.Worst) < 5 {
				st.Worst = append(st.Worst, fmt.Sprintf("%s (%d calls, %d repeats, %d lost answers)", k, n, d.repeats[k], f[faults.Lose]))
			}
		}
	}
	return st
}

// Applied reports whether key has been applied.
func (d *Downstream) Applied(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applied[key]
}
