package receiver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faultproxy"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/internal/seeds"
	"github.com/oncehook/oncehook/receiver"
)

// shopEvent builds the i-th new order.paid event named prefix_i, signed for shop.
func (e *env) shopEvent(prefix string) func(int) events.APIGatewayV2HTTPRequest {
	return func(i int) events.APIGatewayV2HTTPRequest {
		id := fmt.Sprintf("%s_%d", prefix, i)
		return e.request("shop", orderBody(id, "ord_"+id), nil, id)
	}
}

// deliver sends req and returns its answer and the calls it cost: reads (GetItem) and writes.
func (e *env) deliver(req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, reads, writes int) {
	e.t.Helper()
	e.counter.Reset()
	resp = e.post(req)
	return resp, e.counter.Calls("GetItem"), e.counter.Calls("TransactWriteItems") + e.counter.Calls("PutItem")
}

// sendNew delivers n new events built by req, each checked accepted in one request, and returns
// them for redelivery.
func (e *env) sendNew(n int, req func(int) events.APIGatewayV2HTTPRequest) []events.APIGatewayV2HTTPRequest {
	e.t.Helper()
	var reqs []events.APIGatewayV2HTTPRequest
	for i := range n {
		reqs = append(reqs, req(i))
		if resp, reads, writes := e.deliver(reqs[i]); resp.StatusCode != 200 || decode(e.t, resp)["duplicate"] != false || reads+writes != 1 {
			e.t.Fatalf("new event %d: %d %s in %d calls, want accepted in 1", i, resp.StatusCode, resp.Body, reads+writes)
		}
	}
	return reqs
}

// redeliver sends req again and checks it is answered as a duplicate; it returns the calls it
// cost.
func (e *env) redeliver(req events.APIGatewayV2HTTPRequest) (reads, writes int) {
	e.t.Helper()
	resp, reads, writes := e.deliver(req)
	if resp.StatusCode != 200 || decode(e.t, resp)["duplicate"] != true {
		e.t.Fatalf("redelivery: %d %s, want a duplicate", resp.StatusCode, resp.Body)
	}
	return reads, writes
}

// redrive redelivers every one of reqs, written (a redrive sets in: by the end of it, as many
// duplicates as new events), so that the next duplicate is probed.
func (e *env) redrive(reqs []events.APIGatewayV2HTTPRequest) {
	e.t.Helper()
	for i, req := range reqs {
		if reads, writes := e.redeliver(req); reads != 0 || writes != 1 {
			e.t.Fatalf("duplicate %d before the redrive is seen: %d reads and %d writes, want its write alone", i, reads, writes)
		}
	}
}

// TestUnderARedriveADuplicateCostsOneReadAndNoWrite: once duplicates dominate a source's
// deliveries, a duplicate of an event with effects is answered from one read of its claim
// instead of a transaction its claim's condition cancels (4 write units for order.paid).
func TestUnderARedriveADuplicateCostsOneReadAndNoWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew(20, e.shopEvent("msg_redrive"))
	for range 2 { // the redrive sets in
		for _, req := range reqs {
			e.redeliver(req)
		}
	}
	for i, req := range reqs {
		if reads, writes := e.redeliver(req); reads != 1 || writes != 0 {
			t.Fatalf("duplicate %d under a redrive: %d reads and %d writes, want 1 read and no write", i, reads, writes)
		}
	}
	if n := e.countPrefix("ORDER#"); n != 20 {
		t.Fatalf("%d shipments, want 20", n)
	}
}

// TestTheProbeTurnsOnInARedriveAndOffWhenNewEventsDominateAgain: new events outside a redrive
// are one request each; the probe starts once duplicates are half of the source's recent
// deliveries, and stops once new events are the most again.
func TestTheProbeTurnsOnInARedriveAndOffWhenNewEventsDominateAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_window"))
	e.redrive(reqs)
	probed := strings.Count(e.metricsText(), `"Probed":1`)
	for i, req := range reqs {
		if reads, writes := e.redeliver(req); reads != 1 || writes != 0 || e.lastLogLine()["dynamodb_calls"] != 1.0 || e.lastLogLine()["probed"] != true {
			t.Fatalf("duplicate %d under the redrive: %d reads and %d writes (logged %v), want 1 read and no write", i, reads, writes, e.lastLogLine()["dynamodb_calls"])
		}
	}
	if n := strings.Count(e.metricsText(), `"Probed":1`) - probed; n != len(reqs) {
		t.Fatalf("%d Probed metrics for %d probed deliveries", n, len(reqs))
	}
	// New events under the redrive are probed, then written; once they dominate, written alone.
	more, off := e.shopEvent("msg_after"), -1
	for i := range receiver.WindowSlots {
		resp, reads, writes := e.deliver(more(i))
		if resp.StatusCode != 200 || decode(t, resp)["duplicate"] != false || writes != 1 || reads > 1 || reads == 1 && off >= 0 {
			t.Fatalf("new event %d (probe off since %d): %d %s in %d reads and %d writes", i, off, resp.StatusCode, resp.Body, reads, writes)
		}
		if logged := e.lastLogLine()["dynamodb_calls"]; logged != float64(reads+writes) {
			t.Fatalf("new event %d: logged %v calls, made %d", i, logged, reads+writes)
		}
		if probed := e.lastLogLine()["probed"] == true; probed != (reads == 1) {
			t.Fatalf("new event %d: logged probed %v after %d reads", i, probed, reads)
		}
		if reads == 0 && off < 0 {
			off = i
		}
	}
	if off < 0 {
		t.Fatalf("%d new events after the redrive are all probed", receiver.WindowSlots)
	}
}

// TestTheProbeStopsWhenTheRedriveIsOlderThanItsWindow: duplicates older than the window's span
// do not keep the probe on.
func TestTheProbeStopsWhenTheRedriveIsOlderThanItsWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_span"))
	e.redrive(reqs)
	e.advance(receiver.WindowSpan + time.Second)
	if reads, writes := e.redeliver(reqs[0]); reads != 0 || writes != 1 {
		t.Fatalf("a duplicate after the redrive's window: %d reads and %d writes, want its write alone", reads, writes)
	}
}

// TestWithTheProbeOffADuplicateIsWrittenUnderARedrive: Config.NoDuplicateProbe.
func TestWithTheProbeOffADuplicateIsWrittenUnderARedrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutProbe())
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_off"))
	for range 3 {
		e.redrive(reqs)
	}
}

// TestUnderARedriveAnExpiredClaimIsLeftToTheWrite: a claim past its expiry, not yet deleted by
// TTL, is no duplicate for the probe: the write re-admits the event, as it does without one
// (absorbed here, in two writes: the first delivery's shipment still stands).
func TestUnderARedriveAnExpiredClaimIsLeftToTheWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_expired"))
	e.redrive(reqs)
	ret, _ := e.store.Retention("shop")
	e.mu.Lock()
	e.ahead = ret.Effective() + time.Hour
	e.mu.Unlock()
	resp, reads, writes := e.deliver(reqs[0])
	if resp.StatusCode != 200 || decode(t, resp)["duplicate"] != false || reads != 1 || writes != 2 {
		t.Fatalf("past its claim's expiry: %d %s in %d reads and %d writes, want re-admitted by the write after the probe's read", resp.StatusCode, resp.Body, reads, writes)
	}
	claim, err := dedup.GetClaim(context.Background(), e.client, e.table, "shop", "msg_expired_0")
	if err != nil || claim.Outcome != dedup.OutcomeAbsorbed.String() || claim.ExpiresAt < e.storeClock().Add(ret.Effective()-time.Minute).Unix() {
		t.Fatalf("the claim after: %+v, %v; want absorbed, expiring a retention from the store's now", claim, err)
	}
}

// githubEvent is GitHub's delivery i of body i, under delivery GUID id (the event id, unsigned).
func (e *env) githubEvent(id string, i int) events.APIGatewayV2HTTPRequest {
	body := fmt.Sprintf(`{"action":"opened","data":{"order_id":"ord_gh_%d"}}`, i)
	return e.request("github", body, http.Header{"X-Github-Delivery": {id}, "X-Github-Hook-Id": {"292430182"}, "X-Github-Event": {"order.paid"}}, "")
}

// TestUnderARedriveAForgedIdIsStillRefusedByTheBodyGuard: GitHub's id is not signed, so a
// captured body re-sent under a forged id finds no claim to probe: the write's body guard
// refuses it, as it does outside a redrive.
func TestUnderARedriveAForgedIdIsStillRefusedByTheBodyGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew(receiver.WindowMin, func(i int) events.APIGatewayV2HTTPRequest {
		return e.githubEvent(fmt.Sprintf("72d3162e-cc78-11e3-81ab-%012d", i), i)
	})
	e.redrive(reqs)
	forged := "00000000-0000-0000-0000-000000000001"
	resp, reads, writes := e.deliver(e.githubEvent(forged, 0))
	if resp.StatusCode != 200 || decode(t, resp)["duplicate"] != true || reads != 1 || writes != 1 || e.lastLogLine()["outcome"] != "replay" {
		t.Fatalf("a forged id: %d %s in %d reads and %d writes (%v), want the guard's refusal after the probe's read", resp.StatusCode, resp.Body, reads, writes, e.lastLogLine()["outcome"])
	}
	if _, err := dedup.GetClaim(context.Background(), e.client, e.table, "github", "292430182:"+forged); !errors.Is(err, dedup.ErrNoClaim) {
		t.Fatalf("the forged id's claim: %v, want none", err)
	}
}

// staleReads answers every eventually consistent GetItem with nothing, as a read from a replica
// the claim has not reached yet.
func staleReads(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("staleReads", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if g, ok := in.Parameters.(*dynamodb.GetItemInput); ok && !aws.ToBool(g.ConsistentRead) {
				return middleware.InitializeOutput{Result: &dynamodb.GetItemOutput{}}, middleware.Metadata{}, nil
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	})
}

// TestAProbeThatMissesAClaimFallsBackToTheWrite: an eventually consistent read that does not see
// a claim just written leaves the duplicate to the write's condition.
func TestAProbeThatMissesAClaimFallsBackToTheWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withClient(staleReads))
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_stale"))
	e.redrive(reqs)
	if reads, writes := e.redeliver(reqs[0]); reads != 1 || writes != 1 {
		t.Fatalf("a duplicate the probe missed: %d reads and %d writes, want the probe's read and the write that answers it", reads, writes)
	}
	if n := e.countPrefix("ORDER#"); n != receiver.WindowMin {
		t.Fatalf("%d shipments, want %d", n, receiver.WindowMin)
	}
}

// TestUnderARedriveANewEventIsAcceptedWhateverItsProbeReadDoes: the probe's read is an
// optimisation, so whatever happens to it (a connection reset after DynamoDB read the claim, a cut
// answer, a throttle, a server error, an answer that never comes), the new event
// behind it is still written and accepted, as it is with the probe off: the read must leave the
// write the time it has without one. The source answers within its delivery timeout (2 s here,
// the least a source may set).
func TestUnderARedriveANewEventIsAcceptedWhateverItsProbeReadDoes(t *testing.T) {
	t.Parallel()
	emulator := aws.ToString(awstest.Config(t).BaseEndpoint) // skipped with -short, as every emulator test
	const shop2s = `{"sources": {"shop": {"scheme": "standard-webhooks", "secrets": [{"env": "SHOP_SECRET"}], "retry_horizon": "72h", "redrive_window": "30d", "delivery_timeout": "2s"}}}`
	throttle := faultproxy.Reply{Status: 400, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"injected"}`}
	failure := faultproxy.Reply{Status: 500, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}`}
	for _, c := range []struct {
		fault faultproxy.Fault
		reply faultproxy.Reply
		name  string
	}{
		{faultproxy.ResetAfterRequest, faultproxy.Reply{}, "reset after the request"},
		{faultproxy.CutAnswer, faultproxy.Reply{}, "cut answer"},
		{faultproxy.Answer, throttle, "throttled"},
		{faultproxy.Answer, failure, "server error"},
		{faultproxy.Hold, faultproxy.Reply{}, "no answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var armed atomic.Bool
			proxy := faultproxy.Start(t, faultproxy.Config{
				Upstream: emulator,
				Fault:    c.fault,
				Answer:   c.reply,
				Match: func(r *http.Request, body []byte) bool {
					return armed.Load() && faultproxy.Operation(r, body) == "GetItem" && !bytes.Contains(body, []byte(`"ConsistentRead":true`))
				},
			})
			e := newEnv(t, withSources(shop2s, nil), withClient(func(o *dynamodb.Options) {
				o.BaseEndpoint, o.HTTPClient = aws.String(proxy.URL), proxy.Client()
				o.Logger = logging.Nop{} // a cut answer makes the SDK warn about the connection
			}))
			reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_fault"))
			e.redrive(reqs)
			armed.Store(true)
			resp, reads, writes := e.deliver(e.shopEvent("msg_new")(0))
			if resp.StatusCode != 200 || resp.Body != `{"received":true,"duplicate":false}` || reads != 1 || writes != 1 {
				t.Fatalf("a new event whose probe read met %s: %d %s in %d reads and %d writes (%v), want accepted by its write after the read",
					c.fault, resp.StatusCode, resp.Body, reads, writes, e.lastLogLine()["error"])
			}
		})
	}
}

// TestARandomScheduleIsAnsweredAlikeWithAndWithoutTheProbe runs one generated schedule of
// deliveries through two receivers, one kept in a redrive (its probe on for every delivery) and
// one with the probe off, and holds them to the same answer for each delivery (status, headers,
// body), the same log line but for its timings and call count, the same metrics but for
// CommitLatency's value, and the same table at the end: the probe may save a write, never
// change what a delivery does. The deliveries: redeliveries of a few ids with their body, with
// another body, with a type no planner handles, with a payload the planner refuses, GitHub's
// body under a forged delivery id (its body guard), and claims left to expire.
func TestARandomScheduleIsAnsweredAlikeWithAndWithoutTheProbe(t *testing.T) {
	t.Parallel()
	for _, seed := range seeds.Schedule(t, 3) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			probeSchedule(t, seed)
		})
	}
}

// scheduled is one delivery of a generated schedule, built alike for both receivers.
type scheduled struct {
	source  string
	id      int    // index into the source's ids
	variant string // "a", "b" (another body), "unknown" (type), "bad" (payload), "forged" (github)
	forged  int    // the forged delivery id's number
	expire  bool   // instead of a delivery: every claim so far expires
}

func (s scheduled) String() string {
	if s.expire {
		return "the claims expire"
	}
	return fmt.Sprintf("%s id %d %s", s.source, s.id, s.variant)
}

// probedEnv is a receiver under test in the schedule, and its redrive's primers.
type probedEnv struct {
	*env
	primers map[string][]events.APIGatewayV2HTTPRequest
	round   int
}

// build is the delivery s to this receiver (each receiver signs its own).
func (p *probedEnv) build(s scheduled) events.APIGatewayV2HTTPRequest {
	id := fmt.Sprintf("sched_%d", s.id)
	switch s.source {
	case "shop":
		body := orderBody(id, "ord_"+id)
		switch s.variant {
		case "b":
			body = orderBody(id, "ord_other_"+id)
		case "unknown":
			body = strings.Replace(body, "order.paid", "order.refunded", 1)
		case "bad":
			body = `{"id":"` + id + `","type":"order.paid","timestamp":"2026-08-25T09:14:03Z","data":{}}`
		}
		return p.request("shop", body, nil, id)
	}
	guid := fmt.Sprintf("5c0ffee0-cc78-11e3-81ab-%012d", s.id)
	body := fmt.Sprintf(`{"action":"opened","data":{"order_id":"ord_gh_%d"}}`, s.id)
	typ := "order.paid"
	switch s.variant {
	case "b":
		body = fmt.Sprintf(`{"action":"opened","data":{"order_id":"ord_gh_other_%d"}}`, s.id)
	case "unknown":
		typ = "issues"
	case "bad":
		body = `{"action":"opened","data":{}}`
	case "forged":
		guid = fmt.Sprintf("f0f0f0f0-0000-0000-0000-%012d", s.forged)
	}
	return p.request("github", body, http.Header{"X-Github-Delivery": {guid}, "X-Github-Hook-Id": {"292430182"}, "X-Github-Event": {typ}}, "")
}

// prime puts the source in a redrive: its primers (written the first time, after each expiry
// anew) redelivered, so that duplicates are the most of its last deliveries.
func (p *probedEnv) prime(source string) {
	if p.primers[source] == nil {
		for i := range receiver.WindowMin {
			id := fmt.Sprintf("primer_%d_%d", p.round, i)
			if source == "shop" {
				p.primers[source] = append(p.primers[source], p.request("shop", orderBody(id, "ord_"+id), nil, id))
			} else {
				p.primers[source] = append(p.primers[source], p.githubEvent(fmt.Sprintf("00000000-0000-0000-%04d-%012d", p.round, i), 1000*p.round+i))
			}
		}
		for _, req := range p.primers[source] {
			p.post(req)
		}
	}
	for _, req := range p.primers[source] {
		p.post(req)
	}
}

// seen is what one delivery did, as compared between the receivers.
type seen struct {
	status  int
	headers map[string]string
	body    string
	log     map[string]any
	metrics []map[string]any
}

func (p *probedEnv) run(s scheduled) seen {
	p.prime(s.source)
	p.mu.Lock()
	mark := p.metrics.Len()
	p.mu.Unlock()
	resp := p.post(p.build(s))
	log := p.lastLogLine()
	for _, k := range []string{"time", "latency_ms", "commit_ms", "request_id", "dynamodb_calls", "probed"} {
		delete(log, k) // timings, and the probe's read and its mark
	}
	p.mu.Lock()
	docs := jsonLines(p.t, bytes.NewBuffer(p.metrics.Bytes()[mark:]))
	p.mu.Unlock()
	for _, d := range docs {
		delete(d["_aws"].(map[string]any), "Timestamp")
		delete(d, "Probed") // the probe's mark, and its declaration
		for _, m := range d["_aws"].(map[string]any)["CloudWatchMetrics"].([]any) {
			m := m.(map[string]any)
			m["Metrics"] = slices.DeleteFunc(m["Metrics"].([]any), func(x any) bool { return x.(map[string]any)["Name"] == "Probed" })
		}
		if _, ok := d["CommitLatency"]; ok {
			d["CommitLatency"] = "present"
		}
	}
	return seen{status: resp.StatusCode, headers: resp.Headers, body: resp.Body, log: log, metrics: docs}
}

func probeSchedule(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x70be))
	var steps []scheduled
	for range 40 {
		if r.IntN(12) == 0 {
			steps = append(steps, scheduled{expire: true})
			continue
		}
		s := scheduled{source: []string{"shop", "github"}[r.IntN(2)], id: r.IntN(4), forged: len(steps)}
		variants := []string{"a", "a", "a", "b", "unknown", "bad"}
		if s.source == "github" {
			variants = append(variants, "forged")
		}
		s.variant = variants[r.IntN(len(variants))]
		steps = append(steps, s)
	}
	on := &probedEnv{env: newEnv(t), primers: map[string][]events.APIGatewayV2HTTPRequest{}}
	off := &probedEnv{env: newEnv(t, withoutProbe()), primers: map[string][]events.APIGatewayV2HTTPRequest{}}
	for i, s := range steps {
		if s.expire {
			for _, p := range []*probedEnv{on, off} {
				ret, _ := p.store.Retention("shop")
				gh, _ := p.store.Retention("github")
				p.mu.Lock()
				p.ahead += max(ret.Effective(), gh.Effective()) + time.Hour
				p.mu.Unlock()
				p.primers, p.round = map[string][]events.APIGatewayV2HTTPRequest{}, p.round+1
			}
			continue
		}
		on.counter.Reset()
		a := on.run(s)
		probed := on.counter.Calls("GetItem") > 0
		b := off.run(s)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("step %d (%v; probed: %v): with the probe\n%+v\nwithout\n%+v", i, s, probed, a, b)
		}
	}
	claims := func(p *probedEnv) map[string]string {
		out := map[string]string{}
		for _, it := range p.items() {
			pk, sk := it["pk"].(*types.AttributeValueMemberS).Value, it["sk"].(*types.AttributeValueMemberS).Value
			outcome := ""
			if o, ok := it["outcome"].(*types.AttributeValueMemberS); ok {
				outcome = o.Value
			}
			out[pk+" "+sk] = outcome
		}
		return out
	}
	if a, b := claims(on), claims(off); !reflect.DeepEqual(a, b) {
		t.Fatalf("the tables differ: with the probe %v, without %v", a, b)
	}
}

// everyOther answers every other request of one operation whose body contains match with a
// DynamoDB error, without reaching the engine: a transient failure the SDK's next attempt gets
// past.
type everyOther struct {
	next             http.RoundTripper
	operation, match string
	status           int
	body             string
	n                atomic.Int64
}

func (f *everyOther) RoundTrip(r *http.Request) (*http.Response, error) {
	if faults.Operation(r) != f.operation || !awstest.BodyContains(r, f.match) || f.n.Add(1)%2 == 0 {
		return f.next.RoundTrip(r)
	}
	inject := &awstest.InjectErrors{Next: f.next, Operation: f.operation, N: -1, Status: f.status, Body: f.body}
	return inject.RoundTrip(r)
}

// TestUnderARedriveThrottledProbeReadsLeaveTheWritesTheirRetries: when DynamoDB throttles the
// probe's reads (read capacity spent in a redrive, write capacity not) and fails each new
// event's first write attempt, every new event is still accepted, as it is with the probe off:
// the reads the probe could not make must not spend what lets the write get past a transient
// failure. The client is the one a launched receiver builds, the SDK's standard retryer with
// its retry quota (its backoff shortened).
func TestUnderARedriveThrottledProbeReadsLeaveTheWritesTheirRetries(t *testing.T) {
	t.Parallel()
	for _, probe := range []bool{true, false} {
		t.Run(fmt.Sprintf("probe %v", probe), func(t *testing.T) {
			t.Parallel()
			reads := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "GetItem", N: 0, Match: `"ConsistentRead":false`, Status: 400,
				Body: `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"injected"}`}
			writes := &everyOther{next: reads, operation: "TransactWriteItems", match: "msg_new", status: 500,
				body: `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}`}
			opts := []envOption{withClient(awstest.WithTransport(writes)), withClient(func(o *dynamodb.Options) {
				o.Retryer = retry.NewStandard(func(s *retry.StandardOptions) { s.MaxBackoff = time.Millisecond })
			})}
			if !probe {
				opts = append(opts, withoutProbe())
			}
			e := newEnv(t, opts...)
			reqs := make([]events.APIGatewayV2HTTPRequest, receiver.WindowMin)
			for i := range reqs {
				reqs[i] = e.shopEvent("msg_quota")(i)
				e.post(reqs[i])
			}
			reads.SetN(-1)
			more := e.shopEvent("msg_new")
			for i := range 100 {
				for _, req := range reqs[:4] { // the redrive goes on
					e.post(req)
				}
				if resp := e.post(more(i)); resp.StatusCode != 200 || resp.Body != `{"received":true,"duplicate":false}` {
					t.Fatalf("new event %d (probe reads throttled: %d): %d %s (%v), want accepted", i, reads.Injected(), resp.StatusCode, resp.Body, e.lastLogLine()["error"])
				}
			}
		})
	}
}

// TestTheCallsLoggedCountAProbeReadThatFoundNothing: a probe read that does not see the claim
// (a stale read) is one of the delivery's DynamoDB calls, counted in its log line whatever
// answers the delivery after it, the write or the read of the claim made when the planner
// refuses the payload.
func TestTheCallsLoggedCountAProbeReadThatFoundNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withClient(staleReads))
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_calls"))
	e.redrive(reqs)
	refused := e.request("shop", `{"id":"msg_calls_0","type":"order.paid","timestamp":"2026-08-25T09:14:03Z","data":{}}`, nil, "msg_calls_0")
	resp, reads, writes := e.deliver(refused)
	if logged := e.lastLogLine()["dynamodb_calls"]; resp.StatusCode != 200 || logged != float64(reads+writes) {
		t.Fatalf("a duplicate the planner refuses, its probe read stale: %d %s, logged %v calls, made %d (%d reads, %d writes)",
			resp.StatusCode, resp.Body, logged, reads+writes, reads, writes)
	}
}
