// Package receivertest is a test kit for oncehook applications, in the manner of
// net/http/httptest: it builds real, signed API Gateway requests exactly as a source's
// provider sends them, and runs them through the real receiver with a recorder in place of
// DynamoDB, so a planner's test sees the plan the receiver would commit.
//
//	f, _ := sources.Load("sources.json")
//	h, rec, _ := receivertest.NewHandler(f, map[string]string{"stripe": "whsec_test"}, myapp.Register,
//		receivertest.WithExecutors(myapp.Executors()))
//	req, _ := receivertest.Request(f, "stripe", "whsec_test", body)
//	resp, _ := receivertest.Deliver(ctx, h, req) // resp.Outcome: Accepted, Duplicate, Refused...
//	plan := rec.Last().Plan // its effects' keys, items and conditions, its intents
//
// The kit refuses what production refuses, with the same answer and typed error: the Recorder
// checks every commit with a real dedup.Store (dedup.Store.Check), and the handler is the real
// receiver configured as the launched one (launch.ReceiverConfig).
//
// For a public-key source (discord, sendgrid), the secret given to Request and NewHandler is
// the private key whose public key the sources file lists.
package receivertest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/launch"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

// Option adjusts a Request.
type Option func(*options)

type options struct {
	id, eventType, deliveryID, scope string
	at                               time.Time
	headers                          http.Header
	base64                           bool
	url                              string // what HTTPRequest sends to, for a URL-signing source
	query                            string // the raw query string the request is sent with
}

// WithQuery sends the request with the raw query string q (no "?"), which a URL-signing scheme
// (Twilio, Square) signs.
func WithQuery(q string) Option { return func(o *options) { o.query = q } }

// WithEventID sets the event id where the source reads it from a header (GitHub's
// X-GitHub-Delivery); an id read from the body is the body's. Default: a fresh id.
func WithEventID(id string) Option { return func(o *options) { o.id = id } }

// WithEventType sets the event type where the source reads it from a header (X-GitHub-Event,
// X-Shopify-Topic). A type read from the body is the body's.
func WithEventType(t string) Option { return func(o *options) { o.eventType = t } }

// WithDeliveryID sets the delivery id where the source reads it from a header.
func WithDeliveryID(id string) Option { return func(o *options) { o.deliveryID = id } }

// WithScope sets the header that scopes the id (GitHub's X-GitHub-Hook-ID). Default "1".
func WithScope(v string) Option { return func(o *options) { o.scope = v } }

// WithTime signs the request at t (default: now), for schemes that sign a timestamp.
func WithTime(t time.Time) Option { return func(o *options) { o.at = t } }

// WithHeader adds a header as the provider would send it.
func WithHeader(name, value string) Option {
	return func(o *options) { o.headers.Add(name, value) }
}

// Base64 sends the body base64-encoded, as API Gateway does for binary media types.
func Base64() Option { return func(o *options) { o.base64 = true } }

// providerHeaders are the headers each provider sends besides the ones the sources file locates.
var providerHeaders = map[string]http.Header{
	webhook.GitHub:           {"User-Agent": {"GitHub-Hookshot/044aadd"}, "X-Github-Hook-Installation-Target-Type": {"repository"}},
	webhook.Shopify:          {"User-Agent": {"Shopify-Captain-Hook"}, "X-Shopify-Api-Version": {"2026-07"}, "X-Shopify-Shop-Domain": {"example.myshopify.com"}},
	webhook.Stripe:           {"User-Agent": {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"}},
	webhook.StandardWebhooks: {"User-Agent": {"Svix-Webhooks/1.76.1"}},
	webhook.Svix:             {"User-Agent": {"Svix-Webhooks/1.76.1"}},
	webhook.Slack:            {"User-Agent": {"Slackbot 1.0 (+https://api.slack.com/robots)"}},
	webhook.Paddle:           {"User-Agent": {"Paddle"}},
	webhook.PagerDuty:        {"User-Agent": {"PagerDuty-Webhook/V3.0"}},
	webhook.Linear:           {"User-Agent": {"Linear-Webhook"}},
	webhook.Twitch:           {"User-Agent": {"Twitch-Eventsub-Webhook"}, "Twitch-Eventsub-Message-Type": {"notification"}},
	webhook.Zoom:             {"User-Agent": {"Zoom Marketplace/1.0a"}},
	webhook.Intercom:         {"User-Agent": {"Intercom-Webhooks-Client/1.0"}},
	webhook.Twilio:           {"User-Agent": {"TwilioProxy/1.1"}},
	webhook.Square:           {"User-Agent": {"Square Connect v2"}},
	webhook.Discord:          {"User-Agent": {"Discord-Webhook/1.0 (+https://discord.com)"}},
	webhook.SendGrid:         {"User-Agent": {"SendGrid Event API"}},
}

// Host is the host of the API Gateway endpoint Request's requests are addressed to; a
// URL-signing source without a url is signed over https://Host/hooks/<source>.
const Host = "abc123.execute-api.eu-west-1.amazonaws.com"

var counter atomic.Int64

func freshID(prefix string) string {
	return fmt.Sprintf("%s%d_%d", prefix, time.Now().UnixNano(), counter.Add(1))
}

// Request builds the API Gateway HTTP API (payload 2.0) request source's provider would send
// with body: signed with secret by the source's scheme, the located headers filled (ids fresh
// unless given), and the provider's usual headers, lower-cased as API Gateway hands them over.
func Request(f *sources.File, source, secret string, body []byte, opts ...Option) (events.APIGatewayV2HTTPRequest, error) {
	src := f.Sources[source]
	if src == nil {
		return events.APIGatewayV2HTTPRequest{}, fmt.Errorf("receivertest: no source %q in the sources file", source)
	}
	o := options{at: time.Now(), headers: http.Header{}, scope: "1"}
	for _, opt := range opts {
		opt(&o)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if src.Body != sources.BodyJSON && src.Body != "" {
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range providerHeaders[src.Scheme] {
		h[k] = append([]string(nil), v...)
	}
	setLocated := func(l *sources.Locator, value string) {
		if l == nil || l.Header == "" {
			return
		}
		h.Set(l.Header, value)
		if l.ScopeHeader != "" {
			h.Set(l.ScopeHeader, o.scope)
		}
	}
	id := o.id
	if id == "" {
		id = freshID("evt_test_")
	}
	delivery := o.deliveryID
	if delivery == "" && src.DeliveryID != nil && src.EventID != nil && src.DeliveryID.Header == src.EventID.Header {
		delivery = id // GitHub: the delivery GUID is the id
	}
	if delivery == "" {
		delivery = freshID("dlv_test_")
	}
	setLocated(src.DeliveryID, delivery)
	setLocated(src.EventID, id)
	if o.eventType != "" {
		setLocated(src.EventType, o.eventType)
	} else if src.EventType != nil && src.EventType.Header != "" {
		return events.APIGatewayV2HTTPRequest{}, errors.New("receivertest: source " + source + " reads its event type from " + src.EventType.Header + ": give WithEventType")
	}
	if src.OccurredAt != nil && src.OccurredAt.Header != "" && h.Get(src.OccurredAt.Header) == "" {
		h.Set(src.OccurredAt.Header, o.at.UTC().Format(time.RFC3339))
	}
	maps.Copy(h, o.headers)
	scheme, err := src.WebhookScheme()
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	path := receiver.Path(source) // the stack's route for the source: no path parameters
	if u, ok := scheme.(webhook.URLVerifier); ok {
		url := cmp.Or(src.URL, o.url, "https://"+Host+path)
		if o.query != "" {
			url += "?" + o.query
		}
		err = u.SignURL(url, h, body, secret, id, o.at)
	} else {
		err = scheme.Sign(h, body, secret, id, o.at)
	}
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	headers := map[string]string{"host": Host, "content-length": fmt.Sprint(len(body))}
	for k, v := range h {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	req := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       "POST " + path,
		RawPath:        path,
		RawQueryString: o.query,
		Headers:        headers,
		Body:           string(body),
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: Host,
			RouteKey:   "POST " + path,
			Stage:      "$default",
			RequestID:  freshID("req_"),
			TimeEpoch:  o.at.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: http.MethodPost, Path: path, Protocol: "HTTP/1.1", SourceIP: "192.0.2.44", UserAgent: h.Get("User-Agent"),
			},
		},
	}
	if o.base64 {
		req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	return req, nil
}

// HTTPRequest is Request as a *http.Request to url (a server around receiver.Handler.ServeHTTP,
// a deployed stack); a URL-signing source without a url of its own is signed over url.
func HTTPRequest(f *sources.File, source, secret, url string, body []byte, opts ...Option) (*http.Request, error) {
	base, query, _ := strings.Cut(url, "?")
	r, err := Request(f, source, secret, body, append(opts, func(o *options) { o.url, o.query = base, query })...)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range r.Headers {
		if k != "host" && k != "content-length" {
			req.Header.Set(k, v)
		}
	}
	return req, nil
}

// Committed is one delivery the receiver committed to a Recorder.
type Committed struct {
	Event dedup.Event
	Plan  dedup.Plan
}

// Recorder stands in for the dedup store: it records what the receiver commits and answers
// accepted the first time, duplicate after. It refuses what the store refuses, with the
// store's own error: a real dedup.Store, configured from the sources file, checks every commit
// without a call (dedup.Store.Check).
type Recorder struct {
	file  *sources.File
	store *dedup.Store
	err   error // the store's configuration error, returned by every Commit
	mu    sync.Mutex
	all   []Committed
	seen  map[string]bool
}

// NewRecorder records commits for the sources of f.
func NewRecorder(f *sources.File) *Recorder {
	r := &Recorder{file: f, seen: map[string]bool{}}
	// The same configuration launch.Load gives the store; the table name is never sent.
	r.store, r.err = dedup.New(noAPI{}, dedup.Config{Table: "receivertest", Sources: f.Retentions(), Tables: f.DedupTables()})
	return r
}

// noAPI is the DynamoDB API of the Recorder's store, which only checks: it is never called.
type noAPI struct{ dedup.API }

// Commit records the plan of an event not seen before, after the store's own checks.
func (r *Recorder) Commit(_ context.Context, ev dedup.Event, plan dedup.Plan) (dedup.Result, error) {
	if r.err != nil {
		return dedup.Result{}, r.err
	}
	if err := r.store.Check(ev, plan); err != nil {
		return dedup.Result{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.record(ev, plan), nil
}

// CommitBatch records a batch (receiver.BatchCommitter) as dedup.Store.CommitBatch writes it:
// every event and plan is checked first (dedup.Store.CheckBatch), and one the store refuses
// refuses the whole batch, nothing recorded, with the store's own error; then each is recorded
// as Commit would, a repeated id (earlier in the batch or before) a duplicate.
func (r *Recorder) CommitBatch(_ context.Context, evs []dedup.Event, plans []dedup.Plan) ([]dedup.Result, int, error) {
	if r.err != nil {
		return nil, 0, r.err
	}
	if err := r.store.CheckBatch(evs, plans); err != nil {
		return nil, 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	results, calls := make([]dedup.Result, len(evs)), 0
	for i := range evs {
		results[i] = r.record(evs[i], plans[i])
		calls += results[i].Calls
	}
	return results, calls, nil
}

// record records a checked event's plan unless its claim is taken; r.mu is held.
func (r *Recorder) record(ev dedup.Event, plan dedup.Plan) dedup.Result {
	k := dedup.ClaimKey(ev.Source, ev.ID)
	if r.seen[k] {
		return dedup.Result{Outcome: dedup.OutcomeDuplicate, Calls: 1}
	}
	r.seen[k] = true
	r.all = append(r.all, Committed{Event: ev, Plan: plan})
	return dedup.Result{Outcome: dedup.OutcomeAccepted, Calls: 1}
}

// Condition returns e's condition as the launched receiver's store sends it to DynamoDB
// (dedup.Store.Condition), or the error the store refused the configuration with.
func (r *Recorder) Condition(e dedup.Effect) (expr string, names map[string]string, values map[string]types.AttributeValue, err error) {
	if r.err != nil {
		return "", nil, nil, r.err
	}
	return r.store.Condition(e)
}

// Claimed answers the event as a duplicate when it was committed.
func (r *Recorder) Claimed(_ context.Context, ev dedup.Event) (dedup.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[dedup.ClaimKey(ev.Source, ev.ID)] {
		return dedup.Result{Outcome: dedup.OutcomeDuplicate, Calls: 1}, nil
	}
	return dedup.Result{}, nil
}

// ClaimedBatch answers each event as Claimed does (receiver.BatchClaimReader), in the calls
// the store makes: one per 100 distinct claims.
func (r *Recorder) ClaimedBatch(ctx context.Context, evs []dedup.Event) ([]dedup.Result, int, error) {
	results, claims := make([]dedup.Result, len(evs)), map[string]bool{}
	for i, ev := range evs {
		results[i], _ = r.Claimed(ctx, ev)
		results[i].Calls, claims[dedup.ClaimKey(ev.Source, ev.ID)] = 0, true
	}
	return results, (len(claims) + 99) / 100, nil
}

// Retention is the source's retention, from the sources file.
func (r *Recorder) Retention(source string) (dedup.Retention, bool) {
	if s := r.file.Sources[source]; s != nil {
		return s.Retention(), true
	}
	return dedup.Retention{}, false
}

// All returns every committed delivery, in order.
func (r *Recorder) All() []Committed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

// Last returns the last committed delivery (zero when there is none).
func (r *Recorder) Last() Committed {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.all) == 0 {
		return Committed{}
	}
	return r.all[len(r.all)-1]
}

// staticSecrets gives each source its secrets, never refreshed.
type staticSecrets map[string][]string

func (s staticSecrets) Get(source string) []string                    { return s[source] }
func (s staticSecrets) Refresh(context.Context, string) (bool, error) { return false, nil }

// A HandlerOption adjusts NewHandler.
type HandlerOption func(*handlerOptions)

type handlerOptions struct {
	settings deployment.Settings
	err      error
}

// WithExecutors gives the handler the targets of the application's own executors, besides the
// sources file's: a plan naming a target neither serves is refused, as when launched
// (receiver.UnknownTargetError). NewHandler refuses executors the deployment refuses
// (outbox.Bounds).
func WithExecutors(executors map[string]outbox.Executor) HandlerOption {
	return func(o *handlerOptions) {
		if _, err := outbox.Bounds(executors); err != nil && o.err == nil {
			o.err = err
		}
		for name := range executors {
			o.settings.Targets = append(o.settings.Targets, name)
		}
	}
}

// WithTargets is WithExecutors by the targets' names (ONCEHOOK_TARGETS).
func WithTargets(names ...string) HandlerOption {
	return func(o *handlerOptions) { o.settings.Targets = append(o.settings.Targets, names...) }
}

// WithSettings builds the handler from a deployment's settings, as the launched receiver
// does; NewHandler refuses settings the functions' start refuses. Targets from WithExecutors
// and WithTargets are added to the settings'.
func WithSettings(s deployment.Settings) HandlerOption {
	return func(o *handlerOptions) {
		own := o.settings.Targets
		o.settings = s
		o.settings.Targets = append(slices.Clone(s.Targets), own...)
	}
}

// NewHandler builds the real receiver over a Recorder, with the planners register adds and
// one secret per source (every source of f needs one). Its intent targets are the sources
// file's and WithExecutors'; with neither, any target is accepted, as in production.
func NewHandler(f *sources.File, secrets map[string]string, register func(*receiver.Planners), opts ...HandlerOption) (*receiver.Handler, *Recorder, error) {
	var o handlerOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.err == nil {
		o.err = o.settings.Check()
	}
	if o.err != nil {
		return nil, nil, o.err
	}
	rec := NewRecorder(f)
	if rec.err != nil {
		return nil, nil, rec.err
	}
	s := staticSecrets{}
	for _, name := range f.Names() {
		secret, ok := secrets[name]
		if !ok {
			return nil, nil, fmt.Errorf("receivertest: no secret for source %q", name)
		}
		s[name] = []string{secret}
		if keys := f.Sources[name].PublicKeys; len(keys) > 0 {
			s[name] = keys // secret is the private key Request signs with
		}
	}
	planners := receiver.NewPlanners()
	if register != nil {
		register(planners)
	}
	cfg := launch.ReceiverConfig(o.settings, f)
	cfg.Secrets, cfg.Store, cfg.Planners = s, rec, planners
	h, err := receiver.New(cfg)
	return h, rec, err
}

// Outcome is what the receiver's answer says became of a delivery.
type Outcome int

const (
	// Accepted: the event was claimed now, its plan committed.
	Accepted Outcome = iota + 1
	// Duplicate: the event was claimed before; nothing was written.
	Duplicate
	// Ignored: answered 200 without a claim (an unknown type the source ignores).
	Ignored
	// Answered: a 2xx that is the provider's handshake (a URL verification, a ping's reply).
	Answered
	// Refused: any other status; nothing was written, and Reason says why.
	Refused
)

func (o Outcome) String() string {
	if o >= Accepted && o <= Refused {
		return [...]string{"accepted", "duplicate", "ignored", "answered", "refused"}[o-Accepted]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Response is the receiver's answer, read.
type Response struct {
	Outcome Outcome
	Status  int
	Reason  string // the error the receiver answered with ("" unless Refused)
	Field   string // the field it names, when it names one
}

// Read reads the receiver's answer to one delivery.
func Read(resp events.APIGatewayV2HTTPResponse) Response {
	r := Response{Status: resp.StatusCode}
	var body struct {
		Received  bool   `json:"received"`
		Duplicate bool   `json:"duplicate"`
		Ignored   bool   `json:"ignored"`
		Error     string `json:"error"`
		Field     string `json:"field"`
	}
	_ = json.Unmarshal([]byte(resp.Body), &body) // a handshake's body may be anything
	switch {
	case resp.StatusCode == http.StatusNoContent && resp.Body == "":
		r.Outcome = Accepted // Discord's answer to an accepted event
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		r.Outcome, r.Reason, r.Field = Refused, body.Error, body.Field
		if r.Reason == "" {
			r.Reason = resp.Body
		}
	case body.Received && body.Ignored:
		r.Outcome = Ignored
	case body.Received && body.Duplicate:
		r.Outcome = Duplicate
	case body.Received:
		r.Outcome = Accepted
	default:
		r.Outcome = Answered
	}
	return r
}

// Deliver runs req through h and reads the answer.
func Deliver(ctx context.Context, h *receiver.Handler, req events.APIGatewayV2HTTPRequest) (Response, error) {
	resp, err := h.Handle(ctx, req)
	return Read(resp), err
}
