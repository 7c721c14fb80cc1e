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
//	    signed event time older than the source's retention (of an event no claim holds), a
//	    header name sent twice in different case (a REST API's event: which to believe would
//	    be map order's choice)
//	401 bad or missing signature, timestamp outside tolerance (nothing is claimed)
//	404 unknown source      405 not a POST      413 body over the source's limit
//	503 + Retry-After        DynamoDB throttled or failed: deliver again later
//	500 anything else (a misconfiguration); the provider retries
//
// Handle takes the HTTP API's payload v2 (and function URLs'), HandleV1 a REST API's v1,
// ServeHTTP a net/http request; one pipeline answers them all: route, read, verify, control,
// locate, then admit, probe and plan each event, commit. A single event is a batch of one.
package receiver

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

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
	// Claimed answers ev as a duplicate (dedup.OutcomeDuplicate) when an unexpired claim holds
	// its id; otherwise its Outcome is zero.
	Claimed(ctx context.Context, ev dedup.Event) (dedup.Result, error)
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

// StaleSecrets is Secrets that age: RefreshStale, called before each verification, re-reads a
// source's secrets once older than the implementation's maximum age, so a revoked secret stops
// verifying within it. An error keeps the old values and counts SecretRefreshFailed.
// *sources.Secrets satisfies it.
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
	// TrustedHosts are the Host headers ServeHTTP may build a URL-signing source's URL from,
	// when the source sets no url. Handle takes API Gateway's domain instead.
	TrustedHosts []string
	// Targets, when set, are the intent targets the deployment's outbox serves. A plan naming
	// another is refused before anything is written (500, naming it), not parked later.
	Targets []string
	// TracerProvider, when set, gives each delivery its own trace: a server span (SpanDelivery)
	// with a span per step, the commit's stored on the claim for the outbox to continue. A
	// provider's traceparent is a link, never the parent. Nil is tracing off, at no cost.
	TracerProvider trace.TracerProvider
	// NoDuplicateProbe turns the duplicate probe off. On (the default, with a Store that is a
	// Prober), a source's single events are probed during a redrive (duplicates at least half
	// of at least 16 of its last 64 deliveries in 10 s, on this instance): an event whose claim
	// a read finds is answered as a duplicate without planning or writing.
	NoDuplicateProbe bool
}

// Handler answers webhook deliveries.
type Handler struct {
	sources   map[string]*source
	secrets   Secrets
	store     Committer
	log       *slog.Logger
	metrics   io.Writer
	now       func() time.Time
	targets   []string // nil: any target
	namespace string
	maxBody   int             // the largest body any source accepts, for ServeHTTP
	trusted   map[string]bool // Config.TrustedHosts, lower-cased
	tracer    trace.Tracer    // the provider's, or a no-op one's (tracing off)
}

type source struct {
	name      string
	conf      *sources.Source
	scheme    webhook.Scheme
	signedURL webhook.URLVerifier // for the schemes that sign the URL they call (Twilio, Square)
	read      *reader
	// keep is the retention: a delivery whose signed time is older is refused (TimeSigned).
	keep time.Duration
	// answerWithin is when the commit must be done: the provider's timeout less a second.
	answerWithin time.Duration
	// The scheme's quirks (webhook.NoContentAnswerer, HeadAnswerer, NoRetryMarker).
	noContent, answersHead bool
	noRetry                [2]string
	window                 *window // its recent deliveries, for the duplicate probe; nil: no probe
}

// BatchCommitter is a Committer that writes a batch's events together (dedup.Store.CommitBatch);
// otherwise a batch is committed one Commit at a time.
type BatchCommitter interface {
	CommitBatch(ctx context.Context, evs []dedup.Event, plans []dedup.Plan) ([]dedup.Result, int, error)
}

// BatchClaimReader is a Committer that reads a batch's claims together
// (dedup.Store.ClaimedBatch), for the events that can no longer be planned; otherwise they are
// read one Claimed at a time, up to the first not claimed. On an error, ClaimedBatch returns
// the answers of the events before the first whose claim it could not read.
type BatchClaimReader interface {
	ClaimedBatch(ctx context.Context, evs []dedup.Event) ([]dedup.Result, int, error)
}

// New validates cfg and builds a Handler, every source's scheme included: a bad sources file
// stops the function at start rather than failing requests.
func New(cfg Config) (*Handler, error) {
	if cfg.Sources == nil || cfg.Secrets == nil || cfg.Store == nil {
		return nil, errors.New("receiver: Sources, Secrets and Store are required")
	}
	if err := cfg.Sources.Validate(); err != nil { // fills defaults for a File not built by Parse
		return nil, fmt.Errorf("receiver: %w", err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Planners.check(cfg.Sources.Sources); err != nil {
		return nil, err
	}
	// Tracing off is the same path, with spans that record nothing.
	tp := cmp.Or[trace.TracerProvider](cfg.TracerProvider, noop.NewTracerProvider())
	h := &Handler{sources: make(map[string]*source, len(cfg.Sources.Sources)), secrets: cfg.Secrets, store: cfg.Store,
		log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)), metrics: cmp.Or(cfg.Metrics, io.Discard), now: cfg.Now,
		namespace: cmp.Or(cfg.Namespace, Namespace), targets: slices.Clone(cfg.Targets),
		trusted: make(map[string]bool, len(cfg.TrustedHosts)), tracer: tp.Tracer(TracerName, trace.WithSchemaURL(semconv.SchemaURL))}
	for _, host := range cfg.TrustedHosts {
		if err := sources.CheckHost(host); err != nil {
			return nil, fmt.Errorf("receiver: TrustedHosts: %w", err)
		}
		h.trusted[strings.ToLower(host)] = true
	}
	for _, name := range cfg.Sources.Names() {
		src, err := newSource(name, &cfg)
		if err != nil {
			return nil, fmt.Errorf("receiver: sources.%s: %w", name, err)
		}
		h.sources[name], h.maxBody = src, max(h.maxBody, src.conf.MaxBodyBytes)
	}
	return h, nil
}

// newSource builds the named source's scheme and reader, and checks its secrets.
func newSource(name string, cfg *Config) (*source, error) {
	conf := cfg.Sources.Sources[name]
	scheme, err := conf.WebhookScheme()
	if err != nil {
		return nil, err
	}
	ret, ok := cfg.Store.Retention(name)
	if !ok {
		return nil, errors.New("no retention in the store: build both from one sources file")
	}
	if err := webhook.CheckSecrets(scheme, cfg.Secrets.Get(name)); err != nil {
		return nil, err
	}
	read, err := newReader(conf, cfg.Planners.forSource(name))
	if err != nil {
		return nil, err
	}
	s := &source{name: name, conf: conf, scheme: scheme, read: read, keep: ret.Effective(),
		answerWithin: time.Duration(conf.DeliveryTimeout) - time.Second}
	s.signedURL, _ = scheme.(webhook.URLVerifier)
	if _, ok := cfg.Store.(Prober); ok && !cfg.NoDuplicateProbe && !conf.Batch {
		s.window = &window{}
	}
	if q, ok := scheme.(webhook.NoContentAnswerer); ok {
		s.noContent = q.AnswersNoContent()
	}
	if q, ok := scheme.(webhook.HeadAnswerer); ok {
		s.answersHead = q.AnswersHead()
	}
	if q, ok := scheme.(webhook.NoRetryMarker); ok {
		s.noRetry[0], s.noRetry[1] = q.NoRetryHeader()
	}
	return s, nil
}

// serve answers one delivery, whichever edge it came by: its span, its log line, its metrics.
func (h *Handler) serve(ctx context.Context, req request) response {
	d := &delivery{start: time.Now(), req: req, requestID: boundedID(req.requestID), source: "unknown"}
	ctx, span := h.startDelivery(ctx, &d.req)
	defer endPanicked(span)
	h.handle(ctx, d)
	d.one[0].result.Calls += d.probeCalls // the probe's read, when it found no duplicate (a batch is not probed)
	if d.resp.status == http.StatusBadRequest && d.src != nil && d.src.noRetry[0] != "" {
		d.resp.headers[d.src.noRetry[0]] = d.src.noRetry[1] // what is refused will be refused again
	}
	d.latency = time.Since(d.start)
	h.observe(ctx, d)
	endDelivery(span, d)
	return d.resp
}

// handle runs the pipeline's steps in order: each goes on (true) or answers the delivery. Every
// call from the verify step on (a secrets re-read, the probe, a claim's read, the write) ends
// by the delivery's answerBy.
func (h *Handler) handle(ctx context.Context, d *delivery) {
	if !h.route(d) || !h.read(d) {
		return
	}
	ctx, cancel := context.WithDeadline(ctx, d.answerBy(ctx))
	defer cancel()
	if h.verify(ctx, d) && h.control(d) && h.locate(d) && h.plan(ctx, d) {
		h.commit(ctx, d)
	}
}

// stop answers the delivery with r, noting its error kind and err; false, for a step to return.
func (d *delivery) stop(kind string, err error, r response) bool {
	d.errKind, d.err, d.resp = kind, err, r
	return false
}

// route finds the delivery's source, and answers what is not a delivery to one.
func (h *Handler) route(d *delivery) bool {
	if src, ok := h.sources[d.req.source]; ok {
		d.source, d.src = d.req.source, src
	}
	switch m := d.req.method; {
	case d.req.refused != nil:
		return d.stop("body", nil, *d.req.refused)
	case m == http.MethodHead && d.src != nil && d.src.answersHead:
		return d.stop("head", nil, response{status: http.StatusOK}) // a provider checking the endpoint: nothing read
	case m != "" && m != http.MethodPost:
		r := reply(http.StatusMethodNotAllowed, "method "+m+" is not allowed; deliveries are POSTed", "")
		r.headers["Allow"] = http.MethodPost
		return d.stop("method", nil, r)
	case d.src == nil:
		return d.stop("unknown_source", nil, reply(http.StatusNotFound, "unknown source", "source"))
	}
	return true
}

// read takes the body as the provider sent it (decoded when API Gateway base64-encoded it: the
// signature is over the bytes sent), within the source's limit.
func (h *Handler) read(d *delivery) bool {
	limit, n := d.src.conf.MaxBodyBytes, len(d.req.body)
	if d.req.base64 {
		n = base64.StdEncoding.DecodedLen(n) - 2 // less its padding, at most
	}
	switch {
	case n > limit:
	case !d.req.base64:
		d.raw = []byte(d.req.body)
	default:
		raw, err := base64.StdEncoding.DecodeString(d.req.body)
		if err != nil {
			return d.stop("body", nil, reply(http.StatusBadRequest, "body is marked base64-encoded but is not valid base64", "body"))
		}
		d.raw, n = raw, len(raw)
	}
	if n > limit {
		return d.stop("body", nil, reply(http.StatusRequestEntityTooLarge, fmt.Sprintf("body is %d bytes or more; this source accepts at most %d", n, limit), "body"))
	}
	if twice := d.req.twice; twice != "" {
		return d.stop("bad_request", nil, reply(http.StatusBadRequest, "header "+twice+" is sent twice, in different case; send it once", twice))
	}
	d.now = h.now()
	return true
}

// verify checks the delivery's signature. A failure re-reads the secrets (rate-limited) and
// tries once more: the secret may have been rotated since.
func (h *Handler) verify(ctx context.Context, d *delivery) bool {
	src := d.src
	signedURL, err := src.url(&d.req)
	if err != nil && d.req.untrustedHost {
		// Sent to a host this deployment does not answer for: not a URL the provider signed.
		return d.stop("signature", err, reply(http.StatusUnauthorized, "signature verification failed", ""))
	}
	if err != nil {
		return d.stop("internal", err, reply(http.StatusInternalServerError, "internal error", ""))
	}
	if stale, ok := h.secrets.(StaleSecrets); ok {
		// The values held are kept on an error: a store that cannot be read must not stop
		// deliveries. The read has the delivery's time, not a share: a revocation must land
		// however slow the store.
		d.secretRefreshErr = stale.RefreshStale(ctx, src.name)
	}
	_, verifying := h.startStep(ctx, SpanVerify, trace.SpanKindInternal)
	defer endPanicked(verifying) // a secrets store's panic (Refresh) too
	err = src.verify(signedURL, d.req.header, d.raw, h.secrets.Get(src.name), d.now)
	if err != nil {
		if changed, rerr := h.secrets.Refresh(ctx, src.name); rerr == nil && changed {
			err = src.verify(signedURL, d.req.header, d.raw, h.secrets.Get(src.name), d.now)
		}
	}
	endStep(verifying, err)
	switch {
	case errors.Is(err, webhook.ErrInvalid):
		// A secret we hold is unusable (empty, not base64): our fault, not the sender's.
		return d.stop("internal", err, reply(http.StatusInternalServerError, "internal error", ""))
	case err != nil:
		return d.stop("signature", err, reply(http.StatusUnauthorized, "signature verification failed", ""))
	}
	d.signedURL = signedURL
	return true
}

// control refuses a delivery whose unsigned headers contradict its signed body, and answers a
// provider's control message (url_verification, a ping) with what it asks, claiming nothing.
func (h *Handler) control(d *delivery) bool {
	if hc, ok := d.src.scheme.(webhook.HeaderChecker); ok {
		if err := hc.CheckHeaders(d.req.header, d.raw); err != nil {
			me, _ := errors.AsType[*webhook.HeaderMismatchError](err)
			return d.stop("bad_request", err, reply(http.StatusBadRequest, err.Error(), me.Header))
		}
	}
	if c, ok := d.src.scheme.(webhook.Challenger); ok {
		if answer, ctype, ok := c.Challenge(d.req.header, d.raw, h.secrets.Get(d.src.name)); ok {
			if ctype == "" && len(answer) == 0 {
				return d.stop("challenge", nil, response{status: http.StatusNoContent})
			}
			return d.stop("challenge", nil, response{status: http.StatusOK, headers: map[string]string{"Content-Type": ctype}, body: string(answer)})
		}
	}
	return true
}

// part is where one event lies in a verified body: the body (or its form:<key> payload), or
// an element of a batch.
type part struct {
	raw  []byte
	text string     // raw as a string, or "" (see scalar)
	form url.Values // a form body's fields
}

// locate splits a verified body into its events' parts: one, or a batch source's elements.
func (h *Handler) locate(d *delivery) bool {
	if !d.src.conf.Batch {
		text := "" // the body as a string, when it arrived as one: values read from it share it
		if !d.req.base64 {
			text = d.req.body
		}
		payload, text, form, err := d.src.read.payload(d.raw, text)
		if err != nil {
			return badRequest(d, err, "")
		}
		d.part = part{raw: payload, text: text, form: form}
		return true
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(d.raw, &elems); err != nil {
		return d.stop("bad_request", err, reply(http.StatusBadRequest, "body is not a JSON array of events", "body"))
	}
	if limit := d.src.conf.MaxBatchEvents; limit > 0 && len(elems) > limit {
		return d.stop("batch_too_large", nil, reply(http.StatusRequestEntityTooLarge,
			fmt.Sprintf("batch of %d events; this source accepts at most %d (max_batch_events)", len(elems), limit), "body"))
	}
	d.parts = make([]part, len(elems))
	for i, e := range elems {
		d.parts[i].raw = e
	}
	d.batch = true
	return true
}

// plan admits and plans every event before anything is written: one bad event refuses the
// whole delivery rather than leave part of it claimed.
func (h *Handler) plan(ctx context.Context, d *delivery) bool {
	var at [maxPaths]span // where the values read from an event lie; on the stack
	n := 1
	if d.batch {
		n, d.evs.events = len(d.parts), make([]planned, 0, len(d.parts))
	}
	pctx, planning := h.startStep(ctx, SpanPlan, trace.SpanKindInternal) // one span for all the events
	defer endPanicked(planning)
	ok := true
	for i := 0; ok && i < n; i++ {
		ok = h.planEvent(ctx, pctx, d, i, at[:])
	}
	// Settled even when a later event stopped the delivery: an earlier refusal is the answer.
	if ok = h.settle(ctx, d) && ok; !ok {
		endStep(planning, d.err)
		return false
	}
	if planning.IsRecording() {
		endStep(planning, nil, d.planAttrs(n)...)
	}
	return true
}

// planEvent locates, admits and plans the delivery's i-th event (pctx: the plan span's).
func (h *Handler) planEvent(ctx, pctx context.Context, d *delivery, i int, at []span) bool {
	src, p, prefix := d.src, &d.part, ""
	if d.batch {
		p, prefix = &d.parts[i], "events["+strconv.Itoa(i)+"]." // the fields named are the event's
	}
	ev, err := src.read.extract(src.name, d.req.header, p.raw, p.text, at, p.form)
	if !h.admit(d, &ev, err, prefix) {
		return false
	}
	var plan dedup.Plan
	var known bool
	if err = d.tooOld(&ev, prefix); err != nil {
		// Not planned: a duplicate if its claim holds (planError), else refused.
		if _, known = src.read.planners[ev.Type]; !d.batch {
			d.event = ev
		}
	} else {
		if h.probe(pctx, d, &ev) {
			return true
		}
		if !d.batch {
			if err := src.guardContent(&ev, d.signedURL, d.raw); err != nil {
				return d.stop("bad_request", err, reply(http.StatusBadRequest, "body cannot be read as the signature covers it", "body"))
			}
			d.event = ev
		}
		plan, known, err = src.read.plan(pctx, ev, p.text, at, p.form)
		if err == nil {
			err = h.checkTargets(&ev, &plan)
		}
	}
	if !d.batch {
		d.knownType = known
	}
	e, ignored := planned{ev: ev, plan: plan, known: known, write: true, prefix: prefix}, false
	switch {
	case err != nil && d.batch:
		e.write, e.failed = false, err // answered from its claim, read with the batch's others (settle)
	case err != nil && !h.planError(ctx, d, &e, err):
		return false
	case err == nil && !known && src.conf.UnknownTypes == sources.UnknownTypesIgnore:
		d.evs.ignored++
		ignored, e.write = true, false // not claimed: a redelivery once a planner ships will run it
	}
	if !d.batch {
		d.one[0] = e // held in the delivery: no slice to allocate
	} else if !ignored {
		d.evs.events = append(d.evs.events, e)
	}
	if e.write {
		d.evs.writes++
	}
	return true
}

// admit checks a located event (err: why it could not be located) before it is planned, and
// answers it unless it may be. at prefixes the fields named ("events[3]." in a batch).
func (h *Handler) admit(d *delivery, ev *dedup.Event, err error, at string) bool {
	if err != nil {
		return badRequest(d, err, at)
	}
	if dedup.ValidateDeliveryID(ev.DeliveryID) != nil {
		// Informational only: an unusable delivery id must not cost the event.
		ev.DeliveryID, d.droppedDeliveryID = "", true
	}
	ev.GuardBody = d.src.conf.Guarded()
	// As Commit checks it: the planner never sees, nor the log shows, an unusable event.
	if err := ev.Validate(); err != nil {
		if ie, ok := errors.AsType[*dedup.InvalidError](err); ok && at != "" {
			err = &dedup.InvalidError{Field: at + ie.Field, Reason: ie.Reason}
		}
		return h.commitError(d, err)
	}
	return true
}

// tooOld is a *tooOldError when the event's signed time is older than its source's retention
// (at as in admit). Past the retention its claim may be gone: a replay of this signed body
// could not be told from a new event, so it is not planned, and refused unless its claim still
// holds (planError): a claim lives a retention from its receipt, later than the event's time.
func (d *delivery) tooOld(ev *dedup.Event, at string) error {
	if d.src.conf.TimeSigned() && !ev.OccurredAt.IsZero() && d.now.Sub(ev.OccurredAt) > d.src.keep {
		return &tooOldError{Field: at + "occurred_at", OccurredAt: ev.OccurredAt, Keep: d.src.keep}
	}
	return nil
}

// tooOldError is an event whose signed time (occurred_at) is older than its source's retention,
// and that no claim holds: refused (400), as it cannot be told from a replay.
type tooOldError struct {
	Field      string // "occurred_at", or "events[3].occurred_at" in a batch
	OccurredAt time.Time
	Keep       time.Duration
}

func (e *tooOldError) Error() string {
	return fmt.Sprintf("%s %s is older than this source's retention (%s): it cannot be told from a replay",
		e.Field, e.OccurredAt.UTC().Format(time.RFC3339), sources.Duration(e.Keep))
}

// badRequest refuses an event that could not be located (at as in admit).
func badRequest(d *delivery, err error, at string) bool {
	field := ""
	if fe, ok := errors.AsType[*fieldError](err); ok {
		field = at + fe.field
	}
	return d.stop("bad_request", err, reply(http.StatusBadRequest, at+err.Error(), field))
}

// checkTargets refuses a plan whose intent names a target not in Config.Targets.
func (h *Handler) checkTargets(ev *dedup.Event, plan *dedup.Plan) error {
	for _, in := range plan.Intents {
		if h.targets != nil && !slices.Contains(h.targets, in.Target) {
			return &UnknownTargetError{Source: ev.Source, EventType: ev.Type, Intent: in.Name, Target: in.Target}
		}
	}
	return nil
}

// commit writes the planned events' claims, effects and intents, and answers the delivery.
func (h *Handler) commit(ctx context.Context, d *delivery) {
	if !d.batch && d.evs.ignored == 1 {
		// Not claimed: a redelivery after a planner for this type ships will run it.
		d.stop("ignored", nil, response{status: http.StatusOK, headers: okHeaders, body: `{"received":true,"ignored":true}`})
		return
	}
	if n := d.evs.writes; n > 0 {
		commitStart := time.Now()
		// ctx ends in time to answer 503 (answerBy): a slow write past the provider's timeout
		// would be taken for a failure anyway, and retried.
		cctx, committing := h.startStep(ctx, SpanCommit, trace.SpanKindInternal) // its context is the claims'
		defer endPanicked(committing)                                            // a store's panic
		refused, err := h.write(cctx, d)
		for len(refused) > 0 && h.claimedBefore(ctx, d, refused) {
			// The refused events were claimed before (a planner changed since): duplicates. A
			// batch's other events are written again without them.
			refused, err = nil, nil
			if d.batch {
				refused, err = h.write(cctx, d)
			}
		}
		if committing.IsRecording() {
			endStep(committing, err, d.commitAttrs(n)...)
		}
		d.commitTime = time.Since(commitStart)
		switch {
		case len(refused) > 0: // a new event's plan, refused: claimedBefore answered it
			return
		case errors.Is(err, dedup.ErrInvalid) || errors.Is(err, dedup.ErrLimit):
			// Refused without saying whose plan: it fails as a planner does (500).
			d.stop("planner", err, reply(http.StatusInternalServerError, "internal error", ""))
			return
		case err != nil:
			h.commitError(d, err)
			return
		}
	}
	d.committed, d.resp = true, h.answer(d)
	if d.src.window != nil {
		d.src.window.record(d.now, d.one[0].result.Outcome == dedup.OutcomeDuplicate)
	}
}

// write commits the events to write not written yet: a batch's with CommitBatch when the store
// has it. refused are the events whose plans the store refused (dedup.ErrInvalid,
// dedup.ErrLimit: before any call), each with its refusal (failed), when err says whose.
func (h *Handler) write(ctx context.Context, d *delivery) (refused []*planned, err error) {
	b, all := &d.evs, d.events()
	if bc, ok := h.store.(BatchCommitter); ok && d.batch {
		var evs []dedup.Event
		var plans []dedup.Plan
		var places []int
		for i, e := range all {
			if e.write {
				evs, plans, places = append(evs, e.ev), append(plans, e.plan), append(places, i)
			}
		}
		results, calls, err := bc.CommitBatch(ctx, evs, plans)
		for i, r := range results {
			all[places[i]].result = r
		}
		b.calls += calls
		for _, ee := range eventErrors(err) {
			if ee.Index < len(places) {
				e := &all[places[ee.Index]]
				e.failed, refused = ee, append(refused, e)
			}
		}
		return refused, err
	}
	for i := range all {
		if e := &all[i]; e.write && e.result.Outcome == 0 {
			e.result, err = h.store.Commit(ctx, e.ev, e.plan)
			if b.calls += e.result.Calls; err != nil {
				if errors.Is(err, dedup.ErrInvalid) || errors.Is(err, dedup.ErrLimit) {
					e.failed, refused = err, []*planned{e}
				}
				return refused, err
			}
		}
	}
	return nil, nil
}

// eventErrors are the events a batch's refusal names: one *dedup.EventError, or several joined.
func eventErrors(err error) []*dedup.EventError {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var ees []*dedup.EventError
	for _, e := range errs {
		if ee, ok := errors.AsType[*dedup.EventError](e); ok {
			ees = append(ees, ee)
		}
	}
	return ees
}

// claimedBefore answers the events whose plans the store refused from their claims: true when
// each was claimed before (a duplicate, not to be written); else the first that was not refuses
// the delivery. A batch's are read together (settle).
func (h *Handler) claimedBefore(ctx context.Context, d *delivery, refused []*planned) bool {
	if !d.batch {
		e := refused[0]
		err := e.failed
		e.failed = nil
		return h.planError(ctx, d, e, err)
	}
	for _, e := range refused {
		e.write = false
	}
	return h.settle(ctx, d)
}

// answer is a committed delivery's 200: a batch's counts, or a single event's outcome.
func (h *Handler) answer(d *delivery) response {
	n := d.outcomes()
	dups := n[dedup.OutcomeDuplicate] + n[dedup.OutcomeReplay]
	if d.batch {
		return response{status: http.StatusOK, headers: okHeaders,
			body: fmt.Sprintf(`{"received":true,"events":%d,"duplicates":%d,"ignored":%d}`, len(d.evs.events), dups, d.evs.ignored)}
	}
	switch {
	case d.src.noContent:
		return response{status: http.StatusNoContent}
	case dups > 0:
		// A replay is answered as a duplicate: its body's event is durably accepted under its
		// first id, and a refusal would only make a provider (or an attacker) try again.
		return response{status: http.StatusOK, headers: okHeaders, body: `{"received":true,"duplicate":true}`}
	}
	return response{status: http.StatusOK, headers: okHeaders, body: `{"received":true,"duplicate":false}`}
}

// planError answers an event that could not be planned or whose plan was refused. One accepted
// before (the planner changed since) is a duplicate like any other: true, and e says so. Only
// a new event is refused. This costs a read, on this path only.
func (h *Handler) planError(ctx context.Context, d *delivery, e *planned, err error) bool {
	res, cerr := h.store.Claimed(ctx, e.ev)
	if d.batch {
		d.evs.calls += res.Calls // a single event's are its result's
	}
	if cerr == nil && res.Outcome == dedup.OutcomeDuplicate {
		res.Calls += e.result.Calls // a write's, when the store refused the plan
		e.write, e.result = false, res
		return true
	}
	return h.refuse(d, e, err, cerr)
}

// settle answers a batch's events that could not be planned from their claims, read together
// when the store can (read one by one, a few hundred outlast the provider's timeout): one
// claimed before is a duplicate, and the first that is not refuses the batch, as planError does.
func (h *Handler) settle(ctx context.Context, d *delivery) bool {
	var failed []*planned
	var evs []dedup.Event
	for i := range d.evs.events {
		if e := &d.evs.events[i]; e.failed != nil {
			failed, evs = append(failed, e), append(evs, e.ev)
		}
	}
	r, together := h.store.(BatchClaimReader)
	if len(failed) == 0 || !together {
		for _, e := range failed {
			if err := e.failed; !h.planError(ctx, d, e, err) {
				return false
			}
			e.failed = nil
		}
		return true
	}
	results, calls, cerr := r.ClaimedBatch(ctx, evs) // on an error, the answers before it
	d.evs.calls += calls
	for k, e := range failed {
		switch {
		case k >= len(results):
			return h.refuse(d, e, e.failed, cerr)
		case results[k].Outcome != dedup.OutcomeDuplicate:
			return h.refuse(d, e, e.failed, nil)
		}
		e.result, e.failed = results[k], nil
	}
	return true
}

// refuse answers an event that could not be planned, or whose plan was refused (err), and is
// not claimed; cerr: the read of its claim failed.
func (h *Handler) refuse(d *delivery, e *planned, err, cerr error) bool {
	d.event = e.ev
	if cerr != nil { // it may be claimed (its 200 lost): answered as the read's failure (503), not refused
		h.commitError(d, cerr)
		d.err = errors.Join(err, cerr)
		return false
	}
	if pe, ok := errors.AsType[*PayloadError](err); ok {
		return d.stop("bad_request", err, reply(http.StatusBadRequest, pe.Error(), e.field(pe.Field)))
	}
	if te, ok := errors.AsType[*tooOldError](err); ok {
		return d.stop("too_old", nil, reply(http.StatusBadRequest, te.Error(), te.Field))
	}
	if ute, ok := errors.AsType[*UnknownTargetError](err); ok {
		// Ours to fix, and retried by the provider once fixed; named for the log and the tests.
		return d.stop("planner", err, reply(http.StatusInternalServerError,
			fmt.Sprintf("intent %q names target %q, which no executor serves", ute.Intent, ute.Target), e.field("intents["+ute.Intent+"].target")))
	}
	if errors.Is(err, ErrBadPayload) {
		return d.stop("bad_request", err, reply(http.StatusBadRequest, err.Error(), e.field("")))
	}
	// A planner failure or a plan the store refused: ours to fix, and retried by the provider.
	return d.stop("planner", err, reply(http.StatusInternalServerError, "internal error", ""))
}

// commitError maps the dedup core's typed errors to statuses. Nothing was written except,
// possibly, on ErrUnavailable, where the redelivery asked for is safe.
func (h *Handler) commitError(d *delivery, err error) bool {
	if ie, ok := errors.AsType[*dedup.InvalidError](err); ok {
		return d.stop("bad_request", err, reply(http.StatusBadRequest, ie.Field+" "+ie.Reason, ie.Field))
	}
	if ue, ok := errors.AsType[*dedup.UnavailableError](err); ok {
		r := reply(http.StatusServiceUnavailable, "temporarily unavailable; deliver again later", "")
		r.headers["Retry-After"] = strconv.Itoa(int((ue.RetryAfter + time.Second - 1) / time.Second))
		return d.stop("unavailable", err, r)
	}
	// A missing table, denied access: a 500 the provider retries, the cause in the log.
	return d.stop("internal", err, reply(http.StatusInternalServerError, "internal error", ""))
}

// verify verifies by the source's scheme, with the signed URL for a scheme that signs one.
func (s *source) verify(signedURL string, hdr http.Header, raw []byte, secrets []string, now time.Time) error {
	if s.signedURL != nil {
		return s.signedURL.VerifyURL(signedURL, hdr, raw, secrets, now)
	}
	return s.scheme.Verify(hdr, raw, secrets, now)
}

// url is the URL a URL-signing provider called ("" for the other schemes): the source's url,
// else https://<API Gateway's domain><the raw path>, with the request's query (signed). Never
// the Host header, which the sender writes: a delivery captured for one deployment must not
// verify at another sharing the provider's account-wide key.
func (s *source) url(req *request) (string, error) {
	if s.signedURL == nil {
		return "", nil
	}
	u := s.conf.URL
	if u == "" {
		if req.domain == "" {
			return "", &NoSignedURLError{Source: s.name, Scheme: s.conf.Scheme}
		}
		u = "https://" + req.domain + req.path
	}
	if req.query != "" {
		u += "?" + req.query
	}
	return u, nil
}

// NoSignedURLError is a delivery to a source whose scheme signs the URL it calls (twilio,
// square) when that URL is unknown: the source sets no url, and the request names no trusted
// domain (API Gateway's, or a Host in Config.TrustedHosts). It is a 500: the configuration's fault.
type NoSignedURLError struct {
	Source, Scheme string
}

func (e *NoSignedURLError) Error() string {
	return fmt.Sprintf("receiver: sources.%s: %s signs the URL it calls, and this request does not say which: set the source's url (the URL configured at %s), or over ServeHTTP list the host in Config.TrustedHosts", e.Source, e.Scheme, e.Scheme)
}

// guardContent sets what ev's body guard claims, when the source guards: what the signature
// covers, as the provider canonicalises it, with the type before it for "body+type". Left nil
// when that is the payload itself, which the store then hashes.
func (s *source) guardContent(ev *dedup.Event, signedURL string, signed []byte) error {
	if !s.conf.Guarded() {
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
	if s.conf.ReplayGuard == sources.ReplayGuardBodyAndType {
		// The type is unsigned: only a planned one keys the guard, so a body is claimed once
		// per planned type and once for all others, whatever types a sender invents. A type
		// holds no NUL (dedup.Event.Validate): the parts cannot be confused.
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

// UnknownTargetError is a plan whose intent names a target not in Config.Targets: refused,
// writing nothing, rather than leave an intent no executor will run.
type UnknownTargetError struct {
	Source, EventType, Intent, Target string
}

func (e *UnknownTargetError) Error() string {
	return fmt.Sprintf("receiver: the %s planner for %s planned intent %q for target %q, which no executor serves", e.EventType, e.Source, e.Intent, e.Target)
}

// maxRequestIDLen bounds the request id logged: over ServeHTTP it is the sender's, unverified.
const maxRequestIDLen = 128

// boundedID is an id fit to log: at most maxRequestIDLen bytes of printable ASCII, cut and marked.
func boundedID(id string) string {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e || i == maxRequestIDLen {
			return id[:i] + "…"
		}
	}
	return id
}

// delivery is what one request did, as the pipeline's steps hand it on.
type delivery struct {
	req        request
	src        *source // nil until routed to a known source
	start, now time.Time
	raw        []byte // the body, verified by the verify step
	signedURL  string
	part       part // a single event's; parts, a batch's
	parts      []part
	resp       response
	requestID  string
	source     string
	event      dedup.Event // a single event's, or a batch's event refused
	knownType  bool
	committed  bool
	err        error
	errKind    string // signature, bad_request, unavailable, internal, ...
	latency    time.Duration
	commitTime time.Duration
	batch      bool        // a batch source's delivery
	one        [1]planned  // a single event's delivery's event, planned
	evs        batchResult // a batch's events; the counts of either

	droppedDeliveryID bool
	secretRefreshErr  error // the secrets' re-read at their maximum age failed
	probeCalls        int   // the duplicate probe's read, when it found no duplicate
	probed            bool  // the duplicate probe read the claim (found or not)
}

// answerBy is when the delivery's calls must be done: a second before its provider gives up
// (answerWithin), or before the invocation itself ends (ctx's deadline: a Lambda's timeout is
// the tightest source's), whichever comes first, so that its 503 is still an answer.
func (d *delivery) answerBy(ctx context.Context) time.Time {
	by := d.start.Add(d.src.answerWithin)
	if end, ok := ctx.Deadline(); ok && end.Add(-time.Second).Before(by) {
		by = end.Add(-time.Second)
	}
	return by
}

// events are the delivery's planned events: a batch's, or the single event's.
func (d *delivery) events() []planned {
	if d.batch {
		return d.evs.events
	}
	return d.one[:]
}

// outcomes counts the delivery's events by their commits' outcomes.
func (d *delivery) outcomes() (n [dedup.OutcomeReplay + 1]int) {
	for _, e := range d.events() {
		if e.result.Outcome <= dedup.OutcomeReplay {
			n[e.result.Outcome]++
		}
	}
	return n
}

// planned is one event of a delivery, planned, and what its commit did.
type planned struct {
	ev     dedup.Event
	plan   dedup.Plan
	known  bool
	write  bool   // false: claimed before, found so when its planner failed
	failed error  // why it could not be planned, or the store refused its plan, until its claim is read
	prefix string // what its fields are named under ("events[3]." in a batch)
	result dedup.Result
}

// field names the event's field f in what refuses it: "events[3].email" in a batch, or the
// batch's event itself when f is none ("events[3]").
func (e *planned) field(f string) string { return strings.TrimSuffix(e.prefix+f, ".") }

// batchResult is a batch's events not ignored, in order, and the counts (a single event's too).
type batchResult struct {
	events  []planned
	ignored int
	writes  int // the events to write
	calls   int
}
