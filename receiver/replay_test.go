package receiver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

func loadFixture(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	return req
}

func withHeaders(req events.APIGatewayV2HTTPRequest, kv ...string) events.APIGatewayV2HTTPRequest {
	h := make(map[string]string, len(req.Headers))
	for k, v := range req.Headers {
		h[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	req.Headers = h
	return req
}

// The hole: GitHub signs the body, not X-GitHub-Delivery. A captured delivery re-sent under
// forged GUIDs (and an unsigned X-GitHub-Event naming another type) must run nothing.
func TestACapturedGitHubDeliveryReplayedUnderForgedIDsRunsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handler = e.handlerWith(func(p *receiver.Planners) {
		// A planner whose effect is not idempotent by itself: it would run once per replay.
		for _, typ := range []string{"push", "release"} {
			p.Handle("github", typ, func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
				return dedup.Plan{Intents: []dedup.Intent{{Name: "deploy", Target: "ci", Payload: ev.Payload}}}, nil
			})
		}
	})
	captured := loadFixture(t, "github-push.json")
	if resp := e.post(captured); resp.StatusCode != 200 || resp.Body != `{"received":true,"duplicate":false}` {
		t.Fatalf("the original delivery: %d %s", resp.StatusCode, resp.Body)
	}
	for _, forged := range []events.APIGatewayV2HTTPRequest{
		withHeaders(captured, "x-github-delivery", "00000000-0000-0000-0000-000000000001"),
		withHeaders(captured, "x-github-delivery", "00000000-0000-0000-0000-000000000002"),
		withHeaders(captured, "x-github-delivery", "00000000-0000-0000-0000-000000000003", "x-github-event", "release"),
		withHeaders(captured, "x-github-hook-id", "1"), // another hook's scope, same GUID
	} {
		if resp := e.post(forged); resp.StatusCode != 200 || resp.Body != `{"received":true,"duplicate":true}` {
			t.Fatalf("a replay under %s / %s: %d %s, want the duplicate's answer", forged.Headers["x-github-delivery"], forged.Headers["x-github-event"], resp.StatusCode, resp.Body)
		}
	}
	// The retyped copy under the original id is a plain duplicate: its planner's plan is never committed.
	if resp := e.post(withHeaders(captured, "x-github-event", "release")); resp.Body != `{"received":true,"duplicate":true}` {
		t.Fatalf("a retyped copy: %d %s", resp.StatusCode, resp.Body)
	}
	claims, guards := 0, 0
	for _, it := range e.items() {
		if strings.HasPrefix(attrS(it, "pk"), dedup.ClaimKey("github", "")) {
			switch attrS(it, "sk") {
			case dedup.ClaimSK:
				claims++
			case dedup.BodySK:
				guards++
			}
		}
	}
	if claims != 1 || guards != 1 {
		t.Fatalf("%d claims and %d body guards for one event and its replays, want 1 and 1", claims, guards)
	}
	metrics := e.metricsText()
	if n := strings.Count(metrics, `"ReplayRefused":1`); n != 4 {
		t.Fatalf("ReplayRefused counted %d times, want 4:\n%s", n, metrics)
	}
	if !strings.Contains(e.logsText(), `"outcome":"replay","commit_ms"`) || !strings.Contains(e.logsText(), `"first_event_id":"292430182:72d3162e-cc78-11e3-81ab-4c9367dc0958"`) {
		t.Fatalf("the replays' log lines do not say so:\n%s", e.logsText())
	}
}

func TestASignedEventOlderThanTheRetentionIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := func(id string, at time.Time) string {
		return `{"meta":{"id":"` + id + `","type":"invoice.paid","at":"` + at.UTC().Format(time.RFC3339) + `"}}`
	}
	keep := e.file.Sources["partner"].Retention().Effective() // 24h + 7d + 14d
	old := e.post(e.request("partner", body("inv_old", e.clock().Add(-keep-time.Hour)), http.Header{"X-Partner-Delivery": {"d1"}}, ""))
	if old.StatusCode != http.StatusBadRequest || decode(t, old)["field"] != "occurred_at" || !strings.Contains(old.Body, "retention") {
		t.Fatalf("an event older than the retention: %d %s, want 400 naming occurred_at", old.StatusCode, old.Body)
	}
	if n := e.countPrefix(dedup.ClaimKey("partner", "")); n != 0 {
		t.Fatalf("%d items written for a refused delivery", n)
	}
	fresh := e.post(e.request("partner", body("inv_new", e.clock().Add(-keep+time.Hour)), http.Header{"X-Partner-Delivery": {"d2"}}, ""))
	if fresh.StatusCode != 200 {
		t.Fatalf("an event inside the retention: %d %s", fresh.StatusCode, fresh.Body)
	}
	if !strings.Contains(e.metricsText(), `"TooOld":1`) {
		t.Fatal("TooOld was not counted")
	}
}

func TestSchemesThatSignTheirIDKeepTheOneCallFastPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for name, want := range map[string]string{
		"shop": sources.ReplayGuardOff, "stripe": sources.ReplayGuardOff, "partner": sources.ReplayGuardOff,
		"github": sources.ReplayGuardBody, "shopify": sources.ReplayGuardBodyAndType,
	} {
		if got := e.file.Sources[name].ReplayGuard; got != want {
			t.Errorf("%s: replay_guard %q, want %q by default", name, got, want)
		}
	}
	// A Standard Webhooks event without effects: one PutItem, no transaction, no body guard.
	resp := e.post(e.request("shop", `{"type":"order.refunded","data":{}}`, nil, "msg_fast"))
	if resp.StatusCode != 200 || e.counter.Calls("PutItem") != 1 || e.counter.Total() != 1 {
		t.Fatalf("%d %s; calls: %d PutItem of %d", resp.StatusCode, resp.Body, e.counter.Calls("PutItem"), e.counter.Total())
	}
}

func attrS(it map[string]types.AttributeValue, k string) string {
	s, _ := it[k].(*types.AttributeValueMemberS)
	if s == nil {
		return ""
	}
	return s.Value
}

func (e *env) metricsText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.metrics.String()
}

func (e *env) logsText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.String()
}

// A claim lives a retention from its receipt, and an event is too old a retention from its own
// time: an event first delivered late (the provider's queue behind) is redelivered by the
// provider's schedule past its event time + keep while its claim holds. Zoom retries 5, 25 and
// 85 minutes after the first attempt; with keep 2h (the store accepts any keep from the retry
// horizon, 90m, up), an event first delivered 40 minutes after it happened is retried at 125
// minutes. A claimed event is a duplicate (200) on every later delivery however old; only an
// event not claimed (never, or its claim expired) is refused as too old.
func TestAClaimedEventOlderThanTheRetentionIsADuplicateNotTooOld(t *testing.T) {
	t.Parallel()
	f, err := sources.Parse([]byte(`{"sources":{"zoom":{"scheme":"zoom","secrets":[{"env":"S"}],"event_id":{"json":"payload.object.uuid"},"redrive_window":"0d","keep":"2h"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	keep := f.Sources["zoom"].Retention().Effective()
	const secret = "zoom-secret-token"
	h, _, base, shift := shiftedHandler(t, f, staticKeys{"zoom": {secret}})
	now := func() time.Time { return base.Add(*shift) }
	type delivery struct {
		after time.Duration // since the first attempt
		want  string        // the answer's body, or "too old"
	}
	dup := `{"received":true,"duplicate":true}`
	cases := []struct {
		name    string
		lag     time.Duration // from the event's time to its first attempt
		claimed bool          // the first attempt claimed it (its 200 lost)
		then    []delivery
	}{
		{"delivered on time, retried", 0, true, []delivery{{5 * time.Minute, dup}, {25 * time.Minute, dup}, {85 * time.Minute, dup}}},
		{"delivered 40m late, retried past its time + keep", 40 * time.Minute, true, []delivery{{5 * time.Minute, dup}, {25 * time.Minute, dup}, {85 * time.Minute, dup}}},
		{"delivered just inside the retention, every retry past it", keep - time.Minute, true, []delivery{{5 * time.Minute, dup}, {25 * time.Minute, dup}, {85 * time.Minute, dup}}},
		{"a claim's last second", 40 * time.Minute, true, []delivery{{keep - time.Second, dup}}},
		{"its claim expired", 40 * time.Minute, true, []delivery{{keep + time.Second, "too old"}}},
		{"never claimed", keep + time.Minute, false, []delivery{{0, "too old"}, {5 * time.Minute, "too old"}}},
	}
	for i, tc := range cases {
		id := fmt.Sprintf("meeting-%d", i)
		post := func(after time.Duration) events.APIGatewayV2HTTPResponse {
			*shift = after
			body := fmt.Sprintf(`{"event":"meeting.started","event_ts":%d,"payload":{"account_id":"AAAAAABBBB","object":{"uuid":%q,"id":"123456789","topic":"My Meeting"}}}`,
				base.Add(-tc.lag).UnixMilli(), id)
			req, err := receivertest.Request(f, "zoom", secret, []byte(body), receivertest.WithTime(now()))
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := h.Handle(context.Background(), req)
			return resp
		}
		if tc.claimed {
			if resp := post(0); resp.StatusCode != 200 || resp.Body != `{"received":true,"duplicate":false}` {
				t.Fatalf("%s: the first attempt: %d %s", tc.name, resp.StatusCode, resp.Body)
			}
		}
		for _, d := range tc.then {
			resp := post(d.after)
			tooOld := resp.StatusCode == http.StatusBadRequest && strings.Contains(resp.Body, `"field":"occurred_at"`)
			if d.want == "too old" && !tooOld || d.want != "too old" && (resp.StatusCode != 200 || resp.Body != d.want) {
				t.Errorf("%s: the delivery %s after the first attempt (the event %s old): %d %s, want %s",
					tc.name, d.after, d.after+tc.lag, resp.StatusCode, resp.Body, d.want)
			}
		}
	}
}

// In a batch too: SendGrid retries a batch for 24 hours, and its events' times are when each
// happened, before the post. An event claimed by an earlier post is a duplicate however old;
// one too old and not claimed refuses the batch, naming it, and nothing of it is written.
func TestABatchsClaimedEventOlderThanTheRetentionIsADuplicate(t *testing.T) {
	t.Parallel()
	public, private := sendgridKey(t)
	f, err := sources.Parse([]byte(fmt.Sprintf(`{"sources":{"sendgrid":{"scheme":"sendgrid","public_keys":[%q],"redrive_window":"0d","keep":"25h"}}}`, public)))
	if err != nil {
		t.Fatal(err)
	}
	h, store, base, shift := shiftedHandler(t, f, staticKeys{"sendgrid": {public}})
	now := func() time.Time { return base.Add(*shift) }
	post := func(after time.Duration, evs ...string) events.APIGatewayV2HTTPResponse {
		*shift = after
		req, err := receivertest.Request(f, "sendgrid", private, sgBatch(evs...), receivertest.WithTime(now()))
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := h.Handle(context.Background(), req)
		return resp
	}
	late := base.Add(-3 * time.Hour) // posted 3 hours after it happened; retried 23 hours later, 26 hours old
	if resp := post(0, sgEvent("sg_late", "open", late)); resp.StatusCode != 200 {
		t.Fatalf("the first post: %d %s", resp.StatusCode, resp.Body)
	}
	resp := post(23*time.Hour, sgEvent("sg_late", "open", late), sgEvent("sg_new", "open", now()))
	if resp.StatusCode != 200 || resp.Body != `{"received":true,"events":2,"duplicates":1,"ignored":0}` {
		t.Fatalf("the claimed event 26 hours old, beside a new one: %d %s", resp.StatusCode, resp.Body)
	}
	resp = post(23*time.Hour, sgEvent("sg_newer", "open", now()), sgEvent("sg_never", "open", late))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, `"field":"events[1].occurred_at"`) {
		t.Fatalf("an unclaimed event 26 hours old: %d %s, want 400 naming events[1].occurred_at", resp.StatusCode, resp.Body)
	}
	if res, err := store.Claimed(context.Background(), dedup.Event{Source: "sendgrid", ID: "sg_newer", Type: "open"}); err != nil || res.Outcome != 0 {
		t.Fatalf("sg_newer, of the refused batch: %v %v, want not claimed", res.Outcome, err)
	}
}

// shiftedHandler is a handler of f, on a table of its own, whose clock and its store's are the
// real one at base shifted by *shift: the emulator's TTL sweeper runs on real time, and every
// claim the tests make expires in its future.
func shiftedHandler(t *testing.T, f *sources.File, keys staticKeys) (h *receiver.Handler, store *dedup.Store, base time.Time, shift *time.Duration) {
	t.Helper()
	base, shift = time.Now(), new(time.Duration)
	now := func() time.Time { return base.Add(*shift) }
	client := awstest.Client(t)
	store, err := dedup.New(client, dedup.Config{Table: awstest.Table(t, client), Sources: f.Retentions(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if h, err = receiver.New(receiver.Config{Sources: f, Secrets: keys, Store: store, Planners: receiver.NewPlanners(), Now: now}); err != nil {
		t.Fatal(err)
	}
	return h, store, base, shift
}
