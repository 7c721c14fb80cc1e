package receiver_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

// Every decision the receiver makes (the event id, its type, whether a body is a control
// message, the replay guard's key) must follow from the bytes the provider signed, as the
// provider canonicalises them. These tests are an attacker's: a captured delivery, no secret,
// and whatever can be changed without breaking its signature.

const signedBytesSources = `{"sources": {
  "twilio":     {"scheme": "twilio", "secrets": [{"env": "TWILIO_TOKEN"}], "event_type": {"form": "MessageStatus"}, "redrive_window": "1d"},
  "twilio-sid": {"scheme": "twilio", "secrets": [{"env": "TWILIO_TOKEN"}], "event_id": {"form": "SmsSid"}, "event_type": {"form": "MessageStatus"}, "redrive_window": "1d"},
  "twitch":     {"scheme": "twitch", "secrets": [{"env": "TWITCH_SECRET"}], "retry_horizon": "1h", "redrive_window": "1d"},
  "linear":     {"scheme": "linear", "secrets": [{"env": "LINEAR_SECRET"}], "redrive_window": "1d"},
  "shopify":    {"scheme": "shopify", "secrets": [{"env": "SHOPIFY_SECRET"}], "retry_horizon": "48h", "redrive_window": "7d"}
}}`

var signedBytesSecrets = map[string]string{"TWILIO_TOKEN": "twilio-auth-token-12345", "TWITCH_SECRET": "twitch-secret-abcdef", "LINEAR_SECRET": "lin_wh_secret_0123"}

// apiDomain is the API Gateway domain the tests' deployment is served on.
const apiDomain = "prod123.execute-api.eu-west-1.amazonaws.com"

func newSignedBytesEnv(t *testing.T, register func(*receiver.Planners)) *env {
	t.Helper()
	e := newEnv(t, withSources(signedBytesSources, signedBytesSecrets))
	e.handler = e.handlerWith(register)
	return e
}

// planEverything registers a planner with an intent for each of types of source: the intent is
// what a replay must never run a second time.
func planEverything(source string, types ...string) func(*receiver.Planners) {
	return func(p *receiver.Planners) {
		for _, typ := range types {
			p.Handle(source, typ, func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
				return dedup.Plan{Intents: []dedup.Intent{{Name: "notify", Target: "crm", Payload: []byte(ev.Type)}}}, nil
			})
		}
	}
}

// twilioRequest is the request Twilio sends when a callback's URL is signedURL, as API Gateway
// hands it to Lambda on domain (the deployment's own domain, whatever the Host header says).
func (e *env) twilioRequest(signedURL, domain, body string, hdr http.Header) events.APIGatewayV2HTTPRequest {
	e.t.Helper()
	s, err := webhook.New(webhook.Twilio, webhook.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	if hdr == nil {
		hdr = http.Header{}
	}
	if err := s.(webhook.URLVerifier).SignURL(signedURL, hdr, []byte(body), signedBytesSecrets["TWILIO_TOKEN"], "", e.clock()); err != nil {
		e.t.Fatal(err)
	}
	u, err := url.Parse(signedURL)
	if err != nil {
		e.t.Fatal(err)
	}
	req := apigw(strings.TrimPrefix(u.Path, "/hooks/"), body, hdr)
	req.Headers["content-type"] = "application/x-www-form-urlencoded"
	req.Headers["host"] = u.Host
	req.RequestContext.DomainName = domain
	req.RawQueryString = u.RawQuery
	return req
}

// claims counts the claims of source in the table.
func (e *env) claims(source string) int {
	n := 0
	for _, it := range e.items() {
		if strings.HasPrefix(attrS(it, "pk"), dedup.ClaimKey(source, "")) && attrS(it, "sk") == dedup.ClaimSK {
			n++
		}
	}
	return n
}

// claimedType is the type the claim of source/id was claimed with ("" when there is none).
func (e *env) claimedType(source, id string) string {
	for _, it := range e.items() {
		if attrS(it, "pk") == dedup.ClaimKey(source, id) && attrS(it, "sk") == dedup.ClaimSK {
			return attrS(it, "event_type")
		}
	}
	return ""
}

const (
	accepted  = `{"received":true,"duplicate":false}`
	duplicate = `{"received":true,"duplicate":true}`
)

func expectAnswer(t *testing.T, what string, resp events.APIGatewayV2HTTPResponse, status int, body string) {
	t.Helper()
	if resp.StatusCode != status || (body != "" && resp.Body != body) {
		t.Fatalf("%s: %d %s, want %d %s", what, resp.StatusCode, resp.Body, status, body)
	}
}

// Twilio signs the decoded form fields, sorted: reordering them or percent-encoding a character
// keeps the signature and changes the raw bytes. The id (I-Twilio-Idempotency-Token) is not
// signed, so the body guard is all that stands between a captured callback and its replays.
func TestTwilioCallbackReencodedUnderAnotherTokenRunsNothing(t *testing.T) {
	t.Parallel()
	e := newSignedBytesEnv(t, planEverything("twilio", "delivered"))
	signed := "https://" + apiDomain + "/hooks/twilio"
	body := "AccountSid=AC1&MessageSid=SM1&MessageStatus=delivered&To=%2B15550100"
	orig := e.twilioRequest(signed, apiDomain, body, http.Header{"I-Twilio-Idempotency-Token": {"tok-1"}})
	expectAnswer(t, "the callback", e.post(orig), 200, accepted)
	for i, reencoded := range []string{
		"MessageStatus=delivered&To=%2B15550100&AccountSid=AC1&MessageSid=SM1",   // reordered
		"AccountSid=AC1&MessageSid=SM%31&MessageStatus=delivered&To=%2B15550100", // one character percent-encoded
		"AccountSid=%41C1&MessageSid=SM1&MessageStatus=delivered&To=%2b15550100", // two, in lower case
	} {
		r := withHeaders(orig, "i-twilio-idempotency-token", "tok-forged-"+string(rune('a'+i)))
		r.Body = reencoded
		expectAnswer(t, "the callback re-encoded as "+reencoded, e.post(r), 200, duplicate)
	}
	if n := e.claims("twilio"); n != 1 {
		t.Fatalf("%d claims for one callback and its re-encoded replays, want 1", n)
	}
}

// Twilio's signed string has no delimiters between names and values: a form field can swallow
// the fields after it and still verify. With the id in a form field, the swallowed copy is a new
// id; an id read from Twilio's form is therefore unsigned as far as guarding goes.
func TestTwilioFieldBoundariesShiftedRunNothing(t *testing.T) {
	t.Parallel()
	e := newSignedBytesEnv(t, planEverything("twilio-sid", "delivered"))
	signed := "https://" + apiDomain + "/hooks/twilio-sid"
	orig := e.twilioRequest(signed, apiDomain, "AccountSid=AC1&MessageStatus=delivered&SmsSid=SM1&SmsStatus=delivered&To=%2B15550100", nil)
	expectAnswer(t, "the callback", e.post(orig), 200, accepted)
	shifted := orig
	shifted.Body = "AccountSid=AC1&MessageStatus=delivered&SmsSid=SM1SmsStatusdeliveredTo%2B15550100"
	expectAnswer(t, "the callback with its fields shifted", e.post(shifted), 200, duplicate)
	if n := e.claims("twilio-sid"); n != 1 {
		t.Fatalf("%d claims for one callback and its shifted copy, want 1", n)
	}
}

// The URL Twilio signs is the deployment's own: API Gateway's domain, never the Host header,
// which the sender chooses. Twilio's auth token is account-wide, so a callback captured for
// staging must not pass production by naming staging's host.
func TestTwilioURLIsTheDeploymentsNotTheHostHeaders(t *testing.T) {
	t.Parallel()
	e := newSignedBytesEnv(t, planEverything("twilio", "delivered"))
	body := "AccountSid=AC1&MessageSid=SM7&MessageStatus=delivered"
	staging := e.twilioRequest("https://staging.example.com/hooks/twilio", apiDomain, body, http.Header{"I-Twilio-Idempotency-Token": {"tok-7"}})
	expectAnswer(t, "staging's callback sent to production with Host: staging", e.post(staging), 401, "")
	if n := e.claims("twilio"); n != 0 {
		t.Fatalf("%d claims for a callback signed for another deployment", n)
	}
	ours := e.twilioRequest("https://"+apiDomain+"/hooks/twilio", apiDomain, body, http.Header{"I-Twilio-Idempotency-Token": {"tok-7"}})
	ours.Headers["host"] = "whatever.example.com"
	expectAnswer(t, "a callback signed for this deployment, whatever its Host header", e.post(ours), 200, accepted)
}

// Twitch signs the message id, the timestamp and the body, not its type headers: the body's
// subscription.type is the event type, and the body says whether it is a notification, a
// verification challenge or a revocation. A header that contradicts the signed body is refused.
func TestTwitchTypeAndMessageKindComeFromTheSignedBody(t *testing.T) {
	t.Parallel()
	e := newSignedBytesEnv(t, planEverything("twitch", "channel.follow", "channel.subscription.gift"))
	follow := `{"subscription":{"id":"f1c2a387","status":"enabled","type":"channel.follow","version":"2"},"event":{"user_id":"1234","broadcaster_user_id":"1337"}}`
	req := func(id, body string, kv ...string) events.APIGatewayV2HTTPRequest {
		r := e.request("twitch", body, http.Header{"Twitch-Eventsub-Message-Type": {"notification"}}, id)
		return withHeaders(r, kv...)
	}
	expectAnswer(t, "a follow sent as a gift", e.post(req("m1", follow, "twitch-eventsub-subscription-type", "channel.subscription.gift")), 400, "")
	expectAnswer(t, "a follow sent as a revocation", e.post(req("m2", follow, "twitch-eventsub-message-type", "revocation")), 400, "")
	expectAnswer(t, "a follow sent as a verification", e.post(req("m3", follow, "twitch-eventsub-message-type", "webhook_callback_verification")), 400, "")
	if n := e.claims("twitch"); n != 0 {
		t.Fatalf("%d claims for deliveries whose headers contradict their signed bodies", n)
	}
	expectAnswer(t, "a follow as Twitch sends it", e.post(req("m4", follow, "twitch-eventsub-subscription-type", "channel.follow")), 200, accepted)
	if typ := e.claimedType("twitch", "m4"); typ != "channel.follow" {
		t.Fatalf("claimed as %q, want channel.follow", typ)
	}
	expectAnswer(t, "a follow without its type header", e.post(req("m5", follow)), 200, accepted)
	if typ := e.claimedType("twitch", "m5"); typ != "channel.follow" {
		t.Fatalf("claimed as %q, want channel.follow, from the body", typ)
	}
	revoked := `{"subscription":{"id":"f1c2a387","status":"authorization_revoked","type":"channel.follow","version":"2"}}`
	resp := e.post(req("m6", revoked, "twitch-eventsub-message-type", "revocation"))
	if resp.StatusCode != 200 || resp.Body != "" {
		t.Fatalf("a revocation: %d %q, want an empty 200", resp.StatusCode, resp.Body)
	}
	expectAnswer(t, "a revocation sent as a notification", e.post(req("m7", revoked)), 400, "")
	if n := e.claims("twitch"); n != 2 {
		t.Fatalf("%d claims, want the two follows'", n)
	}
}

// Linear signs the body; its Linear-Event header repeats the body's type, unsigned.
func TestLinearTypeComesFromTheSignedBody(t *testing.T) {
	t.Parallel()
	e := newSignedBytesEnv(t, planEverything("linear", "Issue", "Comment"))
	body := `{"action":"create","type":"Issue","data":{"id":"2174add1"},"webhookTimestamp":` + jsonMillis(e.clock()) + `}`
	r := e.request("linear", body, http.Header{"Linear-Delivery": {"d-1"}, "Linear-Event": {"Comment"}}, "")
	expectAnswer(t, "an Issue sent as a Comment", e.post(r), 400, "")
	r = e.request("linear", body, http.Header{"Linear-Delivery": {"d-1"}, "Linear-Event": {"Issue"}}, "")
	expectAnswer(t, "an Issue as Linear sends it", e.post(r), 200, accepted)
	if typ := e.claimedType("linear", "d-1"); typ != "Issue" {
		t.Fatalf("claimed as %q, want Issue", typ)
	}
}

// Shopify fans one merchant action out to several topics, each its own webhook id, with the
// topic in an unsigned header and possibly the same body: each topic's event is its own, so the
// body guard is keyed by topic and body, and only a copy under the same topic is a replay.
func TestShopifyFanOutToTopicsWithEqualBodiesClaimsEach(t *testing.T) {
	t.Parallel()
	e := newSignedBytesEnv(t, planEverything("shopify", "orders/create", "orders/paid"))
	body := `{"id":820982911946154508,"email":"jon@example.com","total_price":"403.00"}`
	send := func(webhookID, topic string) events.APIGatewayV2HTTPResponse {
		return e.post(e.request("shopify", body, http.Header{"X-Shopify-Webhook-Id": {webhookID}, "X-Shopify-Topic": {topic}, "X-Shopify-Event-Id": {"ev-1"}}, ""))
	}
	expectAnswer(t, "orders/create", send("wh-1", "orders/create"), 200, accepted)
	expectAnswer(t, "orders/paid, the same action's other topic", send("wh-2", "orders/paid"), 200, accepted)
	expectAnswer(t, "orders/create replayed under a forged webhook id", send("wh-3", "orders/create"), 200, duplicate)
	if n := e.claims("shopify"); n != 2 {
		t.Fatalf("%d claims, want one per topic", n)
	}
}

func jsonMillis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

type fixedSecrets map[string][]string

func (s fixedSecrets) Get(source string) []string                    { return s[source] }
func (s fixedSecrets) Refresh(context.Context, string) (bool, error) { return false, nil }

// httpHandler is the receiver over a recorder for the signed-bytes sources, as a container
// would serve it.
func httpHandler(t *testing.T, trusted []string) (*receiver.Handler, *receivertest.Recorder, *sources.File, *bytes.Buffer) {
	t.Helper()
	f, err := sources.Parse([]byte(signedBytesSources))
	if err != nil {
		t.Fatal(err)
	}
	secrets := fixedSecrets{}
	for _, name := range f.Names() {
		env := f.Sources[name].Secrets[0].Env
		secrets[name] = []string{signedBytesSecrets[env] + testSecrets[env]}
	}
	rec := receivertest.NewRecorder(f)
	var logs bytes.Buffer
	h, err := receiver.New(receiver.Config{Sources: f, Secrets: secrets, Store: rec, Planners: receiver.NewPlanners(),
		TrustedHosts: trusted, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return h, rec, f, &logs
}

// Over ServeHTTP the Host header is all there is to rebuild a signed URL from, and the sender
// writes it: it is used only for a host the deployment lists, and a handler that can verify a
// URL-signing source neither way does not start.
func TestServeHTTPTakesASignedURLOnlyFromATrustedHost(t *testing.T) {
	t.Parallel()
	untrusting, _, _, _ := httpHandler(t, nil)
	var nu *receiver.NoSignedURLError
	if err := untrusting.CheckHTTP(); !errors.As(err, &nu) || nu.Source != "twilio" || !strings.Contains(err.Error(), "TrustedHosts") {
		t.Fatalf("CheckHTTP with a twilio source and neither a url nor trusted hosts: %v", err)
	}
	if _, err := receiver.New(receiver.Config{TrustedHosts: []string{"https://hooks.example.com"}}); err == nil {
		t.Fatal("a trusted host with a scheme was accepted")
	}

	h, rec, f, _ := httpHandler(t, []string{"Hooks.Example.com"})
	if err := h.CheckHTTP(); err != nil {
		t.Fatalf("CheckHTTP with a trusted host: %v", err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	send := func(host, token string) int {
		t.Helper()
		req, err := receivertest.HTTPRequest(f, "twilio", signedBytesSecrets["TWILIO_TOKEN"], "https://"+host+"/hooks/twilio",
			[]byte("AccountSid=AC1&MessageSid=SM2&MessageStatus=sent"), receivertest.WithEventID(token))
		if err != nil {
			t.Fatal(err)
		}
		req.URL, _ = url.Parse(srv.URL + "/hooks/twilio")
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send("hooks.example.com:443", "tok-1"); got != 200 {
		t.Fatalf("a callback to the trusted host: %d", got)
	}
	if got := send("staging.example.com", "tok-2"); got != 401 {
		t.Fatalf("a callback signed for another host, sent with that Host: %d, want 401", got)
	}
	if n := len(rec.All()); n != 1 {
		t.Fatalf("%d claims, want the trusted host's one", n)
	}

	plain := httptest.NewServer(untrusting)
	defer plain.Close()
	req, _ := receivertest.HTTPRequest(f, "twilio", signedBytesSecrets["TWILIO_TOKEN"], plain.URL+"/hooks/twilio", []byte("MessageSid=SM3&MessageStatus=sent"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Fatalf("served without CheckHTTP's answer heeded: %d, want 500 (the configuration is at fault)", resp.StatusCode)
	}
}

// A REST API (payload 1.0) keeps its stage in RequestContext.Path and hands the query decoded:
// the URL a provider signed is rebuilt from the domain, the stage's path and the query.
func TestHandleV1RebuildsTheSignedURLWithTheStageAndQuery(t *testing.T) {
	t.Parallel()
	h, rec, _, _ := httpHandler(t, nil)
	body := "AccountSid=AC1&MessageSid=SM4&MessageStatus=sent"
	hdr := http.Header{"I-Twilio-Idempotency-Token": {"tok-v1"}}
	s, _ := webhook.New(webhook.Twilio, webhook.Options{})
	if err := s.(webhook.URLVerifier).SignURL("https://"+apiDomain+"/prod/hooks/twilio?tenant=acme", hdr, []byte(body), signedBytesSecrets["TWILIO_TOKEN"], "", time.Now()); err != nil {
		t.Fatal(err)
	}
	req := events.APIGatewayProxyRequest{
		HTTPMethod: "POST", Path: "/hooks/twilio", Resource: "/hooks/twilio", Body: body,
		Headers:               map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Host": "whatever.example.com"},
		QueryStringParameters: map[string]string{"tenant": "acme"},
		RequestContext:        events.APIGatewayProxyRequestContext{DomainName: apiDomain, Stage: "prod", Path: "/prod/hooks/twilio", RequestID: "r1"},
	}
	for k, v := range hdr {
		req.Headers[k] = v[0]
	}
	resp, err := h.HandleV1(context.Background(), req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a REST API delivery on stage prod with a query: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	if got := rec.Last().Event.ID; got != "tok-v1" {
		t.Fatalf("claimed %q", got)
	}
}

// Before a delivery is verified, nothing the sender chose is logged whole: the request id is
// bounded, and the event's id and type are not logged at all.
func TestNothingUnverifiedIsLoggedWhole(t *testing.T) {
	t.Parallel()
	h, _, _, logs := httpHandler(t, []string{"hooks.example.com"})
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/hooks/linear", strings.NewReader(`{"action":"create","type":"Issue-unverified","data":{"id":"secret-id"}}`))
	req.Header.Set("X-Request-Id", strings.Repeat("r", 200_000))
	req.Header.Set("Linear-Delivery", "delivery-unverified")
	req.Header.Set("Linear-Signature", strings.Repeat("0", 64))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("a forged signature: %d", resp.StatusCode)
	}
	line := logs.String()
	if len(line) > 2048 {
		t.Fatalf("the log line of one refused delivery is %d bytes", len(line))
	}
	for _, unverified := range []string{"delivery-unverified", "Issue-unverified", "secret-id"} {
		if strings.Contains(line, unverified) {
			t.Fatalf("the log line names %q before it was verified:\n%s", unverified, line)
		}
	}
}

// A secret revoked at its store stops verifying on a warm instance within the secrets' maximum
// age, a slow store included; a store that cannot be read keeps the secrets held, and says so
// (SecretRefreshFailed).
func TestARevokedSecretStopsVerifyingWithinItsMaxAge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	file, err := sources.Parse([]byte(`{"sources": {
  "stripe": {"scheme": "stripe", "secrets": [{"secretsmanager": "stripe-signing"}], "retry_horizon": "3d", "redrive_window": "30d",
             "delivery_timeout": "2s"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	old := "whsec_before_a_leak"
	store := &failingSecretsManager{value: old}
	secrets, err := sources.NewSecrets(context.Background(), file, &sources.Resolver{SecretsManager: store}, time.Minute,
		sources.MaxAge(5*time.Minute), sources.Clock(e.clock))
	if err != nil {
		t.Fatal(err)
	}
	h, err := receiver.New(receiver.Config{Sources: file, Secrets: secrets, Store: e.store, Planners: receiver.NewPlanners(),
		Logger: slog.New(slog.NewJSONHandler(lockedWriter{&e.mu, &e.logs}, nil)), Metrics: lockedWriter{&e.mu, &e.metrics}, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	e.handler = h
	signed := func(secret, id string) events.APIGatewayV2HTTPRequest {
		body := `{"id":"` + id + `","type":"charge.succeeded","created":` + strconv.FormatInt(e.clock().Unix(), 10) + `}`
		hdr := http.Header{}
		s, _ := webhook.New(webhook.Stripe, webhook.Options{})
		if err := s.Sign(hdr, []byte(body), secret, "", e.clock()); err != nil {
			t.Fatal(err)
		}
		return apigw("stripe", body, hdr)
	}
	expectAnswer(t, "signed with the secret", e.post(signed(old, "evt_r1")), 200, accepted)
	store.set("whsec_rotated_after_a_leak", nil)
	e.advance(4 * time.Minute)
	expectAnswer(t, "signed with the revoked secret, within the maximum age", e.post(signed(old, "evt_r2")), 200, accepted)
	e.advance(time.Minute + time.Second)
	expectAnswer(t, "signed with the revoked secret, past the maximum age", e.post(signed(old, "evt_r3")), 401, "")
	expectAnswer(t, "signed with the new secret", e.post(signed("whsec_rotated_after_a_leak", "evt_r4")), 200, accepted)

	store.set("whsec_rotated_after_a_leak", errors.New("the store is throttling"))
	e.advance(6 * time.Minute)
	expectAnswer(t, "while the store fails", e.post(signed("whsec_rotated_after_a_leak", "evt_r5")), 200, accepted)
	if !strings.Contains(e.metricsText(), `"SecretRefreshFailed":1`) || !strings.Contains(e.logsText(), `"secret_refresh_error"`) {
		t.Fatalf("the failed re-read was not counted and logged:\n%s", e.logsText())
	}

	// Emptied at the store: revoked, not a failure. With no secret left the source can verify
	// nothing; that is the operator's to fix, so it answers 500 (the provider retries, and the
	// deliveries land once a secret is set) and the log says why.
	store.set("", nil)
	e.advance(6 * time.Minute)
	expectAnswer(t, "signed with an emptied secret, past the maximum age", e.post(signed("whsec_rotated_after_a_leak", "evt_r6")), 500, "")
	if !strings.Contains(e.logsText(), "no secret given") {
		t.Fatalf("a source left with no secret does not say so:\n%s", e.logsText())
	}

	// A store that answers in 400 ms, on a source answered within 2 s: the re-read has the
	// delivery's time, and the revocation lands.
	store.set("whsec_rotated_again", nil)
	e.advance(6 * time.Minute)
	expectAnswer(t, "signed with the new secret", e.post(signed("whsec_rotated_again", "evt_r7")), 200, accepted)
	store.mu.Lock()
	store.value, store.delay = "whsec_rotated_once_more", 400*time.Millisecond
	store.mu.Unlock()
	e.advance(6 * time.Minute)
	expectAnswer(t, "signed with the revoked secret, past the maximum age, the store slow", e.post(signed("whsec_rotated_again", "evt_r8")), 401, "")
}

// failingSecretsManager answers every read with its value, or its error when set.
type failingSecretsManager struct {
	mu    sync.Mutex
	value string
	err   error
	delay time.Duration // before each answer
}

func (f *failingSecretsManager) set(value string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.value, f.err = value, err
}

func (f *failingSecretsManager) GetSecretValue(ctx context.Context, _ *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(f.value)}, nil
}
