// Package sources reads a deployment's sources file: the providers a receiver accepts, how
// each signs its deliveries, where its secrets come from, where its event id, type and
// delivery id live, and how long its claims must be kept.
//
// One file serves the receiver (which refuses to start on an invalid file), the CDK stack
// (whose synth fails on one) and the operator's CLI. Example:
//
//	{
//	  "sources": {
//	    "stripe": {
//	      "scheme": "stripe",
//	      "secrets": [{"secretsmanager": "oncehook/stripe"}, {"env": "STRIPE_PREVIOUS_SECRET"}],
//	      "retry_horizon": "3d",
//	      "redrive_window": "30d"
//	    }
//	  }
//	}
//
// Where a scheme knows its provider, the event id, type and delivery id locations default to
// the provider's documented ones (see Presets); any of them can be overridden.
package sources

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/webhook"
)

// File is a parsed sources file.
type File struct {
	Sources map[string]*Source `json:"sources"`
	// Targets configures the outbox worker's built-in executors, per intent target: HTTP, or
	// an AWS service (Target.Type).
	Targets map[string]*Target `json:"targets,omitempty"`
	// Tables are the application's own DynamoDB tables that planners' effects write in the
	// claim's transaction (dedup.Effect.In), by the name planners use.
	Tables map[string]*Table `json:"tables,omitempty"`

	warnings []Warning
}

// Table is one of the application's own tables: its name in DynamoDB (the key it is listed
// under when empty), or "bound" to a table the CDK app defines, its key attributes, and what
// effects do to it, which is what the stack grants the receiver on it.
type Table struct {
	Name string `json:"name,omitempty"`
	// Bound says the table's name is not in the file: the CDK app binds the entry to a table
	// (infra's Props.TableBindings) and hands the functions its name, which File.Bind applies
	// at start. A bound table has no name.
	Bound        bool     `json:"bound,omitempty"`
	PartitionKey string   `json:"partition_key"`
	SortKey      string   `json:"sort_key,omitempty"`
	Actions      []string `json:"actions"` // put, update, delete, check
	// Audit has the sweeper sample the table for records written outside a claim (no
	// claimed_by), as it does oncehook's own (dedup.Auditor): for a table only put effects
	// write. The stack grants the sweeper dynamodb:Scan on it.
	Audit bool `json:"audit,omitempty"`

	resolved bool // Bound, and given its name by File.Bind
}

// The values of Table.Actions, and the DynamoDB actions each needs.
var TableActions = map[string]string{
	"put": "dynamodb:PutItem", "update": "dynamodb:UpdateItem", "delete": "dynamodb:DeleteItem", "check": "dynamodb:ConditionCheckItem",
}

// DedupTables returns the tables as the dedup core takes them. A bound table File.Bind has not
// named goes without a name (the store then knows it by the name planners use, which is what a
// store that writes nothing, receivertest's, needs); launch binds the file before it builds
// the store, and refuses to start with a bound table left unnamed.
func (f *File) DedupTables() map[string]dedup.TableKeys {
	if len(f.Tables) == 0 {
		return nil
	}
	m := make(map[string]dedup.TableKeys, len(f.Tables))
	for name, t := range f.Tables {
		m[name] = dedup.TableKeys{Name: t.PhysicalName(name), PartitionKey: t.PartitionKey, SortKey: t.SortKey}
	}
	return m
}

// PhysicalName is the table's name in DynamoDB: its name, the name it is listed under, or,
// for a bound table, the name File.Bind gave it ("" until then).
func (t *Table) PhysicalName(listedAs string) string {
	if t.Name != "" || t.Bound {
		return t.Name
	}
	return listedAs
}

// Target is where the outbox worker sends one target's intents, each with its event's
// idempotency key: an HTTP POST (the Idempotency-Key header), or an AWS service (package
// outbox/targets says how each passes the key).
type Target struct {
	// Type is "http" (the default), "sqs", "sns", "eventbridge", "stepfunctions" or "lambda".
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url,omitempty"`     // http
	Timeout Duration          `json:"timeout,omitempty"` // per call; default 10 s
	Headers map[string]string `json:"headers,omitempty"` // http: static headers (no secrets: the file is not secret)
	// ARN is the AWS resource: the queue (sqs), topic (sns), event bus (eventbridge; a name
	// such as "default" serves too), state machine (stepfunctions) or function (lambda).
	ARN string `json:"arn,omitempty"`
	// Bound says the ARN is not in the file: the CDK app binds the target to a resource
	// (infra's Props.<BindingProps[Type]>) and hands the functions its ARN, which File.Bind
	// applies at start. Only AWS targets are bound; a bound target has no arn.
	Bound bool `json:"bound,omitempty"`
	// GroupID is a FIFO queue's or topic's message group; default one group per event.
	GroupID string `json:"group_id,omitempty"`
	// Source and DetailType name an EventBridge target's events; default "oncehook" and the
	// intent's name.
	Source     string `json:"source,omitempty"`
	DetailType string `json:"detail_type,omitempty"`
	// Invocation is a Lambda target's: "event" (the default: Lambda queues the call) or
	// "request-response" (the outbox waits, and retries a function error). An at-most-once
	// Lambda target must be request-response: Lambda's queue retries events itself.
	Invocation string `json:"invocation,omitempty"`
	// Delivery is "at-least-once" (the default: the downstream's dedup absorbs a resend) or
	// "at-most-once", for a downstream with no idempotency key: an attempt that may have been
	// sent is never sent again, and parks for a person instead (outbox.AtMostOnce).
	Delivery string `json:"delivery,omitempty"`
	// MaxInFlight caps the calls to the target under way at once, across every worker (every
	// outbox invocation and the sweeper). 1 to 1000; absent (0 here) is no cap, and a file that
	// writes 0 is refused.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// Rate caps the calls to the target started per second, across every worker: 0.01 to 500;
	// absent (0 here) is no cap, and a file that writes 0 is refused. A call a limit holds back
	// waits for its turn; it spends no attempt and never parks (outbox.Limit).
	Rate float64 `json:"rate,omitempty"`

	resolved bool // Bound, and given its ARN by File.Bind
}

// The values of Target.Delivery.
const (
	AtLeastOnce = "at-least-once"
	AtMostOnce  = "at-most-once"
)

// The values of Target.Type.
const (
	TargetHTTP          = "http"
	TargetSQS           = "sqs"
	TargetSNS           = "sns"
	TargetEventBridge   = "eventbridge"
	TargetStepFunctions = "stepfunctions"
	TargetLambda        = "lambda"
)

// QueueURL is an SQS target's queue URL, from its ARN (arn:aws:sqs:<region>:<account>:<name>).
func (t *Target) QueueURL() string {
	p := strings.Split(t.ARN, ":")
	if len(p) != 6 {
		return ""
	}
	return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", p[3], p[4], p[5])
}

// Source is one provider's configuration.
type Source struct {
	// Scheme names the signature scheme: one of Schemes.
	Scheme string `json:"scheme"`
	// Secrets lists where the signing secrets come from. Several at once allow rotation: a
	// delivery signed by any of them is accepted.
	Secrets []SecretRef `json:"secrets,omitempty"`
	// PublicKeys are the provider's public keys, for the schemes that sign with a private key
	// (discord: hex Ed25519; sendgrid: base64 DER ECDSA), in place of Secrets: they are not
	// secret, so they live in the file. Several allow rotation.
	PublicKeys []string `json:"public_keys,omitempty"`
	// URL is the URL the provider calls, as configured there up to its path, for the schemes
	// that sign it (twilio, square); the query string is each request's own, as signed. Unset,
	// the receiver rebuilds it from the domain API Gateway served (never the Host header, which
	// the sender writes) and the raw path: set it when the provider's URL is not what API
	// Gateway sees (a custom domain with a mapping path, a CDN or a proxy in front).
	URL string `json:"url,omitempty"`
	// Body is the body's format: "json" (the default; "form" for twilio), "form"
	// (application/x-www-form-urlencoded, located by form key), or "form:<key>" (a form whose
	// <key> field holds the JSON payload, as Slack's interactivity and slash commands send;
	// locators, planners' fields and Event.Payload then read that JSON).
	Body string `json:"body,omitempty"`
	// Batch says the body is a JSON array of events, each with its own id (SendGrid's Event
	// Webhook), each claimed and planned as its own event (dedup.Store.CommitBatch); the
	// delivery gets 200 once every one is durably claimed. Locators must be JSON paths: a header
	// cannot tell a batch's events apart. Always true for sendgrid.
	Batch bool `json:"batch,omitempty"`
	// MaxBatchEvents is the most events a batch delivery may hold (413 beyond it, nothing
	// written): a batch the receiver cannot claim within its provider's timeout would be retried,
	// and refused, for ever. Only with batch; default DefaultMaxBatchEvents.
	MaxBatchEvents int `json:"max_batch_events,omitempty"`
	// HMAC configures the generic hmac-sha256 scheme (ignored by the others).
	HMAC *HMAC `json:"hmac,omitempty"`

	// EventID locates the provider's stable event id: the dedup key. Never a delivery id.
	EventID *Locator `json:"event_id,omitempty"`
	// EventType locates the event type ("order.paid").
	EventType *Locator `json:"event_type,omitempty"`
	// DeliveryID locates the per-attempt id, when the provider sends one; recorded and logged.
	DeliveryID *Locator `json:"delivery_id,omitempty"`
	// OccurredAt locates when the event happened (RFC 3339 string or Unix seconds); optional.
	OccurredAt *Locator `json:"occurred_at,omitempty"`

	// RetryHorizon is how long the provider retries a failed delivery, as it documents it.
	RetryHorizon Duration `json:"retry_horizon"`
	// RedriveWindow is how old an event a redrive or replay can bring back.
	RedriveWindow Duration `json:"redrive_window"`
	// Keep is how long claims live; default retry horizon + redrive window + dedup.DefaultMargin.
	Keep Duration `json:"keep,omitempty"`
	// TimestampTolerance bounds the signed time's distance from now for the schemes that sign
	// one (Linear's in the body); default webhook.DefaultTolerance(scheme).
	TimestampTolerance Duration `json:"timestamp_tolerance,omitempty"`
	// MaxBodyBytes is the largest body accepted (413 beyond it). Default DefaultMaxBodyBytes.
	MaxBodyBytes int `json:"max_body_bytes,omitempty"`
	// DeliveryTimeout is how long the provider waits for an answer before it retries: the
	// receiver answers 503 before then when DynamoDB is slow (a late 200 is a retry anyway),
	// and the stack sizes its timeout and latency alarm by the tightest. Default DeliveryTimeouts.
	DeliveryTimeout Duration `json:"delivery_timeout,omitempty"`
	// ReplayGuard is "body", "body+type" or "off". With "body", what the signature covers
	// (webhook.SignedContent) is claimed in the same write as the event id
	// (dedup.Event.GuardBody), so a signed delivery re-sent under a forged event id runs nothing.
	// "body+type" claims it with the event type, for a provider that sends one body under
	// several unsigned types (Shopify's topics). Default: "body+type" for shopify, "body" for
	// other sources whose signature does not cover the event id (IDSigned), else "off".
	ReplayGuard string `json:"replay_guard,omitempty"`
	// UnknownTypes is what the receiver does with an event type no planner is registered for:
	// "claim" (the default) claims it with an empty plan, so its redeliveries stay duplicates;
	// "ignore" answers 200 without claiming it, so a redelivery after the planner ships runs it.
	// Both count UnknownType.
	UnknownTypes string `json:"unknown_types,omitempty"`
}

// The values of Source.UnknownTypes.
const (
	UnknownTypesClaim  = "claim"
	UnknownTypesIgnore = "ignore"
)

// DeliveryTimeouts are the schemes' providers' delivery timeouts, as documented.
var DeliveryTimeouts = map[string]time.Duration{
	"github":            10 * time.Second, // "GitHub expects a response within 10 seconds" (docs.github.com, Best practices)
	"shopify":           5 * time.Second,  // shopify.dev, webhooks best practices
	"standard-webhooks": 15 * time.Second, // the Svix-operated senders' (docs.svix.com, retries); the standard sets none
	"stripe":            10 * time.Second, // Stripe publishes no number: a conservative bound
	"hmac-sha256":       10 * time.Second, // unknown provider
	"svix":              15 * time.Second, // docs.svix.com/retries
	"slack":             3 * time.Second,  // api.slack.com/apis/events-api
	"paddle":            5 * time.Second,  // developer.paddle.com/webhooks/respond-to-webhooks
	"pagerduty":         5 * time.Second,  // developer-docs, webhooks/02-Behavior.md
	"linear":            5 * time.Second,  // linear.app/developers/webhooks
	"twitch":            3 * time.Second,  // "a few seconds"
	"zoom":              3 * time.Second,  // developers.zoom.us/docs/api/webhooks
	"intercom":          5 * time.Second,  // developers.intercom.com, webhook notifications
	"twilio":            15 * time.Second, // for all attempts, 5 s to connect (the connection overrides' defaults)
	"square":            10 * time.Second, // developer.squareup.com/docs/webhooks/troubleshooting
	"discord":           3 * time.Second,  // discord.com/developers/docs/events/webhook-events
	"sendgrid":          10 * time.Second, // SendGrid publishes no number
}

// The values of Source.ReplayGuard.
const (
	ReplayGuardBody        = "body"
	ReplayGuardBodyAndType = "body+type"
	ReplayGuardOff         = "off"
)

// Guarded reports whether the source claims its deliveries' signed content with their event id
// (ReplayGuard "body" or "body+type").
func (s *Source) Guarded() bool {
	return s.ReplayGuard == ReplayGuardBody || s.ReplayGuard == ReplayGuardBodyAndType
}

// ScopedIDs reports whether a header scopes the source's event ids: its claims' ids are
// <that header's value>:<the provider's id> (GitHub's hook id and delivery GUID). False for a
// nil source.
func (s *Source) ScopedIDs() bool { return s != nil && s.EventID != nil && s.EventID.ScopeHeader != "" }

// IDSigned reports whether the signature covers the event id (and its scope): an id read from
// the body is signed by every scheme, a header only by a scheme that signs it (webhook.Covers:
// Standard Webhooks signs webhook-id). Unsigned, a captured delivery can be re-sent under any
// id. A Twilio form field is not a signed id: Twilio signs names and values run together, so a
// field can swallow the ones after it and still verify (webhook.SignsFields).
func (s *Source) IDSigned() bool {
	l := s.EventID
	if l == nil || l.ScopeHeader != "" {
		return false
	}
	scheme, _ := webhook.New(s.Scheme, webhook.Options{}) // nil for hmac-sha256, which signs no header
	switch {
	case l.Form != "":
		return webhook.SignsFields(scheme)
	case l.JSON != "":
		return true // in the body, which every scheme signs
	}
	return slices.ContainsFunc(webhook.Covers(scheme).Headers, func(h string) bool { return strings.EqualFold(h, l.Header) })
}

// TimeSigned reports whether the event's time is read from the signed body (an occurred_at
// JSON locator): then a delivery older than the retention can be refused, since past it the
// event's claim may be gone and a replay could not be told from a new event.
func (s *Source) TimeSigned() bool {
	return s.OccurredAt != nil && (s.OccurredAt.JSON != "" || s.OccurredAt.Form != "")
}

// The values of Source.Body.
const (
	BodyJSON = "json"
	BodyForm = "form"
	// BodyFormPrefix starts "form:<key>", a form whose <key> field holds the JSON payload.
	BodyFormPrefix = "form:"
)

// FormPayload returns the form key holding the JSON payload when Body is "form:<key>".
func (s *Source) FormPayload() (string, bool) {
	key, ok := strings.CutPrefix(s.Body, BodyFormPrefix)
	return key, ok && key != ""
}

// PublicKeyScheme reports whether the scheme verifies with the provider's public keys
// (public_keys) rather than shared secrets.
func PublicKeyScheme(scheme string) bool { return schemeIs[webhook.PublicKeyScheme](scheme) }

// URLScheme reports whether the scheme signs the URL the provider called (url).
func URLScheme(scheme string) bool { return schemeIs[webhook.URLVerifier](scheme) }

// schemeIs reports whether the named scheme is a T: package webhook says which scheme is which.
func schemeIs[T webhook.Scheme](name string) bool {
	s, _ := webhook.New(name, webhook.Options{})
	_, ok := s.(T)
	return ok
}

// WebhookScheme builds the source's signature scheme as the receiver verifies it: its
// timestamp_tolerance, its url, and for hmac-sha256 its hmac block. Bad settings give a
// *webhook.InvalidError naming the webhook.Options field; Parse refuses a file holding one.
func (s *Source) WebhookScheme() (webhook.Scheme, error) {
	opts := webhook.Options{Tolerance: time.Duration(s.TimestampTolerance), URL: s.URL}
	if s.Scheme == webhook.HMACSHA256 && s.HMAC != nil { // the other schemes ignore the block
		opts.Header, opts.Encoding, opts.Prefix = s.HMAC.Header, s.HMAC.Encoding, s.HMAC.Prefix
	}
	return webhook.New(s.Scheme, opts)
}

// DefaultMaxBodyBytes is the body limit when a source sets none: far above ordinary webhook
// payloads, far below Lambda's 6 MB request limit.
const DefaultMaxBodyBytes = 1 << 20

// DefaultMaxBatchEvents is a batch source's event limit when it sets none: twice what a
// SendGrid batch holds at its 768 KB flush size with events of ordinary size, and 50
// transactions of DynamoDB's 100 items, written well within a delivery timeout.
const DefaultMaxBatchEvents = 5000

// HMAC configures the generic hmac-sha256 scheme.
type HMAC struct {
	Header   string `json:"header"`             // e.g. "X-Signature"
	Encoding string `json:"encoding,omitempty"` // "hex" (default) or "base64"
	Prefix   string `json:"prefix,omitempty"`   // e.g. "sha256="
}

// SecretRef says where one secret comes from: exactly one of its fields is set.
type SecretRef struct {
	Env            string `json:"env,omitempty"`            // an environment variable
	SecretsManager string `json:"secretsmanager,omitempty"` // a Secrets Manager secret name or ARN (SecretString)
	SSM            string `json:"ssm,omitempty"`            // an SSM parameter name (SecureString decrypted)
}

func (r SecretRef) String() string {
	switch {
	case r.Env != "":
		return "env:" + r.Env
	case r.SecretsManager != "":
		return "secretsmanager:" + r.SecretsManager
	case r.SSM != "":
		return "ssm:" + r.SSM
	}
	return "(empty)"
}

// Locator says where a value lives in a delivery: a header, a dot-separated path into the
// JSON body, or a form key of a form body. ScopeHeader, when set, prefixes the value with that
// header's value and ':' (GitHub delivery GUIDs are scoped by the hook that sent them).
type Locator struct {
	Header      string `json:"header,omitempty"`
	JSON        string `json:"json,omitempty"`
	Form        string `json:"form,omitempty"`
	ScopeHeader string `json:"scope_header,omitempty"`
}

func (l *Locator) String() string {
	s := "json:" + l.JSON
	switch {
	case l.Header != "":
		s = "header:" + l.Header
	case l.Form != "":
		s = "form:" + l.Form
	}
	if l.ScopeHeader != "" {
		s = "header:" + l.ScopeHeader + " + " + s
	}
	return s
}

// Duration is a time.Duration that reads "72h", "90m" and also whole days, "30d": at most 3650 days.
type Duration time.Duration

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"72h\" or \"30d\"")
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration in the form UnmarshalJSON reads.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// String prints whole days as "30d" and anything else as Go does ("90m0s").
func (d Duration) String() string {
	v := time.Duration(d)
	if v == 0 || v%(24*time.Hour) != 0 {
		return v.String()
	}
	return strconv.FormatInt(int64(v/(24*time.Hour)), 10) + "d"
}

// CheckHost refuses what is not a host name alone: a trusted host whose Host header may stand
// for the URL a URL-signing source (twilio, square) was called at has no scheme, port or path.
func CheckHost(host string) error {
	if host == "" || strings.ContainsAny(host, "/:@ ") {
		return fmt.Errorf("%q is not a host name (no scheme, port or path)", host)
	}
	return nil
}

// CheckJSONPath refuses what is not a JSON path an event locator or a planner's field can
// name: object keys, none empty, separated by dots ("data.object.id"). Validate holds a
// file's locators to it, and the receiver the paths it compiles.
func CheckJSONPath(path string) error {
	if slices.Contains(strings.Split(path, "."), "") {
		return fmt.Errorf("%q is not a dot-separated path of object keys", path)
	}
	return nil
}

// maxDuration bounds every duration of the file: ten years, so that no sum of them (a
// retention: horizon, window and margin) overflows.
const maxDuration = 3650 * 24 * time.Hour

// ParseDuration is time.ParseDuration plus whole days ("30d"), at most 3650 days.
func ParseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 3650 {
			return 0, fmt.Errorf("invalid duration %q: want whole days such as \"30d\", at most 3650d", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v > maxDuration { // a negative one is refused by the field that takes it
		return 0, fmt.Errorf("invalid duration %q: want e.g. \"72h\" or \"30d\", at most 3650d", s)
	}
	return v, nil
}

// Load reads and validates a sources file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("sources: %s: %w", path, err)
	}
	return f, nil
}

// Parse reads and validates a sources file's content. Unknown fields are errors: a typo in
// "redrive_window" must not silently become zero. A decoding error names the entry it is in
// ("sources.stripe: unknown field \"secret\"").
func Parse(b []byte) (*File, error) {
	var f File
	if err := decodeStrict(b, &f); err != nil {
		if _, ok := err.(*FieldError); ok {
			return nil, err
		}
		return nil, fmt.Errorf("invalid sources file: %w", err)
	}
	// The fields each source and target writes: only the file tells a field written as its zero
	// value from one left out. (It decoded strictly above, so it decodes here.)
	var written struct {
		Sources map[string]map[string]jsontext.Value `json:"sources"`
		Targets map[string]map[string]jsontext.Value `json:"targets"`
	}
	_ = jsonv2.Unmarshal(b, &written, jsonOptions, jsonv2.RejectUnknownMembers(false))
	// A limit written as 0 is a mistake, not "no cap" (that is the field left out): in Go a
	// Target's zero limit is absent, so only the file can tell the two apart.
	for _, name := range slices.Sorted(maps.Keys(written.Targets)) {
		for _, field := range []string{"max_in_flight", "rate"} {
			if v, ok := written.Targets[name][field]; ok {
				if n, err := strconv.ParseFloat(string(v), 64); err == nil && n == 0 {
					return nil, &FieldError{Field: "targets." + name + "." + field, Reason: "0: leave the field out for no cap; a cap is at least 1 call at once (max_in_flight) or 0.01 a second (rate)"}
				}
			}
		}
	}
	preset := map[string]bool{} // retry horizons the file leaves to the scheme's preset
	for name, src := range f.Sources {
		preset[name] = src != nil && src.RetryHorizon == 0
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	for _, name := range f.Names() {
		if keys := written.Sources[name]; keys["redrive_window"] != nil || keys["keep"] != nil {
			continue // the team chose the retention itself
		}
		src := f.Sources[name]
		horizon := src.RetryHorizon.String()
		if preset[name] {
			horizon += ", the " + src.Scheme + " preset's"
		}
		f.warnings = append(f.warnings, Warning{Field: "sources." + name + ".redrive_window", Reason: fmt.Sprintf(
			"not set, so claims are kept %s (retry horizon %s, + %s): a redrive or replay of an older event runs it again; "+
				"set how old an event the provider can resend (\"0d\" if none)",
			Duration(src.Retention().Effective()), horizon, Duration(dedup.DefaultMargin))})
	}
	return &f, nil
}

// Warning is configuration that works but rests on a default the file did not choose, named
// by its field: the receiver logs each at start, the CDK app's synth and hookctl print them.
type Warning struct {
	Field  string
	Reason string
}

func (w Warning) String() string { return w.Field + ": " + w.Reason }

// Warnings are the file's warnings, from Parse or Load: today, each source whose retention
// rests on a redrive window it does not set (a Stripe source without redrive_window keeps its
// claims 17 days, and a redrive of older events would run them again).
func (f *File) Warnings() []Warning { return f.warnings }

// jsonOptions refuse unknown fields, and a name written twice: which one holds would be a guess
// (a later null would erase a cap; two entries of one source would be merged). A field's name
// matches only as written, not in any case, since the file's own checks of what it writes read
// names as written ("Max_In_Flight": 0 was no limit).
var jsonOptions = jsonv2.JoinOptions(jsonv2.RejectUnknownMembers(true), jsontext.AllowInvalidUTF8(true))

// decodeStrict decodes one JSON value into v, refusing unknown fields and trailing content. An
// error inside an entry of one of the file's maps is a *FieldError naming the entry
// (sources.<name>).
func decodeStrict(b []byte, v any) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsonOptions)
	err := jsonv2.UnmarshalDecode(dec, v, jsonOptions)
	serr, ok := errors.AsType[*jsonv2.SemanticError](err)
	switch {
	case err == nil:
		if _, err := dec.ReadToken(); err != io.EOF {
			return errors.New("content after the top-level object")
		}
		return nil
	case errors.Is(err, jsontext.ErrDuplicateName):
		if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok && se.JSONPointer != "" {
			return &FieldError{Field: strings.Join(slices.Collect(se.JSONPointer.Tokens()), "."), Reason: "is named twice"}
		}
		return err
	case !ok:
		return err
	}
	reason := strings.TrimPrefix(err.Error(), "json: ")
	switch {
	case serr.Err == jsonv2.ErrUnknownName:
		reason = fmt.Sprintf("unknown field %q", serr.JSONPointer.LastToken())
	case serr.Err != nil && serr.GoType == reflect.TypeFor[Duration](): // its own message says it all
		reason = serr.Err.Error()
	}
	if path := slices.Collect(serr.JSONPointer.Tokens()); len(path) >= 2 {
		return &FieldError{Field: path[0] + "." + path[1], Reason: reason}
	}
	return errors.New(reason)
}

// Names returns the source names in order.
func (f *File) Names() []string { return slices.Sorted(maps.Keys(f.Sources)) }

// Retentions returns each source's retention, for dedup.Config.
func (f *File) Retentions() map[string]dedup.Retention {
	m := make(map[string]dedup.Retention, len(f.Sources))
	for n, s := range f.Sources {
		m[n] = s.Retention()
	}
	return m
}

// Retention is the source's retention as the dedup core takes it.
func (s *Source) Retention() dedup.Retention {
	return dedup.Retention{
		RetryHorizon:  time.Duration(s.RetryHorizon),
		RedriveWindow: time.Duration(s.RedriveWindow),
		Keep:          time.Duration(s.Keep),
	}
}
