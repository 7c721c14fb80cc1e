package receiver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/receiver"
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
