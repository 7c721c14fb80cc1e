package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// fixtureTime is when the recorded fixtures were signed; tests run the handler's clock there.
var fixtureTime = time.Date(2026, 8, 25, 9, 14, 4, 0, time.UTC)

// The secrets the fixtures were signed with, as the sources file's env references resolve them.
var testSecrets = map[string]string{
	"SHOP_SECRET":    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	"STRIPE_SECRET":  "whsec_test_stripe_0123456789abcdef",
	"GITHUB_SECRET":  "It's a Secret to Everybody",
	"SHOPIFY_SECRET": "shpss_test_0123456789abcdef",
	"PARTNER_SECRET": "partner-secret",
}

const testSourcesJSON = `{"sources": {
  "shop":    {"scheme": "standard-webhooks", "secrets": [{"env": "SHOP_SECRET"}],    "retry_horizon": "72h", "redrive_window": "30d", "max_body_bytes": 65536},
  "stripe":  {"scheme": "stripe",            "secrets": [{"env": "STRIPE_SECRET"}],  "retry_horizon": "3d",  "redrive_window": "30d"},
  "github":  {"scheme": "github",            "secrets": [{"env": "GITHUB_SECRET"}],  "retry_horizon": "1h",  "redrive_window": "3d"},
  "shopify": {"scheme": "shopify",           "secrets": [{"env": "SHOPIFY_SECRET"}], "retry_horizon": "48h", "redrive_window": "7d"},
  "partner": {"scheme": "hmac-sha256", "hmac": {"header": "X-Partner-Signature", "prefix": "sha256="},
              "secrets": [{"env": "PARTNER_SECRET"}], "event_id": {"json": "meta.id"}, "event_type": {"json": "meta.type"},
              "delivery_id": {"header": "X-Partner-Delivery"}, "occurred_at": {"json": "meta.at"}, "retry_horizon": "24h", "redrive_window": "7d"}
}}`

// env is one test's handler over a fresh table on the test endpoint.
type env struct {
	t       *testing.T
	handler *receiver.Handler
	client  *dynamodb.Client
	table   string
	file    *sources.File
	store   *dedup.Store
	counter *awstest.Counter // the store's DynamoDB calls, by operation
	offset  time.Duration    // how far the test has moved both clocks
	ahead   time.Duration    // how far it has moved the store's clock alone
	noProbe bool             // receiver.Config.NoDuplicateProbe
	secrets map[string]string

	mu      sync.Mutex
	logs    bytes.Buffer
	metrics bytes.Buffer
}

type envOption func(*envConfig)

type envConfig struct {
	clientOpts []func(*dynamodb.Options)
	sources    string            // the sources file; testSourcesJSON when empty
	secrets    map[string]string // more env variables its secrets resolve from
	noProbe    bool
}

// withSources runs the env on another sources file, whose env secrets resolve from secrets.
func withSources(file string, secrets map[string]string) envOption {
	return func(c *envConfig) { c.sources, c.secrets = file, secrets }
}

// withoutProbe turns the receiver's duplicate probe off.
func withoutProbe() envOption { return func(c *envConfig) { c.noProbe = true } }

func withClient(opt func(*dynamodb.Options)) envOption {
	return func(c *envConfig) { c.clientOpts = append(c.clientOpts, opt) }
}

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	var cfg envConfig
	for _, o := range opts {
		o(&cfg)
	}
	admin := awstest.Client(t)
	e := &env{t: t, client: admin, table: awstest.Table(t, admin), secrets: map[string]string{}, noProbe: cfg.noProbe}
	for k, v := range testSecrets {
		e.secrets[k] = v
	}
	for k, v := range cfg.secrets {
		e.secrets[k] = v
	}
	if cfg.sources == "" {
		cfg.sources = testSourcesJSON
	}
	file, err := sources.Parse([]byte(cfg.sources))
	if err != nil {
		t.Fatal(err)
	}
	e.file = file
	client := admin
	if len(cfg.clientOpts) > 0 {
		client = awstest.Client(t, cfg.clientOpts...)
	}
	// The store's clock runs from the real time, not the fixtures' signing time: claims must
	// expire in the future, or the engine's TTL sweeper (MiniStack's runs every minute, on real
	// time) deletes them in the middle of a test.
	e.counter = awstest.NewCounter(client)
	store, err := dedup.New(e.counter, dedup.Config{Table: e.table, Sources: file.Retentions(), Now: e.storeClock})
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	e.handler = e.handlerWith(nil)
	return e
}

// secretsStore resolves the sources' secrets from the env's variables, re-reading on every
// refresh.
func (e *env) secretsStore() *sources.Secrets {
	secrets, err := sources.NewSecrets(context.Background(), e.file, &sources.Resolver{Getenv: e.getenv}, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return secrets
}

// handlerWith builds the handler with the reference planners plus whatever more registers.
func (e *env) handlerWith(more func(*receiver.Planners)) *receiver.Handler {
	planners := receiver.NewPlanners()
	for _, name := range e.file.Names() {
		orders.Register(planners, name)
	}
	if more != nil {
		more(planners)
	}
	h, err := receiver.New(receiver.Config{
		Sources:  e.file,
		Secrets:  e.secretsStore(),
		Store:    e.store,
		Planners: planners,
		Logger:   slog.New(slog.NewJSONHandler(lockedWriter{&e.mu, &e.logs}, nil)),
		Metrics:  lockedWriter{&e.mu, &e.metrics},
		Now:      e.clock,

		NoDuplicateProbe: e.noProbe,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// clock is the signature clock: the fixtures' signing time, moved on by advance.
func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fixtureTime.Add(e.offset)
}

// storeClock is the claims' clock: the real time, moved on by advance.
func (e *env) storeClock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Now().Add(e.offset + e.ahead)
}

func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	e.offset += d
	e.mu.Unlock()
}

func (e *env) getenv(k string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.secrets[k]
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// post sends req through the handler and fails the test on a Go error (the handler never
// returns one: every failure is an HTTP status).
func (e *env) post(req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	resp, err := e.handler.Handle(context.Background(), req)
	if err != nil {
		e.t.Fatalf("Handle returned an error: %v", err)
	}
	return resp
}

// items returns every item in the table.
func (e *env) items() []map[string]types.AttributeValue {
	return awstest.Items(e.t, e.client, e.table)
}

func (e *env) countPrefix(prefix string) int {
	n := 0
	for _, it := range e.items() {
		if strings.HasPrefix(it["pk"].(*types.AttributeValueMemberS).Value, prefix) {
			n++
		}
	}
	return n
}

// request builds an API Gateway v2 request for source with body and headers, signed with
// the source's scheme at the handler's current time.
func (e *env) request(source string, body string, hdr http.Header, id string) events.APIGatewayV2HTTPRequest {
	e.t.Helper()
	conf := e.file.Sources[source]
	scheme, err := conf.WebhookScheme()
	if err != nil {
		e.t.Fatal(err)
	}
	if hdr == nil {
		hdr = http.Header{}
	}
	secret := e.getenv(conf.Secrets[0].Env)
	if err := scheme.Sign(hdr, []byte(body), secret, id, e.clock()); err != nil {
		e.t.Fatal(err)
	}
	return apigw(source, body, hdr)
}

// apigw shapes a request the way API Gateway's HTTP API hands it to Lambda (payload v2):
// lower-cased header names, the stack's route for the source (no path parameters), the body as
// a string.
func apigw(source, body string, hdr http.Header) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{"content-type": "application/json", "host": "abc123.execute-api.eu-west-1.amazonaws.com"}
	for k, v := range hdr {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "POST /hooks/" + source, // the stack's route for the source
		RawPath:  "/hooks/" + source,
		Headers:  headers,
		Body:     body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:  "POST /hooks/" + source,
			Stage:     "$default",
			RequestID: fmt.Sprintf("req-%d", time.Now().UnixNano()),
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/hooks/" + source, Protocol: "HTTP/1.1"},
		},
	}
}

func orderBody(id, order string) string {
	return `{"id":"` + id + `","type":"order.paid","timestamp":"2026-08-25T09:14:03Z","data":{"order_id":"` + order + `","customer_email":"ada@example.com"}}`
}

func decode(t *testing.T, resp events.APIGatewayV2HTTPResponse) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &m); err != nil {
		t.Fatalf("response body %q is not JSON: %v", resp.Body, err)
	}
	return m
}
