// Package receiver is the webhook receiver behind POST /hooks/{source}: it verifies the
// delivery's signature over the raw body, locates the provider's event id and type, asks the
// application's planner what the event does, and commits claim, effects and outbox in one
// DynamoDB write through the dedup core.
//
// Every delivery that leaves the event durably claimed gets 200, duplicates included: a
// provider treats anything else as a failed delivery and sends it again. The statuses:
//
//	200 {"received":true,"duplicate":false|true}  accepted, duplicate, or absorbed
//	400 malformed body, missing or invalid event id / type (the message names the field), a
//	    signed event time older than the source's retention, or one header name sent twice in
//	    different case (named; API Gateway v2 lower-cases names and joins repeats, so only a
//	    REST API's event or a hand-built one can: which to believe would be map order's choice)
//	401 bad or missing signature, timestamp outside tolerance (nothing is claimed)
//	404 unknown source      405 not a POST      413 body over the source's limit
//	503 + Retry-After        DynamoDB throttled or failed: deliver again later
//	500 anything else (a misconfiguration); the provider retries
//
// Handle takes the HTTP API's payload v2 (and Lambda function URLs'); HandleV1 adapts a REST
// API's payload v1 to it.
package receiver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

// Committer is the dedup core, as the receiver uses it. *dedup.Store satisfies it.
type Committer interface {
	Commit(ctx context.Context, ev dedup.Event, plan dedup.Plan) (dedup.Result, error)
	// Claimed reports whether an unexpired claim holds the event id.
	Claimed(ctx context.Context, source, eventID string) (bool, error)
	// Retention reports the source's retention, and whether the store knows the source.
	Retention(source string) (dedup.Retention, bool)
}

// Secrets gives each source's current signing secrets. *sources.Secrets satisfies it.
type Secrets interface {
	Get(source string) []string
	// Refresh re-reads a source's secrets (rate-limited by the implementation) and reports
	// whether they changed: called after a signature failure, so a rotation is picked up.
	Refresh(ctx context.Context, source string) (bool, error)
}

// StaleSecrets is Secrets that age: RefreshStale re-reads a source's secrets once they are
// older than the implementation's maximum age, so a secret revoked at its store stops
// verifying within that time. The receiver calls it before verifying each delivery; an error
// (the old values kept) is counted as SecretRefreshFailed. *sources.Secrets satisfies it.
type StaleSecrets interface {
	RefreshStale(ctx context.Context, source string) error
}

// Config wires a Handler.
type Config struct {
	Sources  *sources.File
	Secrets  Secrets
	Store    Committer
	Planners *Planners
	// Logger receives one structured line per delivery; slog's JSON handler on stdout in Lambda.
	Logger *slog.Logger
	// Metrics receives one CloudWatch EMF document per delivery; stdout in Lambda.
	Metrics io.Writer
	// Namespace is the metrics' CloudWatch namespace; Namespace ("oncehook") when empty.
	Namespace string
	// Now is the clock for signature timestamps; time.Now when nil.
	Now func() time.Time
	// TrustedHosts are the hosts ServeHTTP may take a URL-signing source's URL from (the Host
	// header, when it names one of them), for a source that sets no url. Unused by Handle,
	// which takes the domain API Gateway served the request on.
	TrustedHosts []string
	// Targets, when set, are the intent targets the deployment's outbox serves (the sources
	// file's targets and the application's own executors'). A plan whose intent names another
	// target is refused before anything is written (500, naming it), instead of parking the
	// intent later for want of an executor.
	Targets []string
	// TracerProvider, when set, gives each delivery an OpenTelemetry trace: a server span
	// (SpanDelivery) with a span for each step (verify, plan, commit), and the commit's span
	// context stored on the claim, where the outbox's spans continue it. The trace is the
	// delivery's own: a provider's traceparent is recorded as a link, never as the parent.
	// Nil is tracing off, at no cost (no span is started). launch sets it when
	// OTEL_TRACES_EXPORTER is otlp; otel.GetTracerProvider() is the global one.
	TracerProvider trace.TracerProvider
}

// Handler answers webhook deliveries.
type Handler struct {
	sources   map[string]*source
	secrets   Secrets
	store     Committer
	log       *slog.Logger
	metrics   io.Writer
	now       func() time.Time
	targets   map[string]bool // nil: any target
	namespace string
	maxBody   int             // the largest body any source accepts, for ServeHTTP
	trusted   map[string]bool // Config.TrustedHosts, lower-cased
	names     []string        // the sources, sorted
	tracer    trace.Tracer    // the provider's, or a no-op one's (tracing off)
}

type source struct {
	name   string
	conf   *sources.Source
	scheme webhook.Scheme
	// signedURL is set for the schemes that sign the URL they call (Twilio, Square).
	signedURL webhook.URLVerifier
	read      *reader
	// guard is the source's replay guard (sources.ReplayGuard*): whether what the signature
	// covers is claimed with the event id (the signature does not cover the id), and whether
	// with the type; timeSigned refuses deliveries whose signed time is older than keep, the
	// retention.
	guard      string
	timeSigned bool
	keep       time.Duration
	// answerWithin is how long after the request arrived the commit must be done: the
	// provider's delivery timeout less a second for the answer to travel.
	answerWithin time.Duration
	// noContent answers accepted deliveries with 204 and no body, which Discord requires of
	// webhook events.
	noContent bool
}

// New validates cfg and builds a Handler. Every source's scheme is built here, so a bad
// sources file stops the function at start rather than failing requests.
func New(cfg Config) (*Handler, error) {
	if cfg.Sources == nil || cfg.Secrets == nil || cfg.Store == nil {
		return nil, errors.New("receiver: Sources, Secrets and Store are required")
	}
	if err := cfg.Sources.Validate(); err != nil { // fills defaults for a File not built by Parse
		return nil, fmt.Errorf("receiver: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = io.Discard
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Planners.check(func(s string) bool { return cfg.Sources.Sources[s] != nil }); err != nil {
		return nil, err
	}
	h := &Handler{
		sources: make(map[string]*source, len(cfg.Sources.Sources)),
		secrets: cfg.Secrets,
		store:   cfg.Store,
		log:     cfg.Logger,
		metrics: cfg.Metrics,
		now:     cfg.Now,
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider() // tracing off: the same path, spans that record nothing
	}
	h.tracer = tp.Tracer(TracerName, trace.WithSchemaURL(semconv.SchemaURL))
	h.namespace = cfg.Namespace
	if h.namespace == "" {
		h.namespace = Namespace
	}
	h.names = cfg.Sources.Names()
	for _, host := range cfg.TrustedHosts {
		if host == "" || strings.ContainsAny(host, "/:@ ") {
			return nil, fmt.Errorf("receiver: TrustedHosts: %q is not a host name (no scheme, port or path)", host)
		}
		if h.trusted == nil {
			h.trusted = map[string]bool{}
		}
		h.trusted[strings.ToLower(host)] = true
	}
	if cfg.Targets != nil {
		h.targets = make(map[string]bool, len(cfg.Targets))
		for _, t := range cfg.Targets {
			h.targets[t] = true
		}
	}
	for _, name := range cfg.Sources.Names() {
		h.maxBody = max(h.maxBody, cfg.Sources.Sources[name].MaxBodyBytes)
		conf := cfg.Sources.Sources[name]
		opts := webhook.Options{Tolerance: time.Duration(conf.TimestampTolerance), URL: conf.URL}
		if conf.HMAC != nil {
			opts.Header, opts.Encoding, opts.Prefix = conf.HMAC.Header, conf.HMAC.Encoding, conf.HMAC.Prefix
		}
		scheme, err := webhook.New(conf.Scheme, opts)
		if err != nil {
			return nil, fmt.Errorf("receiver: sources.%s: %w", name, err)
		}
		if _, ok := cfg.Store.Retention(name); !ok {
			return nil, fmt.Errorf("receiver: source %q has no retention in the store: build both from one sources file", name)
		}
		if err := webhook.CheckSecrets(scheme, cfg.Secrets.Get(name)); err != nil {
			return nil, fmt.Errorf("receiver: sources.%s: %w", name, err)
		}
		read, err := newReader(conf, cfg.Planners.forSource(name))
		if err != nil {
			return nil, fmt.Errorf("receiver: sources.%s: %w", name, err)
		}
		ret, _ := cfg.Store.Retention(name)
		signedURL, _ := scheme.(webhook.URLVerifier)
		h.sources[name] = &source{name: name, conf: conf, scheme: scheme, signedURL: signedURL, read: read,
			guard: conf.ReplayGuard, timeSigned: conf.TimeSigned(), keep: ret.Effective(),
			answerWithin: time.Duration(conf.DeliveryTimeout) - time.Second, noContent: conf.Scheme == "discord"}
	}
	return h, nil
}

// Handle answers one API Gateway HTTP API (payload v2) or Lambda function URL request.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return h.serve(ctx, req, false), nil
}

// serve is Handle; untrustedHost says ServeHTTP left the domain out because the request's Host
// is not among Config.TrustedHosts.
func (h *Handler) serve(ctx context.Context, req events.APIGatewayV2HTTPRequest, untrustedHost bool) events.APIGatewayV2HTTPResponse {
	return h.respond(ctx, req, untrustedHost, nil)
}

// respond answers req as one delivery (its span, its log line, its metrics): by handle, or by
// refused, an answer ServeHTTP gave before the body could be read. (Not a func value: the
// delivery would escape to the heap on every request.)
func (h *Handler) respond(ctx context.Context, req events.APIGatewayV2HTTPRequest, untrustedHost bool, refused *events.APIGatewayV2HTTPResponse) events.APIGatewayV2HTTPResponse {
	start := time.Now()
	d := &delivery{requestID: boundedID(req.RequestContext.RequestID), source: "unknown", untrustedHost: untrustedHost}
	ctx, span := h.startDelivery(ctx, req)
	defer endPanicked(span)
	var resp events.APIGatewayV2HTTPResponse
	if refused != nil {
		if _, ok := h.sources[sourceName(req)]; ok {
			d.source = sourceName(req)
		}
		d.errKind, resp = "body", *refused
	} else {
		resp = h.handle(ctx, req, d)
	}
	if resp.StatusCode == http.StatusBadRequest {
		if src := h.sources[d.source]; src != nil && src.conf.Scheme == "slack" {
			// A body we refuse will be refused again: Slack stops retrying on this header
			// (api.slack.com/apis/events-api, "Retries").
			if resp.Headers == nil {
				resp.Headers = map[string]string{}
			}
			resp.Headers["X-Slack-No-Retry"] = "1"
		}
	}
	d.status = resp.StatusCode
	d.latency = time.Since(start)
	h.observe(ctx, d)
	endDelivery(span, d)
	return resp
}

// maxRequestIDLen bounds the request id logged: over ServeHTTP it is the sender's X-Request-Id,
// logged before anything is verified.
const maxRequestIDLen = 128

// boundedID is a request id fit to log: at most maxRequestIDLen bytes of printable ASCII, the
// rest cut and marked.
func boundedID(id string) string {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e || i == maxRequestIDLen {
			return id[:i] + "…"
		}
	}
	return id
}

// delivery is what one request did, for the log line and the metrics.
type delivery struct {
	requestID   string
	source      string
	event       dedup.Event
	knownType   bool
	status      int
	result      dedup.Result
	committed   bool
	err         error
	errKind     string // signature, bad_request, unavailable, internal, ...
	latency     time.Duration
	commitTime  time.Duration
	bodyBytes   int
	secretRetry bool
	batch       *batchResult // for a batch source's delivery

	droppedDeliveryID bool
	untrustedHost     bool  // over ServeHTTP, a Host not among Config.TrustedHosts
	secretRefreshErr  error // the secrets' re-read at their maximum age failed
}

func (h *Handler) handle(ctx context.Context, req events.APIGatewayV2HTTPRequest, d *delivery) events.APIGatewayV2HTTPResponse {
	start := time.Now()
	if m := req.RequestContext.HTTP.Method; m == http.MethodHead {
		// Intercom checks a new endpoint with a HEAD: answered for a known source, nothing read.
		if _, ok := h.sources[sourceName(req)]; ok {
			d.source, d.errKind = sourceName(req), "head"
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK}
		}
		d.errKind = "unknown_source"
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNotFound}
	}
	if m := req.RequestContext.HTTP.Method; m != "" && m != http.MethodPost {
		d.errKind = "method"
		r := reply(http.StatusMethodNotAllowed, "method "+m+" is not allowed; deliveries are POSTed", "")
		r.Headers["Allow"] = http.MethodPost
		return r
	}
	name := sourceName(req)
	src, ok := h.sources[name]
	if !ok {
		d.errKind = "unknown_source"
		return reply(http.StatusNotFound, "unknown source", "source")
	}
	d.source = name

	raw, resp, ok := readBody(req, src.conf.MaxBodyBytes)
	if !ok {
		d.errKind = "body"
		return resp
	}
	d.bodyBytes = len(raw)
	text := "" // the body as a string, when API Gateway sent it as one: values read from it share it
	if !req.IsBase64Encoded {
		text = req.Body
	}

	hdr, twice := header(req.Headers)
	if twice != "" {
		d.errKind = "bad_request"
		return reply(http.StatusBadRequest, "header "+twice+" is sent twice, in different case; send it once", twice)
	}
	now := h.now()
	var signedURL string
	if src.signedURL != nil {
		u, err := src.url(req)
		if err != nil && d.untrustedHost {
			// Sent to a host this deployment does not answer for: not a URL the provider signed.
			d.err, d.errKind = err, "signature"
			return reply(http.StatusUnauthorized, "signature verification failed", "")
		}
		if err != nil {
			d.err, d.errKind = err, "internal"
			return reply(http.StatusInternalServerError, "internal error", "")
		}
		signedURL = u
	}
	if stale, ok := h.secrets.(StaleSecrets); ok {
		if err := stale.RefreshStale(ctx, name); err != nil {
			// The values held are kept: a store that cannot be read must not stop deliveries.
			d.secretRefreshErr = err
		}
	}
	verify := func() error {
		if src.signedURL != nil {
			return src.signedURL.VerifyURL(signedURL, hdr, raw, h.secrets.Get(name), now)
		}
		return src.scheme.Verify(hdr, raw, h.secrets.Get(name), now)
	}
	_, verifying := h.startStep(ctx, SpanVerify, trace.SpanKindInternal)
	defer verifying.endPanicked() // a secrets store's panic (Refresh) too
	err := verify()
	if err != nil {
		// The secret may have been rotated since this instance started: re-read it (the
		// refresh is rate-limited) and try once more before refusing.
		if changed, rerr := h.secrets.Refresh(ctx, name); rerr == nil && changed {
			d.secretRetry = true
			err = verify()
		}
		if errors.Is(err, webhook.ErrInvalid) {
			// A secret we hold is unusable (empty, not base64): our fault, not the sender's.
			verifying.end(err)
			d.err, d.errKind = err, "internal"
			return reply(http.StatusInternalServerError, "internal error", "")
		}
		if err != nil {
			verifying.end(err)
			d.err, d.errKind = err, "signature"
			return reply(http.StatusUnauthorized, "signature verification failed", "")
		}
	}
	verifying.end(nil)

	if hc, ok := src.scheme.(webhook.HeaderChecker); ok {
		// What the receiver acts on comes from the signed body; an unsigned header that says
		// otherwise is refused rather than believed or ignored.
		if err := hc.CheckHeaders(hdr, raw); err != nil {
			d.err, d.errKind = err, "bad_request"
			var me *webhook.HeaderMismatchError
			errors.As(err, &me)
			return reply(http.StatusBadRequest, err.Error(), me.Header)
		}
	}
	signed := raw // what the signature covers, before a form:<key> source's payload replaces raw

	if c, ok := src.scheme.(webhook.Challenger); ok {
		// A provider proving the endpoint (Slack's url_verification, Twitch's callback
		// verification): signed, answered with its challenge, nothing claimed.
		if answer, ctype, ok := c.Challenge(hdr, raw, h.secrets.Get(name)); ok {
			d.errKind = "challenge"
			if ctype == "" && len(answer) == 0 {
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNoContent}
			}
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: map[string]string{"Content-Type": ctype}, Body: string(answer)}
		}
	}

	if src.conf.Batch {
		return h.handleBatch(ctx, d, src, hdr, raw, now, start)
	}
	var at [maxPaths]span // where the values read from the body lie; on the stack
	var ev dedup.Event
	raw, text, form, err := src.read.payload(raw, text)
	if err == nil {
		ev, err = src.read.extract(name, hdr, raw, text, at[:], form)
	}
	if resp, ok := h.admit(d, src, &ev, err, now, ""); !ok {
		return resp
	}
	if err := src.guardContent(&ev, signedURL, signed); err != nil {
		d.err, d.errKind = err, "bad_request"
		return reply(http.StatusBadRequest, "body cannot be read as the signature covers it", "body")
	}
	d.event = ev

	pctx, planning := h.startStep(ctx, SpanPlan, trace.SpanKindInternal)
	defer planning.endPanicked()
	plan, known, err := src.read.plan(pctx, ev, text, at[:], form)
	if planning.recording() {
		planning.end(err, AttrEventType.String(ev.Type), AttrEffects.Int(len(plan.Effects)), AttrIntents.Int(len(plan.Intents)))
	}
	d.knownType = known
	if err != nil {
		return h.planError(ctx, d, err)
	}
	if !known && src.conf.UnknownTypes == sources.UnknownTypesIgnore {
		// Not claimed: a redelivery after a planner for this type ships will run it.
		d.errKind = "ignored"
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: okHeaders, Body: `{"received":true,"ignored":true}`}
	}
	if h.targets != nil {
		for _, in := range plan.Intents {
			if !h.targets[in.Target] {
				return h.planError(ctx, d, &UnknownTargetError{Source: ev.Source, EventType: ev.Type, Intent: in.Name, Target: in.Target})
			}
		}
	}

	commitStart := time.Now()
	// Answer 503 before the provider gives up: a slow write past its timeout would be taken
	// for a failure anyway, and retried.
	cctx, cancel := context.WithDeadline(ctx, start.Add(src.answerWithin))
	cctx, committing := h.startStep(cctx, SpanCommit, trace.SpanKindInternal) // its context is the claim's
	defer committing.endPanicked()                                            // a store's panic
	res, err := h.store.Commit(cctx, ev, plan)
	if committing.recording() {
		committing.end(err, commitAttrs(&plan, res)...)
	}
	cancel()
	d.commitTime = time.Since(commitStart)
	if err != nil {
		if errors.Is(err, dedup.ErrInvalid) || errors.Is(err, dedup.ErrLimit) {
			// The event is valid (checked above), so the plan is at fault: see planError.
			return h.planError(ctx, d, err)
		}
		return h.commitError(d, err)
	}
	d.result, d.committed = res, true
	if src.noContent {
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNoContent}
	}
	if res.Outcome == dedup.OutcomeDuplicate || res.Outcome == dedup.OutcomeReplay {
		// A replay is answered as a duplicate: its body's event is durably accepted under its
		// first id, and a refusal would only make a provider (or an attacker) try again.
		return okDuplicate()
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: okHeaders, Body: `{"received":true,"duplicate":false}`}
}

// admit checks an event located in a verified delivery (err: why it could not be located) as
// every path does before planning it, and returns the refusal unless ok. at prefixes the fields
// named ("events[3]." in a batch).
func (h *Handler) admit(d *delivery, src *source, ev *dedup.Event, err error, now time.Time, at string) (resp events.APIGatewayV2HTTPResponse, ok bool) {
	if err != nil {
		d.err, d.errKind = err, "bad_request"
		var fe *fieldError
		if errors.As(err, &fe) {
			return reply(http.StatusBadRequest, at+err.Error(), at+fe.field), false
		}
		return reply(http.StatusBadRequest, at+err.Error(), ""), false
	}
	if dedup.ValidateDeliveryID(ev.DeliveryID) != nil {
		// Informational only: an unusable delivery id must not cost the event.
		ev.DeliveryID, d.droppedDeliveryID = "", true
	}
	ev.GuardBody = src.guard != sources.ReplayGuardOff
	// Checked here as well as in Commit, so the planner never sees an unusable event, and
	// before anything of the event is logged.
	if err := ev.Validate(); err != nil {
		var ie *dedup.InvalidError
		if at != "" && errors.As(err, &ie) {
			err = &dedup.InvalidError{Field: at + ie.Field, Reason: ie.Reason}
		}
		return h.commitError(d, err), false
	}
	if src.timeSigned && !ev.OccurredAt.IsZero() && now.Sub(ev.OccurredAt) > src.keep {
		// Past the retention the event's claim may be gone: a replay of this signed body
		// could not be told from a new event, so it is refused rather than run again.
		d.event, d.errKind = *ev, "too_old"
		return reply(http.StatusBadRequest, fmt.Sprintf("%soccurred_at %s is older than this source's retention (%s): it cannot be told from a replay",
			at, ev.OccurredAt.UTC().Format(time.RFC3339), sources.Duration(src.keep)), at+"occurred_at"), false
	}
	return resp, true
}

// url is the URL a URL-signing provider called: the source's configured url, else
// https://<the domain API Gateway served the request on><the raw path, stage included>, and
// then the request's own query string (signed: the provider appends to it, as Twilio's
// bodySHA256). Never the Host header, which the sender writes: a delivery captured for one
// deployment must not verify at another that shares the provider's account-wide key.
func (s *source) url(req events.APIGatewayV2HTTPRequest) (string, error) {
	u := s.conf.URL
	if u == "" {
		if req.RequestContext.DomainName == "" {
			return "", &NoSignedURLError{Source: s.name, Scheme: s.conf.Scheme}
		}
		u = "https://" + req.RequestContext.DomainName + req.RawPath
	}
	if req.RawQueryString != "" {
		u += "?" + req.RawQueryString
	}
	return u, nil
}

// NoSignedURLError is a delivery to a source whose scheme signs the URL it calls (twilio,
// square) when the receiver cannot know that URL: the source sets no url, and the request
// names no domain the receiver trusts (API Gateway's RequestContext.DomainName; over
// ServeHTTP, a Host in Config.TrustedHosts). It is answered 500: the configuration is at fault.
type NoSignedURLError struct {
	Source, Scheme string
}

func (e *NoSignedURLError) Error() string {
	return fmt.Sprintf("receiver: sources.%s: %s signs the URL it calls, and this request does not say which: set the source's url (the URL configured at %s), or over ServeHTTP list the host in Config.TrustedHosts", e.Source, e.Scheme, e.Scheme)
}

// guardContent sets what ev's body guard claims, when the source guards: what the signature
// covers, as the provider canonicalises it (signed, the raw body, for the schemes that sign
// it; Twilio's URL and sorted fields; Square's URL and body), with the type before it for
// "body+type". Left nil when that is the payload itself, which the store then hashes.
func (s *source) guardContent(ev *dedup.Event, signedURL string, signed []byte) error {
	if s.guard == sources.ReplayGuardOff {
		return nil
	}
	content := signed
	if s.signedURL != nil {
		c, err := webhook.SignedContent(s.scheme, signedURL, signed)
		if err != nil {
			return err
		}
		content = c
	}
	if s.guard == sources.ReplayGuardBodyAndType {
		// The type is unsigned: only one a planner is registered for keys the guard, so a
		// body is claimed at most once per planned type and once for all others, whatever
		// types a sender invents. A type never holds a NUL (dedup.Event.Validate): the two
		// parts cannot be confused.
		typ := ""
		if _, planned := s.read.planners[ev.Type]; planned {
			typ = ev.Type
		}
		content = append(append([]byte("type\x00"+typ), 0), content...)
	}
	if len(content) == len(ev.Payload) && (len(content) == 0 || &content[0] == &ev.Payload[0]) {
		return nil
	}
	ev.Guard = content
	return nil
}

// UnknownTargetError is a plan whose intent names a target the deployment's outbox does not
// serve (Config.Targets): the receiver refuses it, writing nothing, rather than leave an intent
// no executor will ever run.
type UnknownTargetError struct {
	Source, EventType, Intent, Target string
}

func (e *UnknownTargetError) Error() string {
	return fmt.Sprintf("receiver: the %s planner for %s planned intent %q for target %q, which no executor serves", e.EventType, e.Source, e.Intent, e.Target)
}

// okHeaders is shared by every 200: nothing writes to it (error replies get their own map).
var okHeaders = map[string]string{"Content-Type": "application/json"}

func okDuplicate() events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: okHeaders, Body: `{"received":true,"duplicate":true}`}
}

// planError answers a delivery that could not be planned or whose plan was refused. If the
// event was accepted before (the planner changed since, or the provider reused the id for a
// payload the planner now refuses), it is a duplicate and gets its 200 like any other; only a
// new event gets the error. This costs a read, on this path only.
func (h *Handler) planError(ctx context.Context, d *delivery, err error) events.APIGatewayV2HTTPResponse {
	d.err = err
	claimed, cerr := h.store.Claimed(ctx, d.event.Source, d.event.ID)
	if cerr == nil && claimed {
		d.result, d.committed = dedup.Result{Outcome: dedup.OutcomeDuplicate, Calls: 1}, true
		return okDuplicate()
	}
	var pe *PayloadError
	var ute *UnknownTargetError
	switch {
	case errors.As(err, &pe):
		d.errKind = "bad_request"
		return reply(http.StatusBadRequest, pe.Error(), pe.Field)
	case errors.As(err, &ute):
		// Ours to fix (a planner or the deployment's executors), and retried by the provider
		// once fixed; named, so that a test or a log says which intent and target.
		d.errKind = "planner"
		return reply(http.StatusInternalServerError, fmt.Sprintf("intent %q names target %q, which no executor serves", ute.Intent, ute.Target),
			"intents["+ute.Intent+"].target")
	case errors.Is(err, ErrBadPayload):
		d.errKind = "bad_request"
		return reply(http.StatusBadRequest, err.Error(), "")
	}
	// A planner failure or a plan the store refused (an effect without a key, over a
	// DynamoDB limit): ours to fix, and the provider's retry will find it fixed.
	d.errKind = "planner"
	return reply(http.StatusInternalServerError, "internal error", "")
}

// commitError maps the dedup core's typed errors to statuses. Nothing was written on any of
// these paths except, possibly, on ErrUnavailable, where the redelivery we ask for is safe.
func (h *Handler) commitError(d *delivery, err error) events.APIGatewayV2HTTPResponse {
	d.err = err
	var ie *dedup.InvalidError
	var ue *dedup.UnavailableError
	switch {
	case errors.As(err, &ie):
		d.errKind = "bad_request"
		return reply(http.StatusBadRequest, ie.Field+" "+ie.Reason, ie.Field)
	case errors.As(err, &ue):
		d.errKind = "unavailable"
		r := reply(http.StatusServiceUnavailable, "temporarily unavailable; deliver again later", "")
		r.Headers["Retry-After"] = strconv.Itoa(int((ue.RetryAfter + time.Second - 1) / time.Second))
		return r
	default:
		// A plan over a DynamoDB limit, a missing table, denied access: a 500 the provider
		// retries, and an error log line that names the cause for the operator.
		d.errKind = "internal"
		return reply(http.StatusInternalServerError, "internal error", "")
	}
}

// sourceName reads the source from the path: the stack's routes are one per source (POST
// /hooks/<name>, no path parameters), as is a function URL's; an application's own API may
// route POST /hooks/{source} instead.
func sourceName(req events.APIGatewayV2HTTPRequest) string {
	if s := req.PathParameters["source"]; s != "" {
		return s
	}
	p := strings.TrimSuffix(req.RawPath, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 && strings.HasSuffix(p[:i], "/hooks") {
		return p[i+1:]
	}
	return ""
}

// readBody returns the raw body, decoding base64 first when API Gateway encoded it: the
// signature is over the bytes the provider sent, never over a re-encoding.
func readBody(req events.APIGatewayV2HTTPRequest, limit int) ([]byte, events.APIGatewayV2HTTPResponse, bool) {
	tooLarge := func(n int) events.APIGatewayV2HTTPResponse {
		return reply(http.StatusRequestEntityTooLarge, fmt.Sprintf("body is %d bytes or more; this source accepts at most %d", n, limit), "body")
	}
	if !req.IsBase64Encoded {
		if len(req.Body) > limit {
			return nil, tooLarge(len(req.Body)), false
		}
		return []byte(req.Body), events.APIGatewayV2HTTPResponse{}, true
	}
	if n := base64.StdEncoding.DecodedLen(len(req.Body)); n > limit+2 {
		return nil, tooLarge(n - 2), false
	}
	raw, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, reply(http.StatusBadRequest, "body is marked base64-encoded but is not valid base64", "body"), false
	}
	if len(raw) > limit {
		return nil, tooLarge(len(raw)), false
	}
	return raw, events.APIGatewayV2HTTPResponse{}, true
}

// header turns API Gateway's lower-cased header map into an http.Header: one backing array
// for the values, and canonical names from a cache (the same dozen names arrive on every
// request, and canonicalizing a lower-case name allocates). A name the map holds twice in
// different case (a REST API's event, a hand-built one: API Gateway v2 lower-cases names and
// joins repeats) is returned as twice, the least such name, and no header: kept, either
// spelling would win by map order, and a signature is over one value, never over the two joined.
func header(m map[string]string) (h http.Header, twice string) {
	h = make(http.Header, len(m))
	vals := make([]string, 0, len(m))
	for k, v := range m {
		c := canonical(k)
		if _, seen := h[c]; seen && (twice == "" || c < twice) {
			twice = c
		}
		vals = append(vals, v)
		h[c] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if twice != "" {
		return nil, boundedID(twice)
	}
	return h, ""
}

var canonicalNames sync.Map // lower-case name -> canonical name, bounded by maxCanonicalNames

const maxCanonicalNames = 512

var canonicalCount atomic.Int32

func canonical(k string) string {
	if c, ok := canonicalNames.Load(k); ok {
		return c.(string)
	}
	c := textproto.CanonicalMIMEHeaderKey(k)
	if canonicalCount.Load() < maxCanonicalNames { // senders choose header names: bound the cache
		if _, loaded := canonicalNames.LoadOrStore(k, c); !loaded {
			canonicalCount.Add(1)
		}
	}
	return c
}

func jsonHeaders() map[string]string {
	return map[string]string{"Content-Type": "application/json"}
}

func reply(status int, msg, field string) events.APIGatewayV2HTTPResponse {
	body := struct {
		Error string `json:"error"`
		Field string `json:"field,omitempty"`
	}{msg, field}
	b, _ := json.Marshal(body)
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: jsonHeaders(), Body: string(b)}
}

// HandleV1 answers a REST API (payload format 1.0) request by translating it to the v2 shape:
// the same statuses and the same work. Multi-value headers are joined with commas, as the
// HTTP API does; names keep the sender's case, so one sent twice in different case is
// refused (400) as Handle refuses it. The path is the one the client called, the stage included
// (RequestContext.Path), and the domain API Gateway's: a URL-signing source verifies against
// them. Payload 1.0 carries the query string decoded, not as sent: it is re-encoded with its
// parameters sorted, so a URL-signing source behind a REST API should be called at a URL
// whose query has at most one parameter (Twilio's bodySHA256), or set its url.
func (h *Handler) HandleV1(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	headers := make(map[string]string, len(req.Headers)+len(req.MultiValueHeaders))
	multi := make(map[string]bool, len(req.MultiValueHeaders))
	for k, vs := range req.MultiValueHeaders {
		headers[k] = strings.Join(vs, ",")
		multi[canonical(k)] = true
	}
	for k, v := range req.Headers {
		if !multi[canonical(k)] { // Headers repeats MultiValueHeaders' last value: one header
			headers[k] = v
		}
	}
	path := req.RequestContext.Path // with the stage, as the client called it
	if path == "" {
		path = req.Path
	}
	query := url.Values{}
	for k, v := range req.QueryStringParameters {
		query[k] = []string{v}
	}
	for k, vs := range req.MultiValueQueryStringParameters {
		query[k] = vs
	}
	resp, err := h.Handle(ctx, events.APIGatewayV2HTTPRequest{
		Version:         "1.0",
		RawPath:         path,
		RawQueryString:  query.Encode(),
		Headers:         headers,
		PathParameters:  req.PathParameters,
		Body:            req.Body,
		IsBase64Encoded: req.IsBase64Encoded,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: req.RequestContext.DomainName,
			Stage:      req.RequestContext.Stage,
			RequestID:  req.RequestContext.RequestID,
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: req.HTTPMethod, Path: path},
		},
	})
	return events.APIGatewayProxyResponse{StatusCode: resp.StatusCode, Headers: resp.Headers, Body: resp.Body}, err
}
