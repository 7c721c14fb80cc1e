package receiver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/oncehook/oncehook/internal/awstest"
)

const throttled = `{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Throughput exceeds the current capacity of your table or index."}`

func TestThrottlingIsA503WithRetryAfterAndNothingWritten(t *testing.T) {
	t.Parallel()
	inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: -1, Status: 400, Body: throttled}
	e := newEnv(t, withClient(awstest.WithTransport(inject)))
	resp := e.post(e.request("stripe", orderBody("evt_t", "ord_t"), nil, ""))
	if resp.StatusCode != 503 || resp.Headers["Retry-After"] == "" {
		t.Fatalf("got %d %v %s, want 503 with Retry-After", resp.StatusCode, resp.Headers, resp.Body)
	}
	if inject.Injected() == 0 || len(e.items()) != 0 {
		t.Fatalf("injected %d, %d items written; want an injected throttle and nothing written", inject.Injected(), len(e.items()))
	}
	// The provider retries later, DynamoDB has recovered, and the event goes through once.
	inject.SetN(0)
	if r := e.post(e.request("stripe", orderBody("evt_t", "ord_t"), nil, "")); r.StatusCode != 200 || !strings.Contains(r.Body, `"duplicate":false`) {
		t.Fatalf("after recovery: %d %s", r.StatusCode, r.Body)
	}
}

func TestBase64BodiesAreDecodedBeforeTheSignatureIsChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := e.request("partner", `{"meta":{"id":"p_1","type":"order.paid"},"data":{"order_id":"ord_b64"}}`, nil, "")
	req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(req.Body)), true
	if r := e.post(req); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	if e.countPrefix("ORDER#ord_b64") != 1 {
		t.Fatal("the shipment was not written")
	}
}

func TestUnknownEventTypesAreClaimedWithoutEffectsAndCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := `{"id":"evt_u","type":"customer.updated","data":{"order_id":"ord_u"}}`
	if r := e.post(e.request("stripe", body, nil, "")); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	if r := e.post(e.request("stripe", body, nil, "")); !strings.Contains(r.Body, `"duplicate":true`) {
		t.Fatalf("an unknown type must still be deduplicated: %s", r.Body)
	}
	if e.countPrefix("EVT#") != 1 || e.countPrefix("ORDER#") != 0 {
		t.Fatal("want one claim and no effects")
	}
	docs := e.metricDocs()
	if docs[0]["UnknownType"] != 1.0 || docs[0]["event_type"] != "other" {
		t.Fatalf("metrics %v: want UnknownType counted under event_type other", docs[0])
	}
}

func TestARotatedSecretIsPickedUpWithoutARedeploy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mu.Lock()
	e.secrets["STRIPE_SECRET"] = "whsec_rotated_by_the_provider" // the request below is signed with it
	e.mu.Unlock()
	// The handler still holds the old secret; the refresh after the failure finds the new one.
	if r := e.post(e.request("stripe", orderBody("evt_rot", "ord_rot"), nil, "")); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
}

func TestLogsAndMetricsDescribeEachDeliveryWithoutSecretsOrPayloads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := orderBody("evt_obs", "ord_obs_secret_customer_data")
	e.post(e.request("stripe", body, nil, ""))
	e.post(e.request("stripe", body, nil, ""))
	forged := e.request("stripe", body, nil, "")
	forged.Body += " "
	e.post(forged)

	logs := e.logLines()
	if len(logs) != 3 {
		t.Fatalf("%d log lines, want one per delivery", len(logs))
	}
	first, dup, rejected := logs[0], logs[1], logs[2]
	for k, want := range map[string]any{"source": "stripe", "event_id": "evt_obs", "event_type": "order.paid", "outcome": "accepted", "status": 200.0} {
		if first[k] != want {
			t.Fatalf("first log line %v: %s = %v, want %v", first, k, first[k], want)
		}
	}
	if _, ok := first["latency_ms"]; !ok {
		t.Fatal("the log line has no latency")
	}
	if dup["outcome"] != "duplicate" || rejected["status"] != 401.0 || rejected["error_kind"] != "signature" {
		t.Fatalf("duplicate %v / rejected %v", dup, rejected)
	}
	e.mu.Lock()
	all := e.logs.String() + e.metrics.String()
	e.mu.Unlock()
	for _, leak := range []string{testSecrets["STRIPE_SECRET"], "ord_obs_secret_customer_data", "ada@example.com", "v1="} {
		if strings.Contains(all, leak) {
			t.Fatalf("logs or metrics contain %q", leak)
		}
	}

	docs := e.metricDocs()
	if len(docs) != 3 {
		t.Fatalf("%d EMF documents, want 3", len(docs))
	}
	if docs[0]["Accepted"] != 1.0 || docs[1]["Duplicate"] != 1.0 || docs[2]["SignatureRejected"] != 1.0 {
		t.Fatalf("metrics: %v", docs)
	}
	if _, ok := docs[0]["CommitLatency"]; !ok {
		t.Fatal("no commit latency metric")
	}
	aws := docs[1]["_aws"].(map[string]any)
	found := false
	for _, d := range aws["CloudWatchMetrics"].([]any) {
		dir := d.(map[string]any)
		for _, m := range dir["Metrics"].([]any) {
			if m.(map[string]any)["Name"] == "Duplicate" {
				found = strings.Contains(mustJSON(dir["Dimensions"]), `["source","event_type"]`)
			}
		}
	}
	if !found {
		t.Fatal("Duplicate must be reported per source and event type")
	}
}

func (e *env) logLines() []map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	return jsonLines(e.t, &e.logs)
}

func (e *env) metricDocs() []map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	return jsonLines(e.t, &e.metrics)
}

func jsonLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestTheRESTAPIAdapterAnswersLikeTheHTTPAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v2 := e.request("stripe", orderBody("evt_v1", "ord_v1"), nil, "")
	v1 := events.APIGatewayProxyRequest{
		Resource: "/hooks/{source}", Path: "/hooks/stripe", HTTPMethod: "POST",
		// REST APIs keep the sender's header case.
		Headers:        map[string]string{"Content-Type": "application/json", "Stripe-Signature": v2.Headers["stripe-signature"]},
		PathParameters: map[string]string{"source": "stripe"},
		Body:           v2.Body,
	}
	for _, want := range []string{`"duplicate":false`, `"duplicate":true`} {
		r, err := e.handler.HandleV1(context.Background(), v1)
		if err != nil || r.StatusCode != 200 || !strings.Contains(r.Body, want) {
			t.Fatalf("%d %s, want 200 with %s", r.StatusCode, r.Body, want)
		}
	}
	v1.HTTPMethod = "PUT"
	if r, _ := e.handler.HandleV1(context.Background(), v1); r.StatusCode != 405 {
		t.Fatalf("PUT: %d", r.StatusCode)
	}
}
