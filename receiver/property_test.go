package receiver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

// The property: for every scheme, no transformation of an accepted delivery that keeps its
// signature valid makes the receiver claim a second event, read another type, or answer a
// control message. Every transformed copy is a duplicate, a refused replay, or refused (4xx).
// The one exception is stated, not hidden: a Shopify source's guard is keyed by topic and body
// ("body+type", for Shopify's fan-out of one action to several topics), so a copy under another
// topic and another webhook id is a new event of that topic, once per topic.
//
// The transformations are the ones a holder of a captured delivery has: the headers the
// signature does not cover (altered, added, repeated, re-cased), the query string and the Host
// where the URL is not signed, the body's transfer encoding, and for Twilio, whose signature
// covers decoded, sorted fields run together, the form's order, encoding and field
// boundaries. webhook.Covers says what each scheme signs; the test first holds each scheme to
// it (a covered part changed breaks the signature), then checks every generated copy still
// verifies, so each copy is one an attacker could really send.

var updateDocs = flag.Bool("update-docs", false, "rewrite the signed-bytes table in docs/receiver.md")

// propertyCopies is how many random combinations of transformations each scheme's delivery
// gets (ONCEHOOK_PROPERTY_COPIES raises it for a longer run).
func propertyCopies(t *testing.T) int {
	if v := os.Getenv("ONCEHOOK_PROPERTY_COPIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ONCEHOOK_PROPERTY_COPIES=%q: want a positive number", v)
		}
		return n
	}
	return 25
}

// A propertyScheme is one source of each scheme, with a new event's delivery.
type propertyScheme struct {
	name string
	// delivery returns a new event's body and its request options, n making it unique.
	delivery func(n string, at time.Time) (string, []receivertest.Option)
	// planned are the event types planners are registered for: what an attacker would retype to.
	planned []string
}

// Every source waits the longest a provider does (29 s), so that a slow emulator under load
// answers in time: the property is about signatures, not deadlines.
const propertySourcesTemplate = `{"sources": {
  "standard-webhooks": {"scheme": "standard-webhooks", "secrets": [{"env": "P_SECRET_SW"}], "retry_horizon": "72h", "redrive_window": "1d", "delivery_timeout": "29s"},
  "svix":       {"scheme": "svix", "secrets": [{"env": "P_SECRET_SW"}], "redrive_window": "1d", "delivery_timeout": "29s"},
  "stripe":     {"scheme": "stripe", "secrets": [{"env": "P_SECRET"}], "redrive_window": "1d", "delivery_timeout": "29s"},
  "github":     {"scheme": "github", "secrets": [{"env": "P_SECRET"}], "retry_horizon": "1h", "redrive_window": "1d", "delivery_timeout": "29s"},
  "shopify":    {"scheme": "shopify", "secrets": [{"env": "P_SECRET"}], "retry_horizon": "48h", "redrive_window": "1d", "delivery_timeout": "29s"},
  "slack":      {"scheme": "slack", "secrets": [{"env": "P_SECRET"}], "redrive_window": "1d", "delivery_timeout": "29s"},
  "zoom":       {"scheme": "zoom", "secrets": [{"env": "P_SECRET"}], "event_id": {"json": "payload.object.uuid"}, "redrive_window": "1d", "delivery_timeout": "29s"},
  "paddle":     {"scheme": "paddle", "secrets": [{"env": "P_SECRET"}], "redrive_window": "1d", "delivery_timeout": "29s"},
  "pagerduty":  {"scheme": "pagerduty", "secrets": [{"env": "P_SECRET"}], "redrive_window": "1d", "delivery_timeout": "29s"},
  "linear":     {"scheme": "linear", "secrets": [{"env": "P_SECRET"}], "redrive_window": "1d", "delivery_timeout": "29s"},
  "intercom":   {"scheme": "intercom", "secrets": [{"env": "P_SECRET"}], "redrive_window": "1d", "delivery_timeout": "29s"},
  "twilio":     {"scheme": "twilio", "secrets": [{"env": "P_SECRET"}], "event_type": {"form": "MessageStatus"}, "redrive_window": "1d", "delivery_timeout": "29s"},
  "twilio-form-id": {"scheme": "twilio", "secrets": [{"env": "P_SECRET"}], "event_id": {"form": "SmsSid"}, "event_type": {"form": "MessageStatus"}, "redrive_window": "1d", "delivery_timeout": "29s"},
  "shopify-strict": {"scheme": "shopify", "secrets": [{"env": "P_SECRET"}], "replay_guard": "body", "retry_horizon": "48h", "redrive_window": "1d", "delivery_timeout": "29s"},
  "square":     {"scheme": "square", "secrets": [{"env": "P_SECRET"}], "redrive_window": "1d", "delivery_timeout": "29s"},
  "discord":    {"scheme": "discord", "public_keys": [%q], "event_id": {"json": "event.data.id"}, "redrive_window": "1d", "delivery_timeout": "29s"},
  "sendgrid":   {"scheme": "sendgrid", "public_keys": [%q], "redrive_window": "1d", "delivery_timeout": "29s"},
  "twitch":     {"scheme": "twitch", "secrets": [{"env": "P_SECRET"}], "retry_horizon": "1h", "redrive_window": "1d", "delivery_timeout": "29s"},
  "hmac-sha256": {"scheme": "hmac-sha256", "hmac": {"header": "X-Partner-Signature", "prefix": "sha256="}, "secrets": [{"env": "P_SECRET"}],
                  "event_id": {"header": "X-Partner-Id"}, "event_type": {"header": "X-Partner-Event"}, "delivery_id": {"header": "X-Partner-Delivery"},
                  "retry_horizon": "24h", "redrive_window": "1d", "delivery_timeout": "29s"}
}}`

var propertySecrets = map[string]string{"P_SECRET": "property-test-secret", "P_SECRET_SW": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}

func propertySchemes() []propertyScheme {
	rfc := func(at time.Time) string { return at.UTC().Format(time.RFC3339) }
	id := receivertest.WithEventID
	typ := receivertest.WithEventType
	return []propertyScheme{
		{"standard-webhooks", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"type":"payment.captured","timestamp":"` + rfc(at) + `","data":{"n":"` + n + `"}}`, []receivertest.Option{id("msg_" + n)}
		}, []string{"payment.captured", "payment.refunded"}},
		{"svix", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"type":"user.created","data":{"id":"user_` + n + `"}}`, []receivertest.Option{id("msg_" + n)}
		}, []string{"user.created", "user.deleted"}},
		{"stripe", func(n string, at time.Time) (string, []receivertest.Option) {
			return fmt.Sprintf(`{"id":"evt_%s","type":"charge.succeeded","created":%d}`, n, at.Unix()), nil
		}, []string{"charge.succeeded", "charge.refunded"}},
		{"github", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"action":"opened","number":"` + n + `"}`, []receivertest.Option{id("72d3162e-" + n), typ("push")}
		}, []string{"push", "release"}},
		{"shopify", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"id":"` + n + `","total_price":"403.00"}`, []receivertest.Option{id("wh_" + n), typ("orders/create")}
		}, []string{"orders/create", "orders/paid"}},
		{"shopify-strict", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"id":"` + n + `","total_price":"403.00"}`, []receivertest.Option{id("wh_" + n), typ("orders/create")}
		}, []string{"orders/create", "orders/paid"}},
		{"slack", func(n string, at time.Time) (string, []receivertest.Option) {
			return fmt.Sprintf(`{"type":"event_callback","event_id":"Ev%s","event":{"type":"app_mention","text":"hi"},"event_time":%d}`, n, at.Unix()), nil
		}, []string{"app_mention", "message"}},
		{"zoom", func(n string, at time.Time) (string, []receivertest.Option) {
			return fmt.Sprintf(`{"event":"meeting.started","event_ts":%d,"payload":{"object":{"uuid":"u%s"}}}`, at.UnixMilli(), n), nil
		}, []string{"meeting.started", "meeting.ended"}},
		{"paddle", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"event_id":"evt_` + n + `","event_type":"transaction.completed","occurred_at":"` + rfc(at) + `"}`, nil
		}, []string{"transaction.completed", "transaction.refunded"}},
		{"pagerduty", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"event":{"id":"` + n + `","event_type":"incident.triggered","occurred_at":"` + rfc(at) + `"}}`, nil
		}, []string{"incident.triggered", "incident.resolved"}},
		{"linear", func(n string, at time.Time) (string, []receivertest.Option) {
			return fmt.Sprintf(`{"action":"create","type":"Issue","data":{"id":"%s"},"webhookTimestamp":%d}`, n, at.UnixMilli()),
				[]receivertest.Option{id("d_" + n), receivertest.WithHeader("Linear-Event", "Issue")}
		}, []string{"Issue", "Comment"}},
		{"intercom", func(n string, at time.Time) (string, []receivertest.Option) {
			return fmt.Sprintf(`{"type":"notification_event","id":"notif_%s","topic":"conversation.user.created","created_at":%d}`, n, at.Unix()), nil
		}, []string{"conversation.user.created", "conversation.admin.closed"}},
		{"twilio", func(n string, at time.Time) (string, []receivertest.Option) {
			return "AccountSid=AC1&MessageSid=SM" + n + "&MessageStatus=delivered&SmsStatus=delivered&To=%2B15550100", []receivertest.Option{id("tok_" + n)}
		}, []string{"delivered", "failed"}},
		{"twilio-form-id", func(n string, at time.Time) (string, []receivertest.Option) {
			return "AccountSid=AC1&MessageStatus=delivered&SmsSid=SM" + n + "&SmsStatus=delivered&To=%2B15550100", nil
		}, []string{"delivered", "failed"}},
		{"square", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"type":"payment.updated","event_id":"` + n + `","created_at":"` + rfc(at) + `"}`, nil
		}, []string{"payment.updated", "refund.created"}},
		{"discord", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"version":1,"application_id":"1","type":1,"event":{"type":"ENTITLEMENT_CREATE","timestamp":"` + rfc(at) + `","data":{"id":"` + n + `"}}}`, nil
		}, []string{"ENTITLEMENT_CREATE", "APPLICATION_AUTHORIZED"}},
		{"sendgrid", func(n string, at time.Time) (string, []receivertest.Option) {
			return fmt.Sprintf(`[{"email":"a@example.com","timestamp":%d,"event":"delivered","sg_event_id":"%s-1","sg_message_id":"m"},`+
				`{"email":"b@example.com","timestamp":%d,"event":"open","sg_event_id":"%s-2","sg_message_id":"m"}]`, at.Unix(), n, at.Unix(), n), nil
		}, []string{"delivered", "open"}},
		{"twitch", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"subscription":{"id":"s1","status":"enabled","type":"channel.follow","version":"2"},"event":{"user_id":"` + n + `"}}`,
				[]receivertest.Option{id("m_" + n), receivertest.WithHeader("Twitch-Eventsub-Subscription-Type", "channel.follow")}
		}, []string{"channel.follow", "channel.subscription.gift"}},
		{"hmac-sha256", func(n string, at time.Time) (string, []receivertest.Option) {
			return `{"invoice":"` + n + `"}`, []receivertest.Option{id("inv_" + n), typ("invoice.paid")}
		}, []string{"invoice.paid", "invoice.voided"}},
	}
}

// A transformation changes a copy of a delivery without touching what its scheme signs.
type transformation struct {
	name string
	// applies says whether it can change anything of this source's deliveries.
	applies func(c *copyContext) bool
	apply   func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand)
}

// copyContext is what a transformation knows of the source it attacks.
type copyContext struct {
	src      *sources.Source
	coverage webhook.Coverage
	planned  []string
	// read are the unsigned headers the receiver reads for this source: the id, its scope, the
	// type, the delivery id, the time, and the headers that repeat the body (Twitch's, Linear's).
	read []string
}

func newCopyContext(src *sources.Source, s webhook.Scheme, planned []string) *copyContext {
	c := &copyContext{src: src, coverage: webhook.Covers(s), planned: planned}
	signed := map[string]bool{http.CanonicalHeaderKey(c.coverage.Signature): true}
	for _, h := range c.coverage.Headers {
		signed[http.CanonicalHeaderKey(h)] = true
	}
	add := func(h string) {
		if h != "" && !signed[http.CanonicalHeaderKey(h)] && !slices.Contains(c.read, strings.ToLower(h)) {
			c.read = append(c.read, strings.ToLower(h))
		}
	}
	for _, l := range []*sources.Locator{src.EventID, src.EventType, src.DeliveryID, src.OccurredAt} {
		if l != nil {
			add(l.Header)
			add(l.ScopeHeader)
		}
	}
	switch src.Scheme {
	case webhook.Twitch:
		add(webhook.TwitchTypeHeader)
		add(webhook.TwitchSubscriptionTypeHeader)
	case webhook.Linear:
		add(webhook.LinearEventHeader)
	}
	return c
}

// forged is a value an attacker would put in header h.
func (c *copyContext) forged(h string, rng *rand.Rand) string {
	switch {
	case strings.EqualFold(h, webhook.TwitchTypeHeader):
		return []string{webhook.TwitchRevocation, webhook.TwitchVerification, webhook.TwitchNotification}[rng.IntN(3)]
	case c.src.EventType != nil && strings.EqualFold(h, c.src.EventType.Header),
		strings.EqualFold(h, webhook.TwitchSubscriptionTypeHeader), strings.EqualFold(h, webhook.LinearEventHeader):
		return c.planned[rng.IntN(len(c.planned))]
	}
	return fmt.Sprintf("forged-%08x", rng.Uint32())
}

func cloneRequest(r events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPRequest {
	h := make(map[string]string, len(r.Headers))
	for k, v := range r.Headers {
		h[k] = v
	}
	r.Headers = h
	return r
}

func hasForm(c *copyContext) bool { return c.coverage.Fields }

var transformations = []transformation{
	{"unsigned header altered", func(c *copyContext) bool { return len(c.read) > 0 },
		func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
			h := c.read[rng.IntN(len(c.read))]
			r.Headers[h] = c.forged(h, rng)
		}},
	{"id and type headers altered", func(c *copyContext) bool {
		return c.src.EventID.Header != "" && !c.src.IDSigned() && c.src.EventType.Header != ""
	}, func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
		r.Headers[strings.ToLower(c.src.EventID.Header)] = c.forged(c.src.EventID.Header, rng)
		typ := c.src.EventType.Header
		others := slices.DeleteFunc(slices.Clone(c.planned), func(p string) bool { return p == r.Headers[strings.ToLower(typ)] })
		r.Headers[strings.ToLower(typ)] = others[rng.IntN(len(others))]
	}},
	{"unsigned header repeated", func(c *copyContext) bool { return len(c.read) > 0 },
		func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
			// Two of one header, as API Gateway joins them.
			h := c.read[rng.IntN(len(c.read))]
			if rng.IntN(2) == 0 {
				r.Headers[h] += "," + c.forged(h, rng)
			} else {
				r.Headers[h] = c.forged(h, rng) + "," + r.Headers[h]
			}
		}},
	{"unsigned header added", func(*copyContext) bool { return true },
		func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
			h := []string{"x-forwarded-host", "x-original-url", "x-http-method-override", "forwarded", "x-github-event", "x-shopify-topic", "webhook-id"}[rng.IntN(7)]
			if c.coverage.Signature != "" && strings.EqualFold(h, c.coverage.Signature) || slices.ContainsFunc(c.coverage.Headers, func(s string) bool { return strings.EqualFold(s, h) }) {
				h = "x-forged"
			}
			if _, ok := r.Headers[h]; !ok {
				r.Headers[h] = c.forged(h, rng)
			}
		}},
	{"header names re-cased", func(*copyContext) bool { return true },
		func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
			out := make(map[string]string, len(r.Headers))
			for _, k := range slices.Sorted(maps.Keys(r.Headers)) { // sorted: the seed alone decides
				v := r.Headers[k]
				if rng.IntN(2) == 0 {
					k = http.CanonicalHeaderKey(k)
				} else {
					k = strings.ToUpper(k)
				}
				out[k] = v
			}
			r.Headers = out
		}},
	{"query altered", func(c *copyContext) bool { return !c.coverage.URL },
		func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
			r.RawQueryString = "webhook-id=" + c.forged("", rng) + "&type=" + c.planned[rng.IntN(len(c.planned))]
		}},
	{"Host swapped", func(*copyContext) bool { return true },
		func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
			r.Headers["host"] = []string{"staging.example.com", "evil.example.com", "localhost"}[rng.IntN(3)]
		}},
	{"path with a trailing slash", func(c *copyContext) bool { return !c.coverage.URL },
		func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) { r.RawPath += "/" }},
	{"body sent base64", func(*copyContext) bool { return true },
		func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
			if !r.IsBase64Encoded {
				r.Body, r.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(r.Body)), true
			}
		}},
	{"form fields reordered", hasForm, func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
		editForm(r, func(fields []string) []string {
			rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
			return fields
		})
	}},
	{"form re-encoded", hasForm, func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
		editForm(r, func(fields []string) []string {
			for i, f := range fields {
				var b strings.Builder
				for j := 0; j < len(f); j++ {
					ch := f[j]
					if ch == '%' && j+2 < len(f) { // an escape already: kept whole
						b.WriteString(f[j : j+3])
						j += 2
						continue
					}
					if ch != '=' && rng.IntN(3) == 0 {
						fmt.Fprintf(&b, []string{"%%%02X", "%%%02x"}[rng.IntN(2)], ch)
						continue
					}
					b.WriteByte(ch)
				}
				fields[i] = b.String()
			}
			return fields
		})
	}},
	{"form field boundaries shifted", hasForm, func(c *copyContext, r *events.APIGatewayV2HTTPRequest, rng *rand.Rand) {
		editForm(r, func(fields []string) []string {
			// Sorted by name, a field can swallow the next whole ("A=1&B=2" -> "A=1B2"): the
			// names and values run together sign the same.
			slices.SortFunc(fields, func(a, b string) int { return strings.Compare(formName(a), formName(b)) })
			if len(fields) < 2 {
				return fields
			}
			i := 1 + rng.IntN(len(fields)-1)
			name, value, _ := strings.Cut(fields[i], "=")
			fields[i-1] += name + value
			return slices.Delete(fields, i, i+1)
		})
	}},
}

func formName(field string) string {
	name, _, _ := strings.Cut(field, "=")
	n, _ := url.QueryUnescape(name)
	return n
}

// editForm rewrites a form body's raw fields (still encoded) and keeps the request's body
// encoding as it was.
func editForm(r *events.APIGatewayV2HTTPRequest, edit func([]string) []string) {
	body := r.Body
	if r.IsBase64Encoded {
		b, _ := base64.StdEncoding.DecodeString(body)
		body = string(b)
	}
	body = strings.Join(edit(strings.Split(body, "&")), "&")
	if r.IsBase64Encoded {
		body = base64.StdEncoding.EncodeToString([]byte(body))
	}
	r.Body = body
}

// verifies reports whether the copy still carries a valid signature, as the receiver would
// check it: so that every copy the test sends is one an attacker could send.
func verifies(t *testing.T, s webhook.Scheme, secret string, r events.APIGatewayV2HTTPRequest, now time.Time) bool {
	t.Helper()
	h := http.Header{}
	for _, k := range slices.Sorted(maps.Keys(r.Headers)) { // a name sent twice: in one order
		h[http.CanonicalHeaderKey(k)] = append(h[http.CanonicalHeaderKey(k)], r.Headers[k])
	}
	body := []byte(r.Body)
	if r.IsBase64Encoded {
		body, _ = base64.StdEncoding.DecodeString(r.Body)
	}
	var err error
	if u, ok := s.(webhook.URLVerifier); ok {
		signed := "https://" + r.RequestContext.DomainName + r.RawPath
		if r.RawQueryString != "" {
			signed += "?" + r.RawQueryString
		}
		err = u.VerifyURL(signed, h, body, []string{secret}, now)
	} else {
		err = s.Verify(h, body, []string{secret}, now)
	}
	return err == nil
}

// answer classifies what the receiver did with one copy, from its log line.
func answer(line map[string]any) string {
	status := int(line["status"].(float64))
	switch {
	case line["error_kind"] == "challenge" || line["error_kind"] == "head":
		return "control"
	case line["error_kind"] == "ignored":
		return "ignored"
	case status >= 400:
		return strconv.Itoa(status)
	case line["events"] != nil: // a batch
		if line["accepted"].(float64) == 0 && line["absorbed"].(float64) == 0 && line["ignored"].(float64) == 0 {
			if line["replays"].(float64) > 0 {
				return "replay"
			}
			return "dup"
		}
		return "new"
	}
	switch line["outcome"] {
	case "duplicate":
		return "dup"
	case "replay":
		return "replay"
	}
	return "new"
}

type propertyRun struct {
	t       *testing.T
	e       *env
	file    *sources.File
	secrets map[string]string // per source: the secret or private key it is signed with
	now     time.Time
}

func (p *propertyRun) scheme(name string) webhook.Scheme {
	s, err := p.file.Sources[name].WebhookScheme()
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// verifySecret is what Verify takes for the source: its secret, or its public key.
func (p *propertyRun) verifySecret(name string) string {
	if keys := p.file.Sources[name].PublicKeys; len(keys) > 0 {
		return keys[0]
	}
	return p.secrets[name]
}

// send posts r and returns its answer and the claims the source then has.
func (p *propertyRun) send(name string, r events.APIGatewayV2HTTPRequest) string {
	p.t.Helper()
	p.e.post(r)
	return answer(p.e.lastLogLine())
}

func (p *propertyRun) original(sc propertyScheme, n string) events.APIGatewayV2HTTPRequest {
	p.t.Helper()
	body, opts := sc.delivery(n, p.now)
	req, err := receivertest.Request(p.file, sc.name, p.secrets[sc.name], []byte(body), append(opts, receivertest.WithTime(p.now))...)
	if err != nil {
		p.t.Fatal(err)
	}
	if got := p.send(sc.name, req); got != "new" {
		p.t.Fatalf("%s: the original delivery %s was answered %s, want accepted", sc.name, n, got)
	}
	return req
}

func newPropertyRun(t *testing.T) *propertyRun {
	t.Helper()
	sgPublic, sgPrivate := sendgridKey(t)
	file := fmt.Sprintf(propertySourcesTemplate, discordPublic, sgPublic)
	e := newEnv(t, withSources(file, propertySecrets))
	p := &propertyRun{t: t, e: e, file: e.file, secrets: map[string]string{}, now: e.clock()}
	for _, name := range e.file.Names() {
		switch {
		case name == "discord":
			p.secrets[name] = discordSeed
		case name == "sendgrid":
			p.secrets[name] = sgPrivate
		default:
			p.secrets[name] = propertySecrets[e.file.Sources[name].Secrets[0].Env]
		}
	}
	e.handler = e.handlerWith(func(pl *receiver.Planners) {
		for _, sc := range propertySchemes() {
			planEverything(sc.name, sc.planned...)(pl)
		}
	})
	return p
}

// TestEverySchemesCoverageIsWhatItSigns holds webhook.Covers to the schemes: each covered part
// changed breaks the signature, which the property test then relies on.
func TestEverySchemesCoverageIsWhatItSigns(t *testing.T) {
	t.Parallel()
	p := newPropertyRun(t)
	for _, sc := range propertySchemes() {
		s := p.scheme(sc.name)
		cov := webhook.Covers(s)
		body, opts := sc.delivery("cov", p.now)
		req, err := receivertest.Request(p.file, sc.name, p.secrets[sc.name], []byte(body), append(opts, receivertest.WithTime(p.now))...)
		if err != nil {
			t.Fatal(err)
		}
		if !verifies(t, s, p.verifySecret(sc.name), req, p.now) {
			t.Fatalf("%s: the delivery as signed does not verify", sc.name)
		}
		changed := map[string]func(r *events.APIGatewayV2HTTPRequest){}
		for _, h := range append([]string{cov.Signature}, cov.Headers...) {
			changed["header "+h] = func(r *events.APIGatewayV2HTTPRequest) {
				v := r.Headers[strings.ToLower(h)]
				r.Headers[strings.ToLower(h)] = v[:len(v)-1] + string("01"[(v[len(v)-1]+1)%2])
			}
		}
		if cov.Body || cov.Fields {
			changed["body"] = func(r *events.APIGatewayV2HTTPRequest) { r.Body = strings.Replace(r.Body, "cov", "coW", 1) }
		}
		if cov.URL {
			changed["query"] = func(r *events.APIGatewayV2HTTPRequest) { r.RawQueryString = "x=1" }
			changed["domain"] = func(r *events.APIGatewayV2HTTPRequest) { r.RequestContext.DomainName = "other.example.com" }
		}
		if len(changed) < 2 {
			t.Fatalf("%s: coverage %+v names too little to be what it signs", sc.name, cov)
		}
		for what, change := range changed {
			r := cloneRequest(req)
			change(&r)
			if verifies(t, s, p.verifySecret(sc.name), r, p.now) {
				t.Errorf("%s: its %s changed, the delivery still verifies: Covers says it is signed", sc.name, what)
			}
		}
	}
}

func TestNoSignedDeliveryCanBeTransformedIntoAnotherEvent(t *testing.T) {
	t.Parallel()
	p := newPropertyRun(t)
	seed := rand.Uint64()
	if v := os.Getenv("ONCEHOOK_PROPERTY_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("ONCEHOOK_PROPERTY_SEED=%q: want an unsigned number", v)
		}
	}
	t.Logf("seed %d (ONCEHOOK_PROPERTY_SEED reruns it)", seed)
	copies := propertyCopies(t)
	table := map[string]map[string]string{} // scheme -> transformation -> answers
	for _, sc := range propertySchemes() {
		src := p.file.Sources[sc.name]
		s := p.scheme(sc.name)
		c := newCopyContext(src, s, sc.planned)
		table[sc.name] = map[string]string{}
		originals, newTopics := 0, 0
		topics := map[string]bool{} // Shopify: the topics one event's claims hold
		// judge checks one copy's answer against the property and returns it.
		judge := func(orig, r events.APIGatewayV2HTTPRequest, what string) string {
			t.Helper()
			if !verifies(t, s, p.verifySecret(sc.name), r, p.now) {
				t.Fatalf("%s, %s: the copy's signature does not verify; the transformation is not one an attacker has", sc.name, what)
			}
			got := p.send(sc.name, r)
			for tries := 1; got == "503" && tries < 5; tries++ {
				// The store was slow or throttled (a loaded emulator against Slack's 2 s answer
				// deadline): nothing is decided yet, and the provider sends the copy again.
				got = p.send(sc.name, r)
			}
			switch got {
			case "dup", "replay":
			case "new":
				topic := headerOf(r, "x-shopify-topic")
				if src.ReplayGuard == sources.ReplayGuardBodyAndType && !topics[topic] {
					topics[topic] = true // the stated trade-off: another topic's event, once
					newTopics++
					return "new topic"
				}
				t.Errorf("%s, %s: a second claim (%v)", sc.name, what, r.Headers)
			case "control", "ignored":
				t.Errorf("%s, %s: answered as %s: the type or kind came from unsigned bytes (%v)", sc.name, what, got, r.Headers)
			default:
				if !strings.HasPrefix(got, "4") {
					t.Errorf("%s, %s: answered %s", sc.name, what, got)
				}
			}
			return got
		}
		// Each transformation alone, on an event of its own: the table.
		for i, tr := range transformations {
			if !tr.applies(c) {
				continue
			}
			orig := p.original(sc, fmt.Sprintf("t%d", i))
			originals++
			topics = map[string]bool{headerOf(orig, "x-shopify-topic"): true}
			rng := rand.New(rand.NewPCG(uint64(i), uint64(len(sc.name))))
			var answers []string
			for range 12 {
				r := cloneRequest(orig)
				tr.apply(c, &r, rng)
				if a := judge(orig, r, tr.name); !slices.Contains(answers, a) {
					answers = append(answers, a)
				}
			}
			slices.Sort(answers)
			table[sc.name][tr.name] = strings.Join(answers, ", ")
		}
		// Random combinations, on one event.
		orig := p.original(sc, "random")
		originals++
		topics = map[string]bool{headerOf(orig, "x-shopify-topic"): true}
		rng := rand.New(rand.NewPCG(seed, uint64(len(sc.name))))
		var usable []transformation
		for _, tr := range transformations {
			if tr.applies(c) {
				usable = append(usable, tr)
			}
		}
		for range copies {
			r := cloneRequest(orig)
			var names []string
			for range 1 + rng.IntN(4) {
				tr := usable[rng.IntN(len(usable))]
				tr.apply(c, &r, rng)
				names = append(names, tr.name)
			}
			judge(orig, r, strings.Join(names, " + "))
		}
		want := originals + newTopics
		if sc.name == "sendgrid" {
			want *= 2 // two events a batch
		}
		if got := p.e.claims(sc.name); got != want {
			t.Errorf("%s: %d claims in the table from %d events and their copies, want %d", sc.name, got, originals, want)
		}
	}
	checkDocsTable(t, p, table)
}

// headerOf is header name's value, of the first spelling in sorted order when the copy
// carries several (which the receiver refuses).
func headerOf(r events.APIGatewayV2HTTPRequest, name string) string {
	for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
		if strings.EqualFold(k, name) {
			return r.Headers[k]
		}
	}
	return ""
}

const (
	tableStart = "<!-- signed-bytes table: go test ./receiver -run NoSignedDelivery -update-docs -->"
	tableEnd   = "<!-- end of the signed-bytes table -->"
)

// checkDocsTable renders the table of schemes x transformations and holds docs/receiver.md to
// it (or rewrites it, with -update-docs).
func checkDocsTable(t *testing.T, p *propertyRun, table map[string]map[string]string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("| scheme | signs |")
	for _, tr := range transformations {
		b.WriteString(" " + tr.name + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(transformations)) + "\n")
	for _, sc := range propertySchemes() {
		b.WriteString("| `" + sc.name + "` | " + coverageText(p.scheme(sc.name)) + " |")
		for _, tr := range transformations {
			cell := table[sc.name][tr.name]
			if cell == "" {
				cell = "·"
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	rendered := b.String()
	path := filepath.Join("..", "docs", "receiver.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start, end := strings.Index(string(doc), tableStart), strings.Index(string(doc), tableEnd)
	if start < 0 || end < start {
		t.Fatalf("docs/receiver.md has no signed-bytes table between %q and %q", tableStart, tableEnd)
	}
	current := string(doc[start+len(tableStart)+1 : end])
	if current == rendered {
		return
	}
	if *updateDocs {
		out := string(doc[:start+len(tableStart)+1]) + rendered + string(doc[end:])
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/receiver.md's signed-bytes table is not what the test found; rerun with -update-docs:\n%s", rendered)
}

// coverageText says in a few words what a scheme signs, from webhook.Covers.
func coverageText(s webhook.Scheme) string {
	c := webhook.Covers(s)
	var parts []string
	if c.URL {
		parts = append(parts, "URL")
	}
	if c.Body {
		parts = append(parts, "body")
	}
	if c.Fields {
		parts = append(parts, "sorted fields")
	}
	for _, h := range c.Headers {
		parts = append(parts, "`"+h+"`")
	}
	return strings.Join(parts, ", ")
}

// lastLogLine is the handler's last log line, decoded.
func (e *env) lastLogLine() map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := bytes.TrimRight(e.logs.Bytes(), "\n")
	line := b[bytes.LastIndexByte(b, '\n')+1:]
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		e.t.Fatalf("log line %q is not JSON", line)
	}
	return m
}
