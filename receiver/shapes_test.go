package receiver_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

// discordSeed is RFC 8032's first Ed25519 test key (section 7.1, TEST 1); its public key is
// the one the sources below list.
const (
	discordSeed   = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	discordPublic = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
)

// sendgridKey is a P-256 key made for the test run: its public half goes in the sources file,
// its private half signs (receivertest's secret for a public-key source).
func sendgridKey(t testing.TB) (public, private string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	priv, _ := x509.MarshalPKCS8PrivateKey(k)
	return base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(priv)
}

// shapesFile has a source of each new delivery shape: form bodies, signed URLs, public keys,
// batches.
func shapesFile(t *testing.T) (*sources.File, map[string]string) {
	t.Helper()
	sgPublic, sgPrivate := sendgridKey(t)
	f, err := sources.Parse([]byte(fmt.Sprintf(`{"sources":{
  "zoom":     {"scheme":"zoom","secrets":[{"env":"S"}],"event_id":{"json":"payload.object.uuid"}},
  "intercom": {"scheme":"intercom","secrets":[{"env":"S"}]},
  "square":   {"scheme":"square","secrets":[{"env":"S"}]},
  "twilio":   {"scheme":"twilio","secrets":[{"env":"S"}],"event_type":{"form":"MessageStatus"},"url":"https://hooks.example.com/twilio/sms"},
  "twilio-rebuilt": {"scheme":"twilio","secrets":[{"env":"S"}],"event_type":{"form":"MessageStatus"}},
  "slack-actions":  {"scheme":"slack","secrets":[{"env":"S"}],"body":"form:payload","event_id":{"json":"trigger_id"},"event_type":{"json":"type"}},
  "discord":  {"scheme":"discord","public_keys":[%q],"event_id":{"json":"event.data.id"}},
  "sendgrid": {"scheme":"sendgrid","public_keys":[%q]}}}`, discordPublic, sgPublic)))
	if err != nil {
		t.Fatal(err)
	}
	return f, map[string]string{"zoom": "zoom-secret-token", "intercom": "intercom-client-secret", "square": "square-signature-key",
		"twilio": "twilio-auth-token", "twilio-rebuilt": "twilio-auth-token", "slack-actions": "slack-signing-secret",
		"discord": discordSeed, "sendgrid": sgPrivate}
}

// TestEachNewShapeClaimsItsEventOnce: a delivery of each shape, signed as its provider signs
// it, is claimed under the id its source locates, once; its retry is a duplicate.
func TestEachNewShapeClaimsItsEventOnce(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	now := time.Now().UTC()
	cases := []struct {
		source, body, id, typ string
		opts                  []receivertest.Option
	}{
		{"zoom", fmt.Sprintf(`{"event":"meeting.started","event_ts":%d,"payload":{"account_id":"AAAAAABBBB","object":{"uuid":"4444AAAiAAAAAiAiAiiAii==","id":"123456789","topic":"My Meeting"}}}`, now.UnixMilli()),
			"4444AAAiAAAAAiAiAiiAii==", "meeting.started", nil},
		{"intercom", fmt.Sprintf(`{"type":"notification_event","app_id":"abc123","data":{"type":"notification_event_data","item":{"type":"conversation","id":"147"}},"id":"notif_ccd8a4d2-c53c-4e61-b4a4-7f9a8a5d3d4c","topic":"conversation.user.created","delivery_attempts":1,"created_at":%d}`, now.Unix()),
			"notif_ccd8a4d2-c53c-4e61-b4a4-7f9a8a5d3d4c", "conversation.user.created", nil},
		{"square", fmt.Sprintf(`{"merchant_id":"6SSW7HV8K2ST5","type":"payment.updated","event_id":"1a7c3e94-5b2d-4f8a-9e61-0c3d7b2a5f18","created_at":%q,"data":{"type":"payment","id":"hYy9pRFVxpDsO1FB05SunFWUe9JZY"}}`, now.Format(time.RFC3339Nano)),
			"1a7c3e94-5b2d-4f8a-9e61-0c3d7b2a5f18", "payment.updated", nil},
		{"twilio", "MessageSid=SM3f1c2b6a9d8e47f0a1b2c3d4e5f60718&MessageStatus=delivered&To=%2B14155550123&From=%2B14155550199&AccountSid=AC0123456789abcdef0123456789abcdef",
			"0e9f3c1a-idem-token", "delivered", []receivertest.Option{receivertest.WithEventID("0e9f3c1a-idem-token"), receivertest.WithQuery("tenant=acme")}},
		{"twilio-rebuilt", "MessageSid=SM3f1c2b6a9d8e47f0a1b2c3d4e5f60718&MessageStatus=sent&To=%2B14155550123",
			"1f0a4d2b-idem-token", "sent", []receivertest.Option{receivertest.WithEventID("1f0a4d2b-idem-token")}},
		{"slack-actions", "payload=" + url.QueryEscape(`{"type":"block_actions","trigger_id":"13345224609.738474920.8088930838d88f008e0","user":{"id":"U0CA5"},"actions":[{"action_id":"approve","value":"ord_1"}]}`),
			"13345224609.738474920.8088930838d88f008e0", "block_actions", nil},
		{"discord", fmt.Sprintf(`{"version":1,"application_id":"1234560123453231555","type":1,"event":{"type":"ENTITLEMENT_CREATE","timestamp":%q,"data":{"id":"1083816790848053248","sku_id":"1088510058284990888","user_id":"1088605110638227537"}}}`, now.Format(time.RFC3339)),
			"1083816790848053248", "ENTITLEMENT_CREATE", nil},
	}
	h, rec, err := receivertest.NewHandler(f, secrets, func(p *receiver.Planners) {
		for _, c := range cases {
			p.Handle(c.source, c.typ, func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, nil })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.source, func(t *testing.T) {
			for i := range 2 {
				req, err := receivertest.Request(f, c.source, secrets[c.source], []byte(c.body), c.opts...)
				if err != nil {
					t.Fatal(err)
				}
				resp, _ := h.Handle(context.Background(), req)
				ok := resp.StatusCode == 200 && strings.Contains(resp.Body, fmt.Sprintf(`"duplicate":%v`, i == 1))
				if c.source == "discord" {
					ok = resp.StatusCode == 204 && resp.Body == "" // what Discord requires of webhook events
				}
				if !ok {
					t.Fatalf("delivery %d: %d %s", i, resp.StatusCode, resp.Body)
				}
			}
			got := rec.Last().Event
			if got.Source != c.source || got.ID != c.id || got.Type != c.typ {
				t.Fatalf("claimed %s %q %q, want %q %q", got.Source, got.ID, got.Type, c.id, c.typ)
			}
			if c.source == "slack-actions" && !strings.HasPrefix(string(got.Payload), `{"type":"block_actions"`) {
				t.Fatalf("payload %q: want the JSON of the form's payload field", got.Payload)
			}
			// Signed with another key, the same delivery is refused.
			other := "not-the-secret"
			if c.source == "discord" {
				other = strings.Repeat("11", 32)
			}
			forged, _ := receivertest.Request(f, c.source, other, []byte(c.body), c.opts...)
			if resp, _ := h.Handle(context.Background(), forged); resp.StatusCode != 401 {
				t.Fatalf("signed with another key: %d %s", resp.StatusCode, resp.Body)
			}
		})
	}
}

// TestASignedURLIsTheOneTheProviderCalled: Twilio signs the URL; the receiver rebuilds it from
// the domain API Gateway served, the path and the query when the source configures none. A delivery whose
// URL differs from the one signed (another host, another query) is refused.
func TestASignedURLIsTheOneTheProviderCalled(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	h, rec, err := receivertest.NewHandler(f, secrets, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := "MessageSid=SM1&MessageStatus=sent"
	req, err := receivertest.Request(f, "twilio-rebuilt", secrets["twilio-rebuilt"], []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(r *events.APIGatewayV2HTTPRequest)
		status int
	}{
		{"another domain", func(r *events.APIGatewayV2HTTPRequest) { r.RequestContext.DomainName = "evil.example.com" }, 401},
		{"a query added", func(r *events.APIGatewayV2HTTPRequest) { r.RawQueryString = "tenant=other" }, 401},
		{"a form field added", func(r *events.APIGatewayV2HTTPRequest) { r.Body += "&Extra=1" }, 401},
		{"as signed", func(*events.APIGatewayV2HTTPRequest) {}, 200},
		{"another Host header, which is not what the URL is rebuilt from", func(r *events.APIGatewayV2HTTPRequest) { r.Headers["host"] = "evil.example.com" }, 200},
	} {
		r := req
		r.Headers = map[string]string{}
		for k, v := range req.Headers {
			r.Headers[k] = v
		}
		c.change(&r)
		if resp, _ := h.Handle(context.Background(), r); resp.StatusCode != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, resp.Body, c.status)
		}
	}
	if n := len(rec.All()); n != 1 {
		t.Fatalf("%d claims, want 1", n)
	}
}

// TestAFormBodysRepeatedIDIsRefused: a form key the source locates must appear once (twice, it
// is ambiguous), a form must be one, and a form's JSON payload field must hold the id: else 400,
// and nothing is claimed.
func TestAFormBodysRepeatedIDIsRefused(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	h, rec, err := receivertest.NewHandler(f, secrets, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ source, body string }{
		{"twilio", "MessageStatus=sent&MessageStatus=delivered"},
		{"twilio", "MessageSid=SM1"}, // no type
		{"slack-actions", "%zz=1"},   // not a form: Slack signs the bytes, so this reaches the reader
		{"slack-actions", "payload=1&payload=2"},
		{"slack-actions", "payload=" + url.QueryEscape(`{"type":"block_actions"}`)}, // no trigger_id
	} {
		req, err := receivertest.Request(f, c.source, secrets[c.source], []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := h.Handle(context.Background(), req)
		if resp.StatusCode != 400 {
			t.Errorf("%s %q: %d %s, want 400", c.source, c.body, resp.StatusCode, resp.Body)
		}
		// Slack is told not to retry what will be refused again; other providers get no such header.
		if got := resp.Headers["X-Slack-No-Retry"]; (got == "1") != (c.source == "slack-actions") {
			t.Errorf("%s: X-Slack-No-Retry %q", c.source, got)
		}
	}
	if len(rec.All()) != 0 {
		t.Fatal("a refused form was claimed")
	}
}

// TestAFormRepeatingTheDeliveryIDAndTimeKeysIsRefusedNamingTheTimeKey: when both optional
// keys a form source locates are repeated, the 400 names the time's key, the last one read.
func TestAFormRepeatingTheDeliveryIDAndTimeKeysIsRefusedNamingTheTimeKey(t *testing.T) {
	t.Parallel()
	f, err := sources.Parse([]byte(`{"sources":{"form":{"scheme":"slack","secrets":[{"env":"S"}],"body":"form",
	  "event_id":{"form":"id"},"event_type":{"form":"type"},"delivery_id":{"form":"d"},"occurred_at":{"form":"at"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	h, rec, err := receivertest.NewHandler(f, map[string]string{"form": "s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, err := receivertest.Request(f, "form", "s", []byte("id=evt_1&type=t&d=1&d=2&at=1700000000&at=1700000001"))
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := h.Handle(context.Background(), req)
	if got := receivertest.Read(resp); got.Status != 400 || got.Field != "body" || got.Reason != `body repeats the form key "at"` {
		t.Errorf("%+v, want 400 naming the repeated key \"at\"", got)
	}
	if len(rec.All()) != 0 {
		t.Fatal("a refused form was claimed")
	}
}

// TestProviderControlMessagesClaimNothing: Zoom's url_validation gets the encrypted token
// (Elastic Beats' published vector: secret secretValueTest), Intercom's ping and Discord's PING
// are acknowledged (Discord's with 204), Intercom's HEAD check gets 200.
func TestProviderControlMessagesClaimNothing(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	secrets["zoom"] = "secretValueTest"
	h, rec, err := receivertest.NewHandler(f, secrets, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source, body string
		status       int
		answer       string
	}{
		{"zoom", `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`, 200,
			`{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"70c1f2e2e6ca2d39297490d1f9142c7d701415ea8e6151f6562a08fa657a40ff"}`},
		{"intercom", `{"type":"notification_event","app_id":"abc123","data":{"type":"notification_event_data","item":{"type":"ping","message":"something something interzen"}},"links":{},"id":null,"topic":"ping","delivery_status":null,"delivery_attempts":1,"delivered_at":0,"first_sent_at":1700000000,"created_at":1700000000,"self":null}`, 200, ""},
		{"discord", `{"version":1,"application_id":"1234560123453231555","type":0}`, 204, ""},
	} {
		req, err := receivertest.Request(f, c.source, secrets[c.source], []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := h.Handle(context.Background(), req)
		if resp.StatusCode != c.status || resp.Body != c.answer {
			t.Errorf("%s: %d %s, want %d %s", c.source, resp.StatusCode, resp.Body, c.status, c.answer)
		}
	}
	head, _ := receivertest.Request(f, "intercom", secrets["intercom"], nil)
	head.RequestContext.HTTP.Method = http.MethodHead
	if resp, _ := h.Handle(context.Background(), head); resp.StatusCode != 200 {
		t.Errorf("HEAD: %d", resp.StatusCode)
	}
	if n := len(rec.All()); n != 0 {
		t.Fatalf("%d claims: a control message claims nothing", n)
	}
}

// sgEvent is one SendGrid event as its Event Webhook posts it.
func sgEvent(id, event string, at time.Time) string {
	return fmt.Sprintf(`{"email":"example@test.com","timestamp":%d,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":%q,"category":"cat facts","sg_event_id":%q,"sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0"}`, at.Unix(), event, id)
}

func sgBatch(evs ...string) []byte { return []byte("[" + strings.Join(evs, ",\r\n") + "]\r\n") }

// staticKeys hands each source its keys, never refreshed.
type staticKeys map[string][]string

func (s staticKeys) Get(source string) []string                    { return s[source] }
func (s staticKeys) Refresh(context.Context, string) (bool, error) { return false, nil }

// TestASendGridBatchClaimsEachEventOnce runs batches through the real store: the first batch
// is one transaction; the next, overlapping it, claims only the new event; each planner sees
// one event.
func TestASendGridBatchClaimsEachEventOnce(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	counter := awstest.NewCounter(client)
	store, err := dedup.New(counter, dedup.Config{Table: table, Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	planned := map[string]int{}
	planners := receiver.NewPlanners()
	for _, typ := range []string{"delivered", "open", "bounce"} {
		planners.Handle("sendgrid", typ, func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
			planned[ev.ID]++
			if !json.Valid(ev.Payload) || !strings.Contains(string(ev.Payload), ev.ID) {
				return dedup.Plan{}, fmt.Errorf("payload %q is not the event's own", ev.Payload)
			}
			return dedup.Plan{Intents: []dedup.Intent{{Name: "record", Target: "crm", Payload: []byte(`{}`)}}}, nil
		})
	}
	keys := staticKeys{}
	for _, n := range f.Names() {
		keys[n] = []string{secrets[n]}
		if pk := f.Sources[n].PublicKeys; len(pk) > 0 {
			keys[n] = pk
		}
	}
	var metrics bytes.Buffer
	h, err := receiver.New(receiver.Config{Sources: f, Secrets: keys, Store: store, Planners: planners, Metrics: &metrics})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	post := func(body []byte) events.APIGatewayV2HTTPResponse {
		t.Helper()
		req, err := receivertest.Request(f, "sendgrid", secrets["sendgrid"], body)
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := h.Handle(context.Background(), req)
		return resp
	}
	resp := post(sgBatch(sgEvent("sg_1", "delivered", now), sgEvent("sg_2", "open", now), sgEvent("sg_3", "bounce", now)))
	if resp.StatusCode != 200 || resp.Body != `{"received":true,"events":3,"duplicates":0,"ignored":0}` || counter.Calls("TransactWriteItems") != 1 {
		t.Fatalf("first batch: %d %s, %d transactions", resp.StatusCode, resp.Body, counter.Calls("TransactWriteItems"))
	}
	resp = post(sgBatch(sgEvent("sg_2", "open", now), sgEvent("sg_3", "bounce", now), sgEvent("sg_4", "delivered", now)))
	if resp.StatusCode != 200 || resp.Body != `{"received":true,"events":3,"duplicates":2,"ignored":0}` {
		t.Fatalf("overlapping batch: %d %s", resp.StatusCode, resp.Body)
	}
	// Each event is counted under its own type: 4 accepted, 2 duplicates.
	counts := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(metrics.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"Received", "Accepted", "Duplicate"} {
			if v, ok := doc[m].(float64); ok {
				counts[m+" "+doc["event_type"].(string)] += v
			}
		}
	}
	if want := map[string]float64{"Received other": 2, "Accepted delivered": 2, "Accepted open": 1, "Accepted bounce": 1,
		"Duplicate open": 1, "Duplicate bounce": 1}; fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("metrics %v, want %v", counts, want)
	}
	for _, id := range []string{"sg_1", "sg_2", "sg_3", "sg_4"} {
		if res, err := store.Claimed(context.Background(), dedup.Event{Source: "sendgrid", ID: id, Type: "open"}); err != nil || res.Outcome != dedup.OutcomeDuplicate {
			t.Fatalf("%s not claimed: %v", id, err)
		}
	}

	// One event without its id: the batch is refused, naming it, and nothing of it is written.
	before := len(awstest.Items(t, client, table))
	resp = post(sgBatch(sgEvent("sg_5", "open", now), strings.Replace(sgEvent("x", "open", now), `"sg_event_id":"x",`, "", 1)))
	if resp.StatusCode != 400 || !strings.Contains(resp.Body, `"field":"events[1].event_id"`) {
		t.Fatalf("batch with a bad event: %d %s", resp.StatusCode, resp.Body)
	}
	if after := len(awstest.Items(t, client, table)); after != before {
		t.Fatalf("%d items after a refused batch, %d before", after, before)
	}
	// Not an array: 400.
	if resp := post([]byte(sgEvent("sg_6", "open", now))); resp.StatusCode != 400 {
		t.Fatalf("an object for a batch: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestServeHTTPVerifiesASignedURL: behind plain net/http, a URL-signing source names its
// public URL (the container cannot know the scheme the provider used).
func TestServeHTTPVerifiesASignedURL(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	h, rec, err := receivertest.NewHandler(f, secrets, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := receivertest.HTTPRequest(f, "twilio", secrets["twilio"], srv.URL+"/hooks/twilio", []byte("MessageSid=SM9&MessageStatus=sent"),
		receivertest.WithEventID("idem-9"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || rec.Last().Event.ID != "idem-9" {
		t.Fatalf("%d, claimed %q", resp.StatusCode, rec.Last().Event.ID)
	}
}

// TestABatchThroughAStoreWithoutCommitBatch: the test kit's recorder commits a batch's events
// one Commit at a time, with the same answers.
func TestABatchThroughAStoreWithoutCommitBatch(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	h, rec, err := receivertest.NewHandler(f, secrets, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, want := range []string{`"events":2,"duplicates":0`, `"events":2,"duplicates":1`} {
		body := sgBatch(sgEvent("sg_a", "open", now), sgEvent([]string{"sg_b", "sg_c"}[i], "delivered", now))
		req, err := receivertest.Request(f, "sendgrid", secrets["sendgrid"], body)
		if err != nil {
			t.Fatal(err)
		}
		if resp, _ := h.Handle(context.Background(), req); resp.StatusCode != 200 || !strings.Contains(resp.Body, want) {
			t.Fatalf("batch %d: %d %s, want %s", i, resp.StatusCode, resp.Body, want)
		}
	}
	if n := len(rec.All()); n != 3 {
		t.Fatalf("%d events recorded, want 3", n)
	}
}

// sendgridPoster builds a handler over the shapes file (shapesFile) with store and planners, and
// returns a function that posts a signed SendGrid batch to it.
func sendgridPoster(t *testing.T, f *sources.File, secrets map[string]string, store receiver.Committer, planners *receiver.Planners) func([]byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	keys := staticKeys{}
	for _, n := range f.Names() {
		keys[n] = []string{secrets[n]}
		if pk := f.Sources[n].PublicKeys; len(pk) > 0 {
			keys[n] = pk
		}
	}
	h, err := receiver.New(receiver.Config{Sources: f, Secrets: keys, Store: store, Planners: planners})
	if err != nil {
		t.Fatal(err)
	}
	return func(body []byte) events.APIGatewayV2HTTPResponse {
		req, err := receivertest.Request(f, "sendgrid", secrets["sendgrid"], body)
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := h.Handle(context.Background(), req)
		return resp
	}
}

// A batch whose write the store refuses for a new event's plan (over an item's size) fails as a
// planner does (500, retried by the provider once fixed), never a refusal: the batch's other
// events may be claimed already (their 200 lost).
func TestABatchWhosePlanTheStoreRefusesIsAnswered500NotRefused(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	client := awstest.Client(t)
	store, err := dedup.New(client, dedup.Config{Table: awstest.Table(t, client), Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	planners := receiver.NewPlanners()
	planners.Handle("sendgrid", "open", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
		if ev.ID != "sg_big" {
			return dedup.Plan{}, nil
		}
		return dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "BIG#1"}, "sk": &types.AttributeValueMemberS{Value: "X"},
			"blob": &types.AttributeValueMemberS{Value: strings.Repeat("x", 500*1024)}})}}, nil
	})
	post := sendgridPoster(t, f, secrets, store, planners)
	now := time.Now()
	if resp := post(sgBatch(sgEvent("sg_claimed", "open", now))); resp.StatusCode != 200 {
		t.Fatalf("first: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := post(sgBatch(sgEvent("sg_claimed", "open", now), sgEvent("sg_big", "open", now))); resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("%d %s, want 500", resp.StatusCode, resp.Body)
	}
}

// TestABatchEventClaimedBeforeWhosePlannerNowFailsKeepsTheOthersInStep: an event of the batch
// claimed earlier, whose planner now refuses it, is a duplicate; the events around it are
// committed with their own plans ([new, old] once paired the new event's plan with the old
// one and dropped the new).
func TestABatchEventClaimedBeforeWhosePlannerNowFailsKeepsTheOthersInStep(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	refuse := false
	planners := receiver.NewPlanners()
	planners.Handle("sendgrid", "open", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
		if refuse && ev.ID == "sg_old" {
			return dedup.Plan{}, &receiver.PayloadError{Field: "email", Reason: "is no longer accepted"}
		}
		return dedup.Plan{Intents: []dedup.Intent{{Name: "record-" + ev.ID, Target: "crm", Payload: []byte(`{}`)}}}, nil
	})
	post := sendgridPoster(t, f, secrets, store, planners)
	now := time.Now()
	if resp := post(sgBatch(sgEvent("sg_old", "open", now))); resp.StatusCode != 200 {
		t.Fatalf("first: %d %s", resp.StatusCode, resp.Body)
	}
	refuse = true
	resp := post(sgBatch(sgEvent("sg_new", "open", now), sgEvent("sg_old", "open", now), sgEvent("sg_newer", "open", now)))
	if resp.StatusCode != 200 || resp.Body != `{"received":true,"events":3,"duplicates":1,"ignored":0}` {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
	for _, id := range []string{"sg_new", "sg_newer"} {
		out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dedup.ClaimKey("sendgrid", id)}, "sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK}}})
		if err != nil || out.Item == nil {
			t.Fatalf("%s not claimed: %v", id, err)
		}
		c, _ := dedup.UnmarshalClaim(out.Item)
		if _, ok := c.Intents["record-"+id]; !ok || len(c.Intents) != 1 {
			t.Fatalf("%s claimed with intents %v, want its own plan", id, c.Intents)
		}
	}
}

// A redelivered batch whose write the store refuses for an event's plan (the planner changed
// since: a plan over an item's size, or one the store finds invalid) answers that event, when
// it is claimed already, as a duplicate, as a single event's delivery does, and writes the
// others with their own plans; only an unclaimed event's refused plan is answered 500 (nothing
// of the batch written), for the provider to retry once the planner is fixed. Through the real
// store and the test kit's.
func TestABatchEventClaimedBeforeWhosePlanTheStoreNowRefusesIsADuplicate(t *testing.T) {
	t.Parallel()
	f, secrets := shapesFile(t)
	client := awstest.Client(t)
	real, err := dedup.New(client, dedup.Config{Table: awstest.Table(t, client), Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	refusedPlan := map[string]dedup.Plan{
		"limit": {Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "BIG#1"}, "sk": &types.AttributeValueMemberS{Value: "X"},
			"blob": &types.AttributeValueMemberS{Value: strings.Repeat("x", 500*1024)}})}},
		"invalid": {Intents: []dedup.Intent{{Name: "", Target: "crm", Payload: []byte(`{}`)}}},
	}
	for kind, want := range map[string]error{"limit": dedup.ErrLimit, "invalid": dedup.ErrInvalid} {
		if err := real.Check(dedup.Event{Source: "sendgrid", ID: "x", Type: "open"}, refusedPlan[kind]); !errors.Is(err, want) {
			t.Fatalf("the %s plan: the store answers %v, want %v", kind, err, want)
		}
	}
	type step struct {
		refuse map[string]string // event id: the kind of plan the store refuses
		ids    []string          // the batch delivered
		want   string            // its answer's body, or "500"
	}
	ok := func(n, dups int) string {
		return fmt.Sprintf(`{"received":true,"events":%d,"duplicates":%d,"ignored":0}`, n, dups)
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"every event claimed, one plan now over an item's size", []step{
			{nil, []string{"a", "b"}, ok(2, 0)},
			{map[string]string{"b": "limit"}, []string{"a", "b"}, ok(2, 2)},
			{map[string]string{"b": "limit"}, []string{"a", "b"}, ok(2, 2)},
			{map[string]string{"b": "limit"}, []string{"a", "b"}, ok(2, 2)}}},
		{"every event claimed, one plan now invalid", []step{
			{nil, []string{"a", "b"}, ok(2, 0)},
			{map[string]string{"a": "invalid"}, []string{"a", "b"}, ok(2, 2)}}},
		{"every event claimed, two plans now refused", []step{
			{nil, []string{"a", "b", "c"}, ok(3, 0)},
			{map[string]string{"a": "limit", "c": "invalid"}, []string{"a", "b", "c"}, ok(3, 3)}}},
		{"new events around a claimed one whose plan is refused are written", []step{
			{nil, []string{"b"}, ok(1, 0)},
			{map[string]string{"b": "limit"}, []string{"a", "b", "c"}, ok(3, 1)},
			{nil, []string{"a", "b", "c"}, ok(3, 3)}}},
		{"an unclaimed event's refused plan is 500, writing nothing", []step{
			{nil, []string{"a"}, ok(1, 0)},
			{map[string]string{"a": "invalid", "b": "limit"}, []string{"a", "b", "c"}, "500"},
			{map[string]string{"b": "invalid"}, []string{"a", "b", "c"}, "500"},
			{nil, []string{"a", "b", "c"}, ok(3, 1)}}},
	}
	stores := map[string]receiver.Committer{"the store's CommitBatch": real, "one Commit at a time": receivertest.NewRecorder(f)}
	for storeName, store := range stores {
		var refuse map[string]string
		planners := receiver.NewPlanners()
		planners.Handle("sendgrid", "open", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
			if kind := refuse[ev.ID]; kind != "" {
				return refusedPlan[kind], nil
			}
			return dedup.Plan{Intents: []dedup.Intent{{Name: "record", Target: "crm", Payload: []byte(`{}`)}}}, nil
		})
		post := sendgridPoster(t, f, secrets, store, planners)
		now := time.Now()
		for c, tc := range cases {
			for s, st := range tc.steps {
				refuse = map[string]string{}
				var evs []string
				for _, id := range st.ids {
					evs = append(evs, sgEvent(fmt.Sprintf("c%d_%s", c, id), "open", now))
				}
				for id, kind := range st.refuse {
					refuse[fmt.Sprintf("c%d_%s", c, id)] = kind
				}
				resp := post(sgBatch(evs...))
				if got := resp.Body; st.want == "500" && resp.StatusCode != http.StatusInternalServerError || st.want != "500" && (resp.StatusCode != 200 || got != st.want) {
					t.Errorf("%s, %s, delivery %d: %d %s, want %s", storeName, tc.name, s+1, resp.StatusCode, got, st.want)
				}
			}
		}
	}
}
