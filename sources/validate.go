package sources

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/webhook"
)

// FieldError names the field of a sources file that is wrong, e.g.
// "sources.stripe.secrets[1]".
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Schemes are the signature schemes a source can name.
var Schemes = webhook.Names

// Preset is where a provider puts its event id, type, delivery id and event time, and how long
// it retries a failed delivery when it documents that.
type Preset struct {
	EventID, EventType, DeliveryID, OccurredAt *Locator
	RetryHorizon                               time.Duration
}

// Presets are the documented locations per scheme, used where a source sets none.
var Presets = map[string]Preset{
	// webhook-id is the message id, the same on every retry.
	"standard-webhooks": {EventID: inHeader("webhook-id"), EventType: inJSON("type"), OccurredAt: inJSON("timestamp")},
	// svix-id is signed and kept on every attempt; the schedule (immediately, 5 s, 5 min,
	// 30 min, 2 h, 5 h, 10 h, 10 h) ends about 27.6 h after the first attempt
	// (docs.svix.com/retries). The body's time field is each sender's own.
	"svix": {EventID: inHeader("svix-id"), EventType: inJSON("type"), RetryHorizon: 28 * time.Hour},
	// The event object's id ("evt_...") is the same on retries and resends; Stripe attempts
	// delivery for up to three days in live mode (docs.stripe.com/webhooks).
	"stripe": {EventID: inJSON("id"), EventType: inJSON("type"), OccurredAt: inJSON("created"), RetryHorizon: 72 * time.Hour},
	// The Events API envelope: event_id is kept on retries, which come after about 1 and 5
	// minutes (api.slack.com/apis/events-api, "Retries").
	"slack": {EventID: inJSON("event_id"), EventType: inJSON("event.type"), OccurredAt: inJSON("event_time"), RetryHorizon: 10 * time.Minute},
	// Paddle Billing retries a live notification up to 60 times over 3 days
	// (developer.paddle.com/webhooks/respond-to-webhooks); notification_id is per destination.
	"paddle": {EventID: inJSON("event_id"), EventType: inJSON("event_type"), DeliveryID: inJSON("notification_id"),
		OccurredAt: inJSON("occurred_at"), RetryHorizon: 72 * time.Hour},
	// PagerDuty v3 retries for up to 48 hours (developer-docs, webhooks/02-Behavior.md); the
	// signed event.id is the key, X-Webhook-Id (per webhook, kept on attempts) the delivery id.
	"pagerduty": {EventID: inJSON("event.id"), EventType: inJSON("event.event_type"), DeliveryID: inHeader("X-Webhook-Id"),
		OccurredAt: inJSON("event.occurred_at"), RetryHorizon: 48 * time.Hour},
	// Linear's payload has no event id: Linear-Delivery identifies the payload (Linear does not
	// say a retry keeps it; the body guard, on by default since the header is unsigned, refuses
	// a byte-identical body under another id). Its type is signed (Linear-Event repeats it,
	// unsigned, and is held to it). Retries come after 1 min, 1 h and 6 h
	// (linear.app/developers/webhooks); webhookTimestamp is in milliseconds.
	"linear": {EventID: inHeader("Linear-Delivery"), EventType: inJSON("type"), OccurredAt: inJSON("webhookTimestamp"), RetryHorizon: 8 * time.Hour},
	// Twitch-Eventsub-Message-Id is signed and kept when Twitch resends; Twitch documents no
	// retry horizon (dev.twitch.tv/docs/eventsub/handling-webhook-events). The type is signed;
	// Twitch-Eventsub-Subscription-Type repeats it, unsigned, and is held to it.
	"twitch": {EventID: inHeader("Twitch-Eventsub-Message-Id"), EventType: inJSON("subscription.type")},
	// Zoom's payload carries no event id (event, event_ts in milliseconds, payload), and
	// x-zm-trackingid names a request, not the event: the source must locate one (for example
	// payload.object.uuid for a meeting's events, one source per event family). Zoom retries 3
	// times, 5, 25 and 85 minutes after the first attempt (developers.zoom.us, "Webhook
	// delays").
	"zoom": {EventType: inJSON("event"), OccurredAt: inJSON("event_ts"), RetryHorizon: 90 * time.Minute},
	// Intercom's notification id ("notif_...") names the notification and is kept on its one
	// retry, a minute later (developers.intercom.com, webhook models: "retried only once after
	// 1 minute"); created_at is Unix seconds. Pings (topic "ping", id null) are acknowledged.
	"intercom": {EventID: inJSON("id"), EventType: inJSON("topic"), OccurredAt: inJSON("created_at"), RetryHorizon: 5 * time.Minute},
	// Twilio's I-Twilio-Idempotency-Token is the same on a callback's retries; Twilio's own
	// reference does not describe it, and it is not signed, so the body guard is on (a
	// callback's body names its SID and status). Twilio retries within a callback's 15 s
	// budget by default, up to 5 times if the URL's #rc= asks
	// (twilio.com/docs/usage/webhooks/webhooks-connection-overrides); Event Streams, which
	// retries for 4 hours, is a different product. The event type depends on the product
	// (SmsStatus, MessageStatus, CallStatus): the source names it.
	"twilio": {EventID: inHeader("I-Twilio-Idempotency-Token"), RetryHorizon: time.Hour},
	// Square's event_id is signed (in the body) and is its documented idempotency value;
	// failed deliveries are retried for up to 72 hours after the event
	// (developer.squareup.com/docs/webhooks/troubleshooting, and the delivery SLA page).
	"square": {EventID: inJSON("event_id"), EventType: inJSON("type"), OccurredAt: inJSON("created_at"), RetryHorizon: 72 * time.Hour},
	// Discord's webhook events carry no event id (an envelope of version, application_id,
	// type, and event {type, timestamp, data}): the source must locate one in event.data where
	// its event types have one (an entitlement's id). Discord retries for up to 10 minutes
	// (discord.com/developers/docs/events/webhook-events). Interactions are not webhooks: their
	// answer is the interaction's response, which the receiver does not make.
	"discord": {EventType: inJSON("event.type"), OccurredAt: inJSON("event.timestamp"), RetryHorizon: 10 * time.Minute},
	// SendGrid posts a batch (set batch: true), each event with its own sg_event_id, "unique
	// for every event" and the documented key for duplicates; it retries a failed post for up
	// to 24 hours (twilio.com/docs/sendgrid/for-developers/tracking-events/event).
	"sendgrid": {EventID: inJSON("sg_event_id"), EventType: inJSON("event"), DeliveryID: inJSON("sg_message_id"),
		OccurredAt: inJSON("timestamp"), RetryHorizon: 24 * time.Hour},
	// X-GitHub-Delivery is kept on redelivery, scoped by X-GitHub-Hook-ID.
	"github": {EventID: &Locator{Header: "X-GitHub-Delivery", ScopeHeader: "X-GitHub-Hook-ID"},
		EventType: inHeader("X-GitHub-Event"), DeliveryID: inHeader("X-GitHub-Delivery")},
	// X-Shopify-Webhook-Id is what Shopify's delivery-verification guide names as the key for
	// detecting duplicates. X-Shopify-Event-Id is shared by every subscription and topic one
	// merchant action fans out to, so keying on it alone would collapse distinct deliveries:
	// it is recorded as the delivery id, for tracing.
	"shopify": {EventID: inHeader("X-Shopify-Webhook-Id"), EventType: inHeader("X-Shopify-Topic"),
		DeliveryID: inHeader("X-Shopify-Event-Id"), OccurredAt: inHeader("X-Shopify-Triggered-At")},
}

func inHeader(name string) *Locator { return &Locator{Header: name} }
func inJSON(path string) *Locator   { return &Locator{JSON: path} }

// maxBody is the largest body that can reach the receiver: Lambda takes a synchronous request
// of at most lambdaPayload bytes, and API Gateway hands it the body inside a JSON event
// (headers, up to 10 KiB for an HTTP API, and the request context: envelope covers them),
// base64-encoded when it is not text (4 bytes for every 3). A limit above it could never be
// reached: the delivery fails at API Gateway, 413 never answered by the receiver.
const (
	lambdaPayload = 6 * 1024 * 1024
	envelope      = 64 * 1024
	maxBody       = (lambdaPayload - envelope) / 4 * 3
)

// Validate checks every source and fills the locators a source leaves to its scheme's preset.
func (f *File) Validate() error {
	if len(f.Sources) == 0 {
		return &FieldError{Field: "sources", Reason: "is empty; configure at least one source"}
	}
	for _, name := range f.Names() {
		s := f.Sources[name]
		at := "sources." + name
		if s == nil {
			return &FieldError{Field: at, Reason: "is null"}
		}
		if err := dedup.ValidateSourceName(at, name); err != nil {
			return &FieldError{Field: at, Reason: "is not a valid source name: use 1-64 characters of a-z, 0-9, '-' and '_'"}
		}
		if err := s.validate(at); err != nil {
			return err
		}
		if err := s.Retention().Validate(name); err != nil {
			return err
		}
		// Past its claim's expiry, a delivery still inside the tolerance would verify and claim
		// again: a replay the dedup key no longer remembers. The scheme's default counts as
		// much as a tolerance set here.
		tol, which := time.Duration(s.TimestampTolerance), ""
		if tol == 0 {
			tol, which = webhook.DefaultTolerance(s.Scheme), s.Scheme+"'s default "
		}
		if tol > 0 && tol >= s.Retention().Effective() {
			return &FieldError{Field: at + ".timestamp_tolerance", Reason: fmt.Sprintf("%s%s is not shorter than the retention (%s): a delivery would still verify after its claim expired", which, Duration(tol), Duration(s.Retention().Effective()))}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Tables)) {
		t, at := f.Tables[name], "tables."+name
		switch {
		case t == nil:
			return &FieldError{Field: at, Reason: "is null"}
		case t.Bound && t.Name != "" && !t.resolved:
			return &FieldError{Field: at + ".name", Reason: "is set, and the table is bound: a bound table takes its name from the CDK app (infra's Props.TableBindings); set name or bound, not both"}
		case !t.Bound && !validTableName(t.PhysicalName(name)):
			return &FieldError{Field: at + ".name", Reason: fmt.Sprintf("%q is not a DynamoDB table name or ARN", t.PhysicalName(name))}
		case t.PartitionKey == "":
			return &FieldError{Field: at + ".partition_key", Reason: "is required"}
		case t.SortKey == t.PartitionKey:
			return &FieldError{Field: at + ".sort_key", Reason: "is the partition key"}
		case len(t.Actions) == 0:
			return &FieldError{Field: at + ".actions", Reason: "is empty; list what effects do to the table: put, update, delete, check"}
		}
		for i, a := range t.Actions {
			if TableActions[a] == "" {
				return &FieldError{Field: fmt.Sprintf("%s.actions[%d]", at, i), Reason: fmt.Sprintf("%q is not put, update, delete or check", a)}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Targets)) {
		tg, at := f.Targets[name], "targets."+name
		if tg == nil {
			return &FieldError{Field: at, Reason: "is null"}
		}
		if inv, ok := errors.AsType[*dedup.InvalidError](dedup.ValidateTargetName(name)); ok {
			return &FieldError{Field: at, Reason: "name " + inv.Reason + ": no intent can name this target"}
		}
		if tg.Type == "" {
			tg.Type = TargetHTTP
		}
		if tg.MaxInFlight < 0 || tg.MaxInFlight > 1000 {
			return &FieldError{Field: at + ".max_in_flight", Reason: fmt.Sprintf("%d: must be between 1 and 1000 calls at once (leave it out for no cap)", tg.MaxInFlight)}
		}
		if math.IsNaN(tg.Rate) || tg.Rate < 0 || tg.Rate > 500 || (tg.Rate > 0 && tg.Rate < 0.01) {
			return &FieldError{Field: at + ".rate", Reason: fmt.Sprintf("%g: must be between 0.01 and 500 calls a second (leave it out for no cap)", tg.Rate)}
		}
		switch tg.Delivery {
		case "":
			tg.Delivery = AtLeastOnce
		case AtLeastOnce, AtMostOnce:
		default:
			return &FieldError{Field: at + ".delivery", Reason: fmt.Sprintf("%q is not %q or %q", tg.Delivery, AtLeastOnce, AtMostOnce)}
		}
		if tg.Type != TargetHTTP {
			if err := tg.validateAWS(at); err != nil {
				return err
			}
			continue
		}
		if tg.Bound {
			return &FieldError{Field: at + ".bound", Reason: "only AWS targets (sqs, sns, eventbridge, stepfunctions, lambda) are bound; an http target names its url"}
		}
		if tg.ARN != "" || tg.GroupID != "" || tg.Source != "" || tg.DetailType != "" || tg.Invocation != "" {
			return &FieldError{Field: at, Reason: "an http target takes url, timeout, headers, delivery, max_in_flight and rate only"}
		}
		u, err := url.Parse(tg.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return &FieldError{Field: at + ".url", Reason: fmt.Sprintf("%q is not an absolute http(s) URL", tg.URL)}
		}
		if err := tg.checkTimeout(at); err != nil {
			return err
		}
		for _, h := range slices.Sorted(maps.Keys(tg.Headers)) {
			field := at + ".headers." + h
			switch textproto.CanonicalMIMEHeaderKey(h) {
			case "Idempotency-Key", "Content-Type", "Content-Length", "Host", "Transfer-Encoding", "Connection":
				return &FieldError{Field: field, Reason: "is set by the outbox itself (the idempotency key is the event's; the body is JSON) and cannot be configured"}
			}
			if !httpguts.ValidHeaderFieldName(h) {
				return &FieldError{Field: field, Reason: "is not an HTTP header name"}
			}
			if !httpguts.ValidHeaderFieldValue(tg.Headers[h]) {
				return &FieldError{Field: field, Reason: "has a value with control characters"}
			}
		}
	}
	return nil
}

// BindingProps names, per AWS target type, the prop of infra's Props that binds a target of
// that type to a resource of the CDK app.
var BindingProps = map[string]string{
	TargetSQS: "QueueBindings", TargetSNS: "TopicBindings", TargetEventBridge: "EventBusBindings",
	TargetStepFunctions: "StateMachineBindings", TargetLambda: "FunctionBindings",
}

// arnKinds are the ARN service and resource prefix each AWS target type names.
var arnKinds = map[string][2]string{
	TargetSQS: {"sqs", ""}, TargetSNS: {"sns", ""}, TargetEventBridge: {"events", "event-bus/"},
	TargetStepFunctions: {"states", "stateMachine:"}, TargetLambda: {"lambda", "function:"},
}

// validateAWS checks an AWS target: a known type, the ARN of its kind of resource, and only
// the fields its type takes.
func (t *Target) validateAWS(at string) error {
	kind, ok := arnKinds[t.Type]
	if !ok {
		return &FieldError{Field: at + ".type", Reason: fmt.Sprintf("%q is not http, sqs, sns, eventbridge, stepfunctions or lambda", t.Type)}
	}
	if t.URL != "" || len(t.Headers) > 0 {
		return &FieldError{Field: at, Reason: "url and headers are for http targets; an " + t.Type + " target names its resource by arn"}
	}
	// A bound target's ARN comes from the CDK app (File.Bind): what depends on it is checked
	// then, and at synth.
	unbound := t.Bound && !t.resolved
	switch {
	case unbound && t.ARN != "":
		return &FieldError{Field: at + ".arn", Reason: fmt.Sprintf("is set, and the target is bound: a bound target takes its ARN from the CDK app (infra's Props.%s); set arn or bound, not both", BindingProps[t.Type])}
	case unbound:
	case t.ARN == "" && t.Type == TargetEventBridge && !t.resolved: // a binding names a bus
		t.ARN = "default"
	case t.ARN == "":
		return &FieldError{Field: at + ".arn", Reason: fmt.Sprintf(`is required: the ARN of the %s resource, or "bound": true for one the CDK app binds (infra's Props.%s)`, t.Type, BindingProps[t.Type])}
	}
	p := strings.SplitN(t.ARN, ":", 6)
	named := t.Type == TargetEventBridge && !strings.HasPrefix(t.ARN, "arn:") && validBusName(t.ARN)
	if !unbound && !named && (len(p) != 6 || p[0] != "arn" || p[2] != kind[0] || !strings.HasPrefix(p[5], kind[1]) || len(p[5]) == len(kind[1])) {
		return &FieldError{Field: at + ".arn", Reason: fmt.Sprintf("%q is not the ARN of a %s resource (arn:aws:%s:<region>:<account>:%s...)", t.ARN, t.Type, kind[0], kind[1])}
	}
	if err := t.checkTimeout(at); err != nil {
		return err
	}
	fifo := strings.HasSuffix(t.ARN, ".fifo") || unbound // a bound queue's or topic's: at synth and at File.Bind
	switch {
	case t.GroupID != "" && !((t.Type == TargetSQS || t.Type == TargetSNS) && fifo):
		return &FieldError{Field: at + ".group_id", Reason: "is for FIFO queues and topics (their ARN ends in .fifo)"}
	case (t.Source != "" || t.DetailType != "") && t.Type != TargetEventBridge:
		return &FieldError{Field: at, Reason: "source and detail_type are for eventbridge targets"}
	case t.Invocation != "" && t.Type != TargetLambda:
		return &FieldError{Field: at + ".invocation", Reason: "is for lambda targets"}
	case t.Invocation != "" && t.Invocation != "event" && t.Invocation != "request-response":
		return &FieldError{Field: at + ".invocation", Reason: fmt.Sprintf("%q is not event or request-response", t.Invocation)}
	case t.Type == TargetLambda && t.Invocation != "request-response" && t.Delivery == AtMostOnce:
		// Lambda's event queue retries a failed run twice and may deliver an event more than
		// once: a call it accepted is not one run (outbox/targets.Lambda.Check).
		return &FieldError{Field: at + ".invocation", Reason: "an asynchronous invocation (event, the default) cannot be at-most-once: Lambda retries it and may deliver it twice; use request-response"}
	}
	return nil
}

// checkTimeout bounds a target's per-call timeout.
func (t *Target) checkTimeout(at string) error {
	if time.Duration(t.Timeout) < 0 || time.Duration(t.Timeout) > 10*time.Minute {
		return &FieldError{Field: at + ".timeout", Reason: "must be between 0 (default 10s) and 10m"}
	}
	return nil
}

// validBusName accepts EventBridge's bus names (1-256 of a-z A-Z 0-9 . _ - /).
func validBusName(s string) bool { return len(s) >= 1 && len(s) <= 256 && onlyNameChars(s, "._-/") }

// validTableName accepts DynamoDB's table names (3-255 of a-z A-Z 0-9 _ - .) and table ARNs.
func validTableName(s string) bool {
	if strings.HasPrefix(s, "arn:") {
		return strings.Contains(s, ":table/")
	}
	return len(s) >= 3 && len(s) <= 255 && onlyNameChars(s, "_-.")
}

// onlyNameChars reports whether s holds only ASCII letters, digits and the runes of extra.
func onlyNameChars(s, extra string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(extra, r))
	})
}

func (s *Source) validate(at string) error {
	var ie *webhook.InvalidError
	scheme, err := s.WebhookScheme()
	if errors.As(err, &ie) { // the receiver's own build is the one check
		field := map[string]string{"name": "scheme", "Tolerance": "timestamp_tolerance", "URL": "url"}[ie.Field]
		return &FieldError{Field: at + "." + cmp.Or(field, "hmac."+strings.ToLower(ie.Field)), Reason: ie.Reason}
	}
	if err := s.validateKeys(at); err != nil {
		return err
	}
	for i, r := range s.Secrets {
		if nonEmpty(r.Env, r.SecretsManager, r.SSM) != 1 {
			return &FieldError{Field: fmt.Sprintf("%s.secrets[%d]", at, i), Reason: "set exactly one of env, secretsmanager, ssm"}
		}
	}

	p := Presets[s.Scheme]
	if s.RetryHorizon == 0 {
		s.RetryHorizon = Duration(p.RetryHorizon)
		if p.RetryHorizon == 0 {
			return &FieldError{Field: at + ".retry_horizon", Reason: "is required: the " + s.Scheme + " scheme's provider documents no retry horizon to default to"}
		}
	}
	if err := s.validateBody(at); err != nil {
		return err
	}
	for _, l := range []struct {
		field    string
		loc      **Locator
		required bool
		preset   *Locator
	}{
		{"event_id", &s.EventID, true, p.EventID},
		{"event_type", &s.EventType, true, p.EventType},
		{"delivery_id", &s.DeliveryID, false, p.DeliveryID},
		{"occurred_at", &s.OccurredAt, false, p.OccurredAt},
	} {
		// A preset locator that cannot apply to the body (a JSON path for a form, a header for
		// a batch's events) is left out: a required one must then be located by the source.
		if pl := l.preset; *l.loc == nil && pl != nil && !(s.Body == BodyForm && pl.JSON != "") && !(s.Batch && pl.JSON == "") {
			c := *pl // a copy: editing one source cannot change another
			*l.loc = &c
		}
		loc, field := *l.loc, at+"."+l.field
		if loc == nil {
			if l.required && l.preset != nil {
				body := s.Body
				if s.Batch {
					body = "a batch"
				}
				return &FieldError{Field: field, Reason: "is required: the " + s.Scheme + " preset's " + l.preset.String() + " cannot be read from this source's body (" + body + ")"}
			}
			if l.required {
				return &FieldError{Field: field, Reason: "is required: the " + s.Scheme + " scheme has no default location"}
			}
			continue
		}
		if nonEmpty(loc.Header, loc.JSON, loc.Form) != 1 {
			return &FieldError{Field: field, Reason: "set exactly one of header, json, form"}
		}
		switch {
		case loc.Form != "" && s.Body != BodyForm:
			return &FieldError{Field: field + ".form", Reason: `locates a form key, and the body is ` + s.Body + `: set "body": "form"`}
		case s.Batch && (loc.JSON == "" || loc.ScopeHeader != ""):
			return &FieldError{Field: field, Reason: "a batch's events cannot be told apart by a header: locate it in each event with a json path"}
		case loc.JSON != "" && s.Body == BodyForm:
			return &FieldError{Field: field + ".json", Reason: `locates a JSON path, and the body is a form: locate a form key, or set "body": "form:<key>" for a form field holding JSON`}
		}
		if err := CheckJSONPath(loc.JSON); loc.JSON != "" && err != nil {
			return &FieldError{Field: field + ".json", Reason: err.Error()}
		}
	}

	if s.MaxBodyBytes < 0 || s.MaxBodyBytes > maxBody {
		return &FieldError{Field: at + ".max_body_bytes", Reason: fmt.Sprintf("must be between 0 (default %d) and %d, the largest body that fits Lambda's request limit once API Gateway has wrapped and base64-encoded it", DefaultMaxBodyBytes, maxBody)}
	}
	if s.MaxBodyBytes == 0 {
		s.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if s.DeliveryTimeout == 0 {
		s.DeliveryTimeout = Duration(DeliveryTimeouts[s.Scheme])
	}
	if d := time.Duration(s.DeliveryTimeout); d < 2*time.Second || d > 29*time.Second {
		// 29 s: API Gateway's integration timeout; under 2 s there is no room to answer at all.
		return &FieldError{Field: at + ".delivery_timeout", Reason: "must be between 2s and 29s (API Gateway's limit)"}
	}
	switch s.UnknownTypes {
	case "":
		s.UnknownTypes = UnknownTypesClaim
	case UnknownTypesClaim, UnknownTypesIgnore:
	default:
		return &FieldError{Field: at + ".unknown_types", Reason: fmt.Sprintf("%q is not %q or %q", s.UnknownTypes, UnknownTypesClaim, UnknownTypesIgnore)}
	}
	switch s.ReplayGuard {
	case "":
		s.ReplayGuard = ReplayGuardOff
		switch {
		case s.Scheme == "shopify" && !s.IDSigned():
			// One merchant action fans out to several topics, each its own webhook id, possibly
			// with equal bodies: each topic's event is its own (docs/receiver.md, the trade-off).
			s.ReplayGuard = ReplayGuardBodyAndType
		case !s.IDSigned():
			s.ReplayGuard = ReplayGuardBody
		}
	case ReplayGuardBody, ReplayGuardBodyAndType, ReplayGuardOff:
	default:
		return &FieldError{Field: at + ".replay_guard", Reason: fmt.Sprintf("%q is not %q, %q or %q", s.ReplayGuard, ReplayGuardBody, ReplayGuardBodyAndType, ReplayGuardOff)}
	}
	if s.ReplayGuard == ReplayGuardOff && s.Scheme == "twilio" && !s.IDSigned() {
		// Twilio's ids are never signed: without the guard a captured callback replays without limit.
		return &FieldError{Field: at + ".replay_guard", Reason: `cannot be "off" for twilio: its event id is not signed (a header, or a form field Twilio signs without delimiters), so the guard is what refuses a captured callback's replays`}
	}
	// Public keys are in the file: the receiver's own check of them runs here too (last, so
	// that the entry's other faults are named first).
	if err := webhook.CheckSecrets(scheme, s.PublicKeys); PublicKeyScheme(s.Scheme) && errors.As(err, &ie) {
		return &FieldError{Field: at + ".public_keys" + strings.TrimPrefix(ie.Field, "secrets"), Reason: ie.Reason}
	}
	return nil
}

// validateKeys checks the source's secrets, or its public keys for a public-key scheme.
func (s *Source) validateKeys(at string) error {
	if PublicKeyScheme(s.Scheme) {
		if len(s.Secrets) > 0 {
			return &FieldError{Field: at + ".secrets", Reason: "the " + s.Scheme + " scheme verifies with the provider's public keys: list them in public_keys"}
		}
		if len(s.PublicKeys) == 0 {
			return &FieldError{Field: at + ".public_keys", Reason: "is empty; the " + s.Scheme + " scheme verifies with the provider's public keys"}
		}
		return nil // each is parsed last, as the receiver parses it (Source.validate)
	}
	if len(s.PublicKeys) > 0 {
		return &FieldError{Field: at + ".public_keys", Reason: "only the public-key schemes (discord, sendgrid) take it; the " + s.Scheme + " scheme verifies with secrets"}
	}
	if len(s.Secrets) == 0 {
		return &FieldError{Field: at + ".secrets", Reason: "is empty; a source without a secret cannot be verified"}
	}
	return nil
}

// validateBody checks url, body and batch, and fills the body's default.
func (s *Source) validateBody(at string) error {
	if strings.Contains(s.URL, "?") { // a URL webhook.New accepted (Source.validate)
		// The provider signs the query it calls with, which it may extend (Twilio appends
		// bodySHA256): the receiver takes it from each request, as signed.
		return &FieldError{Field: at + ".url", Reason: fmt.Sprintf("%q has a query string: give the URL up to its path; the query is read from each request, where the provider signed it", s.URL)}
	}
	if s.Body == "" {
		s.Body = BodyJSON
		if s.Scheme == "twilio" {
			s.Body = BodyForm
		}
	}
	if s.Scheme == "sendgrid" {
		s.Batch = true // SendGrid posts nothing but batches
	}
	if s.Batch && s.Body != BodyJSON {
		return &FieldError{Field: at + ".batch", Reason: "a batch is a JSON array: the body must be json"}
	}
	switch {
	case s.MaxBatchEvents < 0:
		return &FieldError{Field: at + ".max_batch_events", Reason: fmt.Sprintf("must not be negative (0: the default, %d)", DefaultMaxBatchEvents)}
	case s.MaxBatchEvents > 0 && !s.Batch:
		return &FieldError{Field: at + ".max_batch_events", Reason: "only a batch source (batch: true) takes it"}
	case s.MaxBatchEvents == 0 && s.Batch:
		s.MaxBatchEvents = DefaultMaxBatchEvents
	}
	if _, formJSON := s.FormPayload(); !formJSON && s.Body != BodyJSON && s.Body != BodyForm {
		return &FieldError{Field: at + ".body", Reason: fmt.Sprintf(`%q is not "json", "form" or "form:<key>"`, s.Body)}
	}
	return nil
}

func nonEmpty(vs ...string) int {
	n := 0
	for _, v := range vs {
		if v != "" {
			n++
		}
	}
	return n
}
