package receiver_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver"
)

func TestALoneRetryWithANewDeliveryIsADuplicate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// GitHub: the event id is the delivery GUID scoped by the hook; the retry keeps both.
	body := `{"action":"opened","order":{"id":"x"},"data":{"order_id":"ord_gh_1"}}`
	hdr := func() http.Header {
		return http.Header{"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "X-Github-Hook-Id": {"292430182"}, "X-Github-Event": {"order.paid"}}
	}
	first := e.post(e.request("github", body, hdr(), ""))
	if first.StatusCode != 200 || first.Body != `{"received":true,"duplicate":false}` {
		t.Fatalf("first delivery: %d %s", first.StatusCode, first.Body)
	}
	e.advance(30 * time.Second)
	retry := e.post(e.request("github", body, hdr(), ""))
	if retry.StatusCode != 200 || retry.Body != `{"received":true,"duplicate":true}` {
		t.Fatalf("retry: %d %s", retry.StatusCode, retry.Body)
	}
	// Standard Webhooks: a retry is re-signed with a new timestamp; webhook-id stays.
	shop := func() int {
		r := e.post(e.request("shop", orderBody("evt_1", "ord_sw_1"), nil, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"))
		if r.StatusCode != 200 {
			t.Fatalf("shop: %d %s", r.StatusCode, r.Body)
		}
		return strings.Count(r.Body, `"duplicate":true`)
	}
	if shop() != 0 || func() int { e.advance(time.Minute); return shop() }() != 1 {
		t.Fatal("a re-signed retry of a Standard Webhooks message must be a duplicate")
	}
	if n := e.countPrefix("ORDER#"); n != 2 {
		t.Fatalf("%d shipments, want 2 (one per event)", n)
	}
}

func TestABulkRedriveThroughTheHandlerAdmitsOnlyUnseenEvents(t *testing.T) {
	t.Parallel()
	const events = 400
	e := newEnv(t)
	send := func(i int) bool {
		body := orderBody(fmt.Sprintf("evt_%04d", i), fmt.Sprintf("ord_%04d", i))
		r := e.post(e.request("stripe", body, nil, ""))
		if r.StatusCode != 200 {
			t.Errorf("event %d: %d %s", i, r.StatusCode, r.Body)
		}
		return strings.Contains(r.Body, `"duplicate":true`)
	}
	for i := 0; i < events; i += 2 {
		send(i)
	}
	e.advance(6 * 24 * time.Hour) // a redrive after a long outage, well inside retention
	var dups, fresh atomic.Int64
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if send(i) {
					dups.Add(1)
				} else {
					fresh.Add(1)
				}
			}
		}()
	}
	for i := range events {
		work <- i
	}
	close(work)
	wg.Wait()
	if dups.Load() != events/2 || fresh.Load() != events/2 {
		t.Fatalf("redrive: %d new, %d duplicates; want %d and %d", fresh.Load(), dups.Load(), events/2, events/2)
	}
	if n := e.countPrefix("ORDER#"); n != events {
		t.Fatalf("%d shipments, want %d", n, events)
	}
}

func TestConcurrentDoublesThroughTheHandlerShipOnce(t *testing.T) {
	t.Parallel()
	const events, copies = 60, 8
	e := newEnv(t)
	var accepted [events]atomic.Int64
	var unavailable [events]atomic.Bool
	var wg sync.WaitGroup
	for i := range events {
		body := orderBody(fmt.Sprintf("evt_%04d", i), fmt.Sprintf("ord_%04d", i))
		var start sync.WaitGroup
		start.Add(1)
		for range copies {
			req := e.request("shopify", body, http.Header{
				"X-Shopify-Webhook-Id": {fmt.Sprintf("b54557e4-bdd9-4b37-8a5f-%012d", i)},
				"X-Shopify-Topic":      {"order.paid"},
			}, "")
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				// A 503 is the receiver's answer when DynamoDB is slower than the delivery
				// timeout allows (480 requests at once on a loaded machine can be): the
				// provider retries it, and so does this test, as often as it takes.
				r := e.post(req)
				for attempt := 0; r.StatusCode == 503 && attempt < 50; attempt++ {
					unavailable[i].Store(true)
					r = e.post(req)
				}
				if r.StatusCode != 200 {
					t.Errorf("event %d: %d %s", i, r.StatusCode, r.Body)
				}
				if strings.Contains(r.Body, `"duplicate":false`) {
					accepted[i].Add(1)
				}
			}()
		}
		start.Done()
	}
	wg.Wait()
	for i := range events {
		// A copy answered 503 may have committed (its answer was what ran out of time), so
		// its retry, or another copy, is told duplicate: zero acceptances then, never two.
		if n := accepted[i].Load(); n > 1 || (n == 0 && !unavailable[i].Load()) {
			t.Fatalf("event %d accepted %d times out of %d concurrent copies", i, n, copies)
		}
	}
	if n := e.countPrefix("ORDER#"); n != events {
		t.Fatalf("%d shipments, want %d", n, events)
	}
}

// TestErrorStatuses checks every refusal: its status, that its message names the field, and
// that it wrote nothing.
func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good := orderBody("evt_err", "ord_err")
	cases := []struct {
		name   string
		req    func() events.APIGatewayV2HTTPRequest
		status int
		field  string
	}{
		{"malformed JSON is a 400 naming the body", func() events.APIGatewayV2HTTPRequest { return e.request("stripe", `{"id":"evt_1",`, nil, "") }, 400, "body"},
		{"a JSON array is a 400", func() events.APIGatewayV2HTTPRequest { return e.request("stripe", `[1,2]`, nil, "") }, 400, "body"},
		{"a missing event id is a 400 naming event_id", func() events.APIGatewayV2HTTPRequest { return e.request("stripe", `{"type":"order.paid"}`, nil, "") }, 400, "event_id"},
		{"an oversized event id is a 400 naming event_id", func() events.APIGatewayV2HTTPRequest {
			return e.request("stripe", `{"id":"`+strings.Repeat("e", 600)+`","type":"order.paid","data":{"order_id":"o"}}`, nil, "")
		}, 400, "event_id"},
		{"an event id with a control character is a 400", func() events.APIGatewayV2HTTPRequest {
			return e.request("stripe", `{"id":"evt\u0000x","type":"order.paid","data":{"order_id":"o"}}`, nil, "")
		}, 400, "event_id"},
		{"a missing event type is a 400 naming event_type", func() events.APIGatewayV2HTTPRequest { return e.request("stripe", `{"id":"evt_1"}`, nil, "") }, 400, "event_type"},
		{"a payload the planner cannot use is a 400 naming its field", func() events.APIGatewayV2HTTPRequest {
			return e.request("stripe", `{"id":"evt_2","type":"order.paid","data":{}}`, nil, "")
		}, 400, "data.order_id"},
		{"a GitHub delivery without its hook id is a 400 naming event_id", func() events.APIGatewayV2HTTPRequest {
			return e.request("github", good, http.Header{"X-Github-Delivery": {"d1"}, "X-Github-Event": {"order.paid"}}, "")
		}, 400, "event_id"},
		{"a wrong signature is a 401", func() events.APIGatewayV2HTTPRequest {
			r := e.request("stripe", good, nil, "")
			r.Body = strings.Replace(r.Body, "ord_err", "ord_fake", 1) // tampered after signing
			return r
		}, 401, ""},
		{"a missing signature is a 401", func() events.APIGatewayV2HTTPRequest { return apigw("stripe", good, nil) }, 401, ""},
		{"a timestamp outside tolerance is a 401", func() events.APIGatewayV2HTTPRequest {
			e.advance(-10 * time.Minute)
			defer e.advance(10 * time.Minute)
			return e.request("stripe", good, nil, "")
		}, 401, ""},
		{"an unknown source is a 404", func() events.APIGatewayV2HTTPRequest {
			r := e.request("stripe", good, nil, "")
			r.RawPath = "/hooks/nobody"
			return r
		}, 404, "source"},
		{"an unknown source on an application's own {source} route is a 404", func() events.APIGatewayV2HTTPRequest {
			r := e.request("stripe", good, nil, "")
			r.RouteKey, r.PathParameters = "POST /hooks/{source}", map[string]string{"source": "nobody"}
			return r
		}, 404, "source"},
		{"a GET is a 405", func() events.APIGatewayV2HTTPRequest {
			r := e.request("stripe", good, nil, "")
			r.RequestContext.HTTP.Method = "GET"
			return r
		}, 405, ""},
		{"a body over the source's limit is a 413", func() events.APIGatewayV2HTTPRequest {
			return e.request("shop", `{"id":"x","pad":"`+strings.Repeat("p", 70000)+`"}`, nil, "msg_big")
		}, 413, "body"},
		{"a base64 body over the limit is a 413 before decoding", func() events.APIGatewayV2HTTPRequest {
			r := e.request("shop", `{"pad":"`+strings.Repeat("p", 70000)+`"}`, nil, "msg_big64")
			r.Body, r.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(r.Body)), true
			return r
		}, 413, "body"},
		{"a header name sent twice in different case is a 400 naming it", func() events.APIGatewayV2HTTPRequest {
			r := e.request("github", good, http.Header{"X-Github-Delivery": {"d2"}, "X-Github-Hook-Id": {"1"}, "X-Github-Event": {"order.paid"}}, "")
			r.Headers["X-GitHub-Event"] = "release" // API Gateway never sends this; a hand-built event can
			return r
		}, 400, "X-Github-Event"},
		{"a body that claims base64 but is not is a 400", func() events.APIGatewayV2HTTPRequest {
			r := e.request("stripe", good, nil, "")
			r.IsBase64Encoded = true
			return r
		}, 400, "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := e.post(c.req())
			if resp.StatusCode != c.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, resp.Body, c.status)
			}
			body := decode(t, resp)
			if msg, _ := body["error"].(string); msg == "" {
				t.Fatalf("body %s has no error message", resp.Body)
			}
			if got, _ := body["field"].(string); got != c.field {
				t.Fatalf("field %q (%s), want %q", got, resp.Body, c.field)
			}
			if c.status == 405 && resp.Headers["Allow"] != "POST" {
				t.Fatal("a 405 must say which method is allowed")
			}
		})
	}
	if n := len(e.items()); n != 0 {
		t.Fatalf("%d items written by refused deliveries, want none", n)
	}
}

// TestAnApplicationsOwnSourceRouteWorksToo: an application that mounts the receiver on its own
// API under a {source} route, at a path of its own, gets the source from the path parameter.
func TestAnApplicationsOwnSourceRouteWorksToo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.request("stripe", `{"id":"evt_own_route","type":"order.paid","data":{"order_id":"ord_own_route"}}`, nil, "")
	r.RouteKey, r.RawPath, r.PathParameters = "POST /v1/inbound/{source}", "/v1/inbound/stripe", map[string]string{"source": "stripe"}
	if resp := e.post(r); resp.StatusCode != 200 || resp.Body != `{"received":true,"duplicate":false}` {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
}

// TestAHeaderNameSentTwiceInDifferentCaseIsRefusedOverARESTAPI: a REST API's event keeps the
// sender's case, so one name can arrive twice; it is refused, whichever spelling map order
// meets first, while the one name in Headers and MultiValueHeaders (as API Gateway sends it)
// is one header.
func TestAHeaderNameSentTwiceInDifferentCaseIsRefusedOverARESTAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v2 := e.request("stripe", orderBody("evt_v1_twice", "ord_v1_twice"), nil, "")
	sig := v2.Headers["stripe-signature"]
	v1 := events.APIGatewayProxyRequest{
		Path: "/hooks/stripe", HTTPMethod: "POST", PathParameters: map[string]string{"source": "stripe"}, Body: v2.Body,
		Headers: map[string]string{"Content-Type": "application/json", "Stripe-Signature": sig, "stripe-signature": "t=1,v1=00"},
	}
	for range 8 { // map order varies between runs of one loop: the answer must not
		r, err := e.handler.HandleV1(context.Background(), v1)
		if err != nil || r.StatusCode != 400 || !strings.Contains(r.Body, `"field":"Stripe-Signature"`) {
			t.Fatalf("%d %s, want 400 naming Stripe-Signature", r.StatusCode, r.Body)
		}
	}
	v1.Headers = map[string]string{"Content-Type": "application/json", "Stripe-Signature": sig}
	v1.MultiValueHeaders = map[string][]string{"Content-Type": {"application/json"}, "stripe-signature": {sig}}
	if r, err := e.handler.HandleV1(context.Background(), v1); err != nil || r.StatusCode != 200 {
		t.Fatalf("one name in Headers and MultiValueHeaders: %d %s, want 200", r.StatusCode, r.Body)
	}
}

func TestADuplicateGets200EvenWhenItCanNoLongerBePlanned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.post(e.request("stripe", orderBody("evt_replan", "ord_replan"), nil, "")); !strings.Contains(r.Body, `"duplicate":false`) {
		t.Fatalf("first delivery: %d %s", r.StatusCode, r.Body)
	}
	// The provider reuses the id with a body today's planner refuses: still the same event.
	r := e.post(e.request("stripe", `{"id":"evt_replan","type":"order.paid","data":{}}`, nil, ""))
	if r.StatusCode != 200 || r.Body != `{"received":true,"duplicate":true}` {
		t.Fatalf("got %d %s, want 200 duplicate", r.StatusCode, r.Body)
	}
	// A new event with that body is refused, naming the field.
	r = e.post(e.request("stripe", `{"id":"evt_new","type":"order.paid","data":{}}`, nil, ""))
	if r.StatusCode != 400 || decode(t, r)["field"] != "data.order_id" {
		t.Fatalf("got %d %s, want 400 naming data.order_id", r.StatusCode, r.Body)
	}
}

// A planner changed since an event's claim now plans a value DynamoDB itself refuses (with the
// whole request: the claim condition is never reached): the redelivery is still a duplicate,
// as for a plan the store refuses, since dedup refuses such values first and names them.
func TestADuplicateGets200WhenItsNewPlanHoldsAValueDynamoDBRefuses(t *testing.T) {
	t.Parallel()
	for name, bad := range map[string]types.AttributeValue{
		"not a number":                &types.AttributeValueMemberN{Value: "not-a-number"},
		"a set holding a value twice": &types.AttributeValueMemberSS{Value: []string{"a", "a"}},
		"an empty set":                &types.AttributeValueMemberSS{Value: []string{}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			planWith := func(extra map[string]types.AttributeValue) func(*receiver.Planners) {
				return func(p *receiver.Planners) {
					p.Handle("stripe", "thing.done", func(context.Context, dedup.Event) (dedup.Plan, error) {
						item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "THING#1"}, "sk": &types.AttributeValueMemberS{Value: "X"}}
						maps.Copy(item, extra)
						return dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(item)}}, nil
					})
				}
			}
			e.handler = e.handlerWith(planWith(nil))
			body := `{"id":"evt_badvalue","type":"thing.done","data":{}}`
			if r := e.post(e.request("stripe", body, nil, "")); r.StatusCode != 200 || !strings.Contains(r.Body, `"duplicate":false`) {
				t.Fatalf("first delivery: %d %s", r.StatusCode, r.Body)
			}
			e.handler = e.handlerWith(planWith(map[string]types.AttributeValue{"bad": bad}))
			if r := e.post(e.request("stripe", body, nil, "")); r.StatusCode != 200 || r.Body != `{"received":true,"duplicate":true}` {
				t.Fatalf("redelivery of a claimed event: %d %s, want 200 duplicate", r.StatusCode, r.Body)
			}
		})
	}
}

// failingGetItem answers every GetItem with DynamoDB's 500 while on; the other calls go on.
type failingGetItem struct{ on *atomic.Bool }

func (f failingGetItem) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.on.Load() && strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".GetItem") {
		body := `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}`
		return &http.Response{StatusCode: 500, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
	}
	return awstest.BaseTransport().RoundTrip(r)
}

// A delivery whose plan fails is refused only when its claim is read and absent: when the read
// fails, the event may be claimed (its 200 lost), and a refusal the provider would not retry
// (400, with the scheme's no-retry marker) would break "every claimed event gets 200". It is
// answered 503: deliver again.
func TestAFailedPlanWhoseClaimCannotBeReadIsAnswered503NotRefused(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	e := newEnv(t, withClient(awstest.WithTransport(failingGetItem{&failing})))
	if r := e.post(e.request("stripe", orderBody("evt_unread", "ord_unread"), nil, "")); r.StatusCode != 200 {
		t.Fatalf("first delivery: %d %s", r.StatusCode, r.Body)
	}
	failing.Store(true)
	// The provider redelivers it with a body today's planner refuses; its claim cannot be read.
	r := e.post(e.request("stripe", `{"id":"evt_unread","type":"order.paid","data":{}}`, nil, ""))
	if r.StatusCode != http.StatusServiceUnavailable || r.Headers["Retry-After"] == "" {
		t.Fatalf("got %d %s %v, want 503 with Retry-After", r.StatusCode, r.Body, r.Headers)
	}
}

func TestAnUnusableDeliveryIDIsDroppedNotFatal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := e.request("partner", `{"meta":{"id":"p_long","type":"order.paid"},"data":{"order_id":"ord_long"}}`,
		map[string][]string{"X-Partner-Delivery": {strings.Repeat("d", 300)}}, "")
	if r := e.post(req); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	if logs := e.logLines(); logs[0]["delivery_id_dropped"] != true {
		t.Fatalf("log %v: the dropped delivery id should be noted", logs[0])
	}
}

func TestLookAlikeEventIDsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.post(e.request("stripe", `{"id":"evt_\u202egnp.exe","type":"order.paid","data":{"order_id":"o"}}`, nil, ""))
	if r.StatusCode != 400 || decode(t, r)["field"] != "event_id" {
		t.Fatalf("%d %s, want 400 naming event_id", r.StatusCode, r.Body)
	}
	if logs := e.logLines(); strings.Contains(mustJSON(logs), "gnp.exe") {
		t.Fatal("an invalid event id must not be logged")
	}
}

func TestPlansTheStoreRefusesAndPlannerFailuresAre500(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handler = e.handlerWith(func(p *receiver.Planners) {
		p.Handle("stripe", "too.big", func(context.Context, dedup.Event) (dedup.Plan, error) {
			big := strings.Repeat("x", 500*1024)
			return dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "BIG#1"}, "sk": &types.AttributeValueMemberS{Value: "X"},
				"blob": &types.AttributeValueMemberS{Value: big}})}}, nil
		})
		p.Handle("stripe", "planner.down", func(context.Context, dedup.Event) (dedup.Plan, error) {
			return dedup.Plan{}, errors.New("inventory service unreachable")
		})
	})
	for _, typ := range []string{"too.big", "planner.down"} {
		r := e.post(e.request("stripe", `{"id":"evt_`+typ+`","type":"`+typ+`"}`, nil, ""))
		if r.StatusCode != 500 || strings.Contains(r.Body, "inventory") {
			t.Fatalf("%s: %d %s, want a bare 500", typ, r.StatusCode, r.Body)
		}
	}
	if n := len(e.items()); n != 0 {
		t.Fatalf("%d items written, want none", n)
	}
}

func TestAPersistentTransactionConflictIsA503(t *testing.T) {
	t.Parallel()
	inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: -1, Status: 400,
		Body: `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled","CancellationReasons":[{"Code":"TransactionConflict"},{"Code":"None"}]}`}
	e := newEnv(t, withClient(awstest.WithTransport(inject)))
	r := e.post(e.request("stripe", orderBody("evt_conflict", "ord_conflict"), nil, ""))
	if r.StatusCode != 503 || r.Headers["Retry-After"] == "" || inject.Injected() != 4 {
		t.Fatalf("%d %v after %d attempts; want 503 with Retry-After after the first try and 3 retries", r.StatusCode, r.Headers, inject.Injected())
	}
}

func TestNewRefusesASourceTheStoreDoesNotKnow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	store, err := dedup.New(awstest.Client(t), dedup.Config{Table: e.table, Sources: map[string]dedup.Retention{"stripe": e.file.Sources["stripe"].Retention()}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: store})
	if err == nil || !strings.Contains(err.Error(), "no retention in the store") {
		t.Fatalf("got %v", err)
	}
}

// TestADuplicateThatCanNoLongerBePlannedIsLoggedAndCountedAsAnyDuplicate: a redelivery whose
// body differs from the first delivery's, and which today's planner refuses, is a duplicate
// like any other: flagged as a payload mismatch in its log line (a warning) and its metrics, whether the duplicate probe answered it (in a redrive) or the receiver found its
// claim after the planner refused it (the probe off, or not in a redrive): the probe may save a
// write, never change how a delivery is reported.
func TestADuplicateThatCanNoLongerBePlannedIsLoggedAndCountedAsAnyDuplicate(t *testing.T) {
	t.Parallel()
	for _, probe := range []bool{true, false} {
		t.Run(fmt.Sprintf("probe %v", probe), func(t *testing.T) {
			t.Parallel()
			var e *env
			if probe {
				e = newEnv(t)
			} else {
				e = newEnv(t, withoutProbe())
			}
			reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_replan"))
			for range 2 { // a redrive, where the probe (when on) answers
				for _, req := range reqs {
					e.post(req)
				}
			}
			refused := e.request("shop", `{"id":"msg_replan_0","type":"order.paid","timestamp":"2026-08-25T09:14:03Z","data":{}}`, nil, "msg_replan_0")
			e.mu.Lock()
			mark := e.metrics.Len()
			e.mu.Unlock()
			if r := e.post(refused); r.StatusCode != 200 || r.Body != `{"received":true,"duplicate":true}` {
				t.Fatalf("got %d %s, want 200 duplicate", r.StatusCode, r.Body)
			}
			line := e.lastLogLine()
			e.mu.Lock()
			metrics := e.metrics.String()[mark:]
			e.mu.Unlock()
			if line["outcome"] != "duplicate" || line["payload_mismatch"] != true || line["level"] != "WARN" || !strings.Contains(metrics, `"PayloadMismatch":1`) {
				t.Fatalf("logged %v and counted %s; want a duplicate flagged (and counted) as a payload mismatch", line, metrics)
			}
		})
	}
}
