package sources

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/webhook"
)

func TestTheExampleFileLoadsWithPresetsFilledIn(t *testing.T) {
	t.Parallel()
	f, err := Load("testdata/sources.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Names(), ","); got != "github-acme,partner,shop,stripe" {
		t.Fatalf("names %s", got)
	}
	shop := f.Sources["shop"]
	if shop.EventID.Header != "webhook-id" || shop.EventType.JSON != "type" || shop.MaxBodyBytes != 262144 {
		t.Fatalf("shop did not get the standard-webhooks preset: %+v", shop)
	}
	gh := f.Sources["github-acme"]
	if gh.EventID.Header != "X-GitHub-Delivery" || gh.EventID.ScopeHeader != "X-GitHub-Hook-ID" || gh.MaxBodyBytes != DefaultMaxBodyBytes {
		t.Fatalf("github-acme did not get the github preset: %+v", gh.EventID)
	}
	if p := f.Sources["partner"]; p.EventID.JSON != "meta.id" || p.DeliveryID.Header != "X-Partner-Delivery" {
		t.Fatalf("partner's own locators were not kept: %+v", p)
	}
	r := f.Retentions()
	if r["stripe"].Effective() != 60*24*time.Hour || r["shop"].Effective() != 72*time.Hour+30*24*time.Hour+dedup.DefaultMargin {
		t.Fatalf("retentions %+v", r)
	}
	// Delivery timeouts: the scheme's provider's, unless the file names one.
	if gh.DeliveryTimeout != Duration(10*time.Second) || f.Sources["shop"].DeliveryTimeout != Duration(15*time.Second) ||
		f.Sources["partner"].DeliveryTimeout != Duration(20*time.Second) {
		t.Fatalf("delivery timeouts %v %v, want the presets and partner's own 20s", gh.DeliveryTimeout, f.Sources["shop"].DeliveryTimeout)
	}
	// Presets are copied, not shared: editing one source cannot change another.
	shop.EventID.Header = "changed"
	if Presets["standard-webhooks"].EventID.Header != "webhook-id" {
		t.Fatal("a source's locator aliases the preset")
	}
}

func TestInvalidFilesAreRefusedWithTheField(t *testing.T) {
	t.Parallel()
	const ok = `"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d"`
	cases := []struct {
		name, json, field string
	}{
		{"no sources", `{"sources":{}}`, "sources"},
		{"an unknown top-level field", `{"source":{}}`, "unknown field"},
		{"a typo in a field name", `{"sources":{"s":{` + ok + `,"redrive_windw":"1d"}}}`, `sources.s: unknown field "redrive_windw"`},
		{"secret for secrets", `{"sources":{"stripe":{"scheme":"stripe","secret":"whsec_x","retry_horizon":"3d"}}}`, `sources.stripe: unknown field "secret"`},
		{"an unknown field in a secret", `{"sources":{"s":{"scheme":"stripe","secrets":[{"secrets_manager":"x"}],"retry_horizon":"3d"}}}`, `sources.s: unknown field "secrets_manager"`},
		{"a duration over ten years", `{"sources":{"s":{"scheme":"github","secrets":[{"env":"S"}],"retry_horizon":"1500000h","redrive_window":"1500000h"}}}`, `sources.s: invalid duration "1500000h"`},
		{"a bad duration, named", `{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":3}}}`, `sources.s: want a duration string`},
		{"a target field in another case", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"url":"https://example.com/x","Max_In_Flight":0}}}`, `targets.t: unknown field "Max_In_Flight"`},
		{"a source field in another case", `{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"Redrive_Window":"30d"}}}`, `sources.s: unknown field "Redrive_Window"`},
		{"a secret's field in another case", `{"sources":{"s":{"scheme":"stripe","secrets":[{"Env":"S"}],"retry_horizon":"3d"}}}`, `sources.s: unknown field "Env"`},
		{"a top-level field in another case", `{"Sources":{"s":{` + ok + `}}}`, `unknown field "Sources"`},
		{"an unknown field in a target", `{"sources":{"s":{` + ok + `}},"targets":{"email":{"uri":"http://x"}}}`, `targets.email: unknown field "uri"`},
		{"an unknown field in a table", `{"sources":{"s":{` + ok + `}},"tables":{"orders":{"partition":"pk"}}}`, `tables.orders: unknown field "partition"`},
		{"an unknown scheme", `{"sources":{"s":{"scheme":"paypal","secrets":[{"env":"S"}],"retry_horizon":"1d"}}}`, "sources.s.scheme"},
		{"a source name with a capital", `{"sources":{"Shop":{` + ok + `}}}`, "sources.Shop"},
		{"no secrets", `{"sources":{"s":{"scheme":"stripe","retry_horizon":"1d"}}}`, "sources.s.secrets"},
		{"a secret with two places", `{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S","ssm":"/p"}],"retry_horizon":"1d"}}}`, "sources.s.secrets[0]"},
		{"a generic scheme without a header", `{"sources":{"s":{"scheme":"hmac-sha256","secrets":[{"env":"S"}],"event_id":{"json":"id"},"event_type":{"json":"type"},"retry_horizon":"1d"}}}`, "sources.s.hmac.header"},
		{"a generic scheme whose header is not a header name", `{"sources":{"s":{"scheme":"hmac-sha256","hmac":{"header":"X Sig"},"secrets":[{"env":"S"}],"event_id":{"json":"id"},"event_type":{"json":"type"},"retry_horizon":"1d"}}}`, "sources.s.hmac.header"},
		{"a generic scheme with a prefix holding a space", `{"sources":{"s":{"scheme":"hmac-sha256","hmac":{"header":"X-Sig","prefix":"sha256 ="},"secrets":[{"env":"S"}],"event_id":{"json":"id"},"event_type":{"json":"type"},"retry_horizon":"1d"}}}`, "sources.s.hmac.prefix"},
		{"a generic scheme without an event id", `{"sources":{"s":{"scheme":"hmac-sha256","hmac":{"header":"X-Sig"},"secrets":[{"env":"S"}],"event_type":{"json":"type"},"retry_horizon":"1d"}}}`, "sources.s.event_id"},
		{"a locator with both places", `{"sources":{"s":{` + ok + `,"event_id":{"json":"id","header":"X-Id"}}}}`, "sources.s.event_id"},
		{"a bad JSON path", `{"sources":{"s":{` + ok + `,"event_type":{"json":"data..type"}}}}`, "sources.s.event_type.json"},
		{"a bad duration", `{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3 days"}}}`, "invalid duration"},
		{"no retry horizon where the provider documents none", `{"sources":{"s":{"scheme":"github","secrets":[{"env":"S"}]}}}`, "sources.s.retry_horizon: is required"},
		{"a negative retry horizon", `{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"-1h"}}}`, "sources.s.retry_horizon"},
		{"retention shorter than horizon + redrive", `{"sources":{"s":{` + ok + `,"keep":"7d"}}}`, "shorter than its retry horizon + redrive window"},
		{"a body limit over Lambda's", `{"sources":{"s":{` + ok + `,"max_body_bytes":7000000}}}`, "sources.s.max_body_bytes"},
		{"a delivery timeout over API Gateway's", `{"sources":{"s":{` + ok + `,"delivery_timeout":"30s"}}}`, "sources.s.delivery_timeout"},
		{"a delivery timeout with no room to answer", `{"sources":{"s":{` + ok + `,"delivery_timeout":"1s"}}}`, "sources.s.delivery_timeout"},
		{"a target without a URL", `{"sources":{"s":{` + ok + `}},"targets":{"email":{"timeout":"5s"}}}`, "targets.email.url"},
		{"a target with a relative URL", `{"sources":{"s":{` + ok + `}},"targets":{"email":{"url":"/send"}}}`, "targets.email.url"},
		{"a header replacing the idempotency key", `{"sources":{"s":{` + ok + `}},"targets":{"email":{"url":"https://e.example/send","headers":{"idempotency-key":"k"}}}}`, "targets.email.headers.idempotency-key"},
		{"a header replacing the content type", `{"sources":{"s":{` + ok + `}},"targets":{"email":{"url":"https://e.example/send","headers":{"Content-Type":"text/plain"}}}}`, "targets.email.headers.Content-Type"},
		{"a header that is not a header name", `{"sources":{"s":{` + ok + `}},"targets":{"email":{"url":"https://e.example/send","headers":{"X Api":"1"}}}}`, "targets.email.headers.X Api"},
		{"a header value with a newline", `{"sources":{"s":{` + ok + `}},"targets":{"email":{"url":"https://e.example/send","headers":{"X-Api":"1\r\nX-Evil: 1"}}}}`, "targets.email.headers.X-Api"},
		{"trailing content", `{"sources":{"s":{` + ok + `}}} {}`, "content after"},
		{"a stray closing brace", `{"sources":{"s":{` + ok + `}}}}`, "content after"},
		{"a stray closing bracket", `{"sources":{"s":{` + ok + `}}}]`, "content after"},
		// AWS targets and delivery semantics.
		{"a target name no intent can carry", `{"sources":{"s":{` + ok + `}},"targets":{"` + strings.Repeat("t", dedup.MaxIntentTargetLen+1) + `":{"url":"https://e.example"}}}`, "targets." + strings.Repeat("t", dedup.MaxIntentTargetLen+1)},
		{"a target name with a control character", `{"sources":{"s":{` + ok + `}},"targets":{"e\u0007":{"url":"https://e.example"}}}`, "targets.e\a"},
		{"an empty target name", `{"sources":{"s":{` + ok + `}},"targets":{"":{"url":"https://e.example"}}}`, "targets."},
		{"an unknown delivery", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"url":"https://e.example","delivery":"exactly-once"}}}`, "targets.t.delivery"},
		{"an unknown target type", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"type":"kafka","arn":"x"}}}`, "targets.t.type"},
		{"an sqs target with a url", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"type":"sqs","url":"https://q.example"}}}`, "targets.t: url and headers are for http targets"},
		{"an sqs target with a topic's ARN", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"type":"sqs","arn":"arn:aws:sns:eu-west-1:1:t"}}}`, "targets.t.arn"},
		{"a state machine target with a function's ARN", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"type":"stepfunctions","arn":"arn:aws:lambda:eu-west-1:1:function:f"}}}`, "targets.t.arn"},
		{"a group for a standard queue", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"type":"sqs","arn":"arn:aws:sqs:eu-west-1:1:q","group_id":"g"}}}`, "targets.t.group_id"},
		{"an unknown invocation", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"type":"lambda","arn":"arn:aws:lambda:eu-west-1:1:function:f","invocation":"sync"}}}`, "targets.t.invocation"},
		{"an asynchronous lambda at most once", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"type":"lambda","arn":"arn:aws:lambda:eu-west-1:1:function:f","delivery":"at-most-once"}}}`, "targets.t.invocation: an asynchronous invocation (event, the default) cannot be at-most-once"},
		{"an event lambda at most once", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"type":"lambda","arn":"arn:aws:lambda:eu-west-1:1:function:f","invocation":"event","delivery":"at-most-once"}}}`, "targets.t.invocation"},
		{"an arn for an http target", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"url":"https://e.example","arn":"arn:aws:sqs:eu-west-1:1:q"}}}`, "targets.t: an http target takes url"},
		// The application's own tables.
		{"a table without its partition key", `{"sources":{"s":{` + ok + `}},"tables":{"orders":{"actions":["put"]}}}`, "tables.orders.partition_key"},
		{"a table without actions", `{"sources":{"s":{` + ok + `}},"tables":{"orders":{"partition_key":"id"}}}`, "tables.orders.actions"},
		{"a table with an unknown action", `{"sources":{"s":{` + ok + `}},"tables":{"orders":{"partition_key":"id","actions":["scan"]}}}`, "tables.orders.actions[0]"},
		{"a table with a bad name", `{"sources":{"s":{` + ok + `}},"tables":{"orders":{"name":"Orders table","partition_key":"id","actions":["put"]}}}`, "tables.orders.name"},
		{"a sort key that is the partition key", `{"sources":{"s":{` + ok + `}},"tables":{"orders":{"partition_key":"id","sort_key":"id","actions":["put"]}}}`, "tables.orders.sort_key"},
		// Public keys, signed URLs, form bodies, batches.
		{"secrets for a public-key scheme", `{"sources":{"s":{"scheme":"discord","secrets":[{"env":"S"}],"event_id":{"json":"event.data.id"}}}}`, "sources.s.secrets: the discord scheme verifies with the provider's public keys"},
		{"no public key for a public-key scheme", `{"sources":{"s":{"scheme":"sendgrid"}}}`, "sources.s.public_keys"},
		{"an empty public key", `{"sources":{"s":{"scheme":"sendgrid","public_keys":[""]}}}`, "sources.s.public_keys[0]"},
		{"a discord public key not in hex", `{"sources":{"s":{"scheme":"discord","public_keys":["not-hex"],"event_id":{"json":"id"}}}}`, "sources.s.public_keys[0]: "},
		{"a discord public key not 32 bytes", `{"sources":{"s":{"scheme":"discord","public_keys":["` + strings.Repeat("ab", 32) + `","abcd"],"event_id":{"json":"id"}}}}`, "sources.s.public_keys[1]: "},
		{"a sendgrid public key that is not a key", `{"sources":{"s":{"scheme":"sendgrid","public_keys":["bm90IGEga2V5"]}}}`, "sources.s.public_keys[0]: "},
		{"public keys for an HMAC scheme", `{"sources":{"s":{` + ok + `,"public_keys":["k"]}}}`, "sources.s.public_keys"},
		{"a url for a scheme that signs none", `{"sources":{"s":{` + ok + `,"url":"https://h.example/hooks/s"}}}`, "sources.s.url: only the schemes that sign the URL"},
		{"a relative url", `{"sources":{"s":{"scheme":"square","secrets":[{"env":"S"}],"url":"/hooks/s"}}}`, "sources.s.url"},
		{"a url with a fragment", `{"sources":{"s":{"scheme":"square","secrets":[{"env":"S"}],"url":"https://h.example/hooks/s#x"}}}`, "sources.s.url"},
		{"an unknown body format", `{"sources":{"s":{` + ok + `,"body":"xml"}}}`, "sources.s.body"},
		{"a form key for a JSON body", `{"sources":{"s":{` + ok + `,"event_id":{"form":"id"}}}}`, "sources.s.event_id.form"},
		{"a JSON path for a form body", `{"sources":{"s":{` + ok + `,"body":"form","event_id":{"json":"id"}}}}`, "sources.s.event_id.json"},
		{"a preset that cannot read a form", `{"sources":{"s":{` + ok + `,"body":"form"}}}`, "sources.s.event_id: is required: the stripe preset's json:id cannot be read from this source's body (form)"},
		{"twilio without a type", `{"sources":{"s":{"scheme":"twilio","secrets":[{"env":"S"}]}}}`, "sources.s.event_type: is required"},
		{"zoom without an id", `{"sources":{"s":{"scheme":"zoom","secrets":[{"env":"S"}]}}}`, "sources.s.event_id: is required"},
		{"discord without an id", `{"sources":{"s":{"scheme":"discord","public_keys":["k"]}}}`, "sources.s.event_id: is required"},
		{"a batch located by a header", `{"sources":{"s":{` + ok + `,"batch":true,"event_id":{"header":"X-Id"}}}}`, "sources.s.event_id: a batch's events cannot be told apart by a header"},
		{"a tolerance for a scheme that signs no time", `{"sources":{"s":{"scheme":"github","secrets":[{"env":"S"}],"retry_horizon":"1h","timestamp_tolerance":"5m"}}}`, "sources.s.timestamp_tolerance: github signatures carry no timestamp"},
		{"a tolerance over a day", `{"sources":{"s":{` + ok + `,"timestamp_tolerance":"25h"}}}`, "sources.s.timestamp_tolerance: must be at most 24h"},
		{"a scheme's default tolerance as long as the retention", `{"sources":{"s":{"scheme":"twitch","secrets":[{"env":"S"}],"retry_horizon":"1m","keep":"5m"}}}`, "sources.s.timestamp_tolerance: twitch's default 10m0s is not shorter than the retention"},
		{"a tolerance as long as the retention", `{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"1h","redrive_window":"1h","keep":"3h","timestamp_tolerance":"3h"}}}`, "sources.s.timestamp_tolerance: 3h0m0s is not shorter than the retention"},
		{"a url with a query", `{"sources":{"s":{"scheme":"twilio","secrets":[{"env":"S"}],"event_type":{"form":"T"},"url":"https://h.example/hooks/s?a=1"}}}`, "sources.s.url: \"https://h.example/hooks/s?a=1\" has a query string"},
		{"twilio without its guard", `{"sources":{"s":{"scheme":"twilio","secrets":[{"env":"S"}],"event_type":{"form":"T"},"replay_guard":"off"}}}`, "sources.s.replay_guard: cannot be \"off\" for twilio"},
		{"a batch limit without a batch", `{"sources":{"s":{` + ok + `,"max_batch_events":10}}}`, "sources.s.max_batch_events: only a batch source"},
		{"a negative batch limit", `{"sources":{"s":{"scheme":"sendgrid","public_keys":["k"],"max_batch_events":-1}}}`, "sources.s.max_batch_events: must not be negative"},
		{"a batch of forms", `{"sources":{"s":{` + ok + `,"batch":true,"body":"form","event_id":{"form":"id"},"event_type":{"form":"t"}}}}`, "sources.s.batch"},
		// Per-target limits (docs/outbox.md): max_in_flight is 1 to 1,000 and rate 0.01 to 10,000,
		// refused at load outside those ranges, naming the field. A limit written as 0 is outside
		// them, and must not be taken as no limit at all: a target someone meant to stop (or
		// mistyped) would be called without any cap.
		{"a max_in_flight of zero", `{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"X"}],"retry_horizon":"1h","redrive_window":"0d"}},` +
			`"targets":{"email":{"url":"https://mail.example.com/send","max_in_flight":0}}}`, "targets.email.max_in_flight"},
		{"a rate of zero", `{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"X"}],"retry_horizon":"1h","redrive_window":"0d"}},` +
			`"targets":{"email":{"url":"https://mail.example.com/send","rate":0}}}`, "targets.email.rate"},
		// A name written twice is a guess at which one holds (a later null erased a cap, two
		// entries of one source were merged): refused, naming it.
		{"a field named twice", `{"sources":{"s":{` + ok + `,"replay_guard":"body+type","replay_guard":null}}}`, "sources.s.replay_guard: is named twice"},
		{"a source named twice", `{"sources":{"s":{` + ok + `},"s":{` + ok + `,"redrive_window":"1d"}}}`, "sources.s: is named twice"},
		{"a target named twice", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"url":"https://h.example/a","max_in_flight":5},"t":{"url":"https://h.example/a"}}}`, "targets.t: is named twice"},
		{"a limit named twice", `{"sources":{"s":{` + ok + `}},"targets":{"t":{"url":"https://h.example/a","max_in_flight":5,"max_in_flight":null}}}`, "targets.t.max_in_flight: is named twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.json))
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("got %v, want an error naming %q", err, c.field)
			}
		})
	}
}

func TestARetentionErrorIsTyped(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(`{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d","keep":"7d"}}}`))
	var re *dedup.RetentionError
	if !errors.As(err, &re) || re.Source != "s" {
		t.Fatalf("got %v, want a *dedup.RetentionError", err)
	}
}

func TestDurations(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "72h": 72 * time.Hour, "90m": 90 * time.Minute, "0d": 0, "87600h": 3650 * 24 * time.Hour} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Fatalf("ParseDuration(%q) = %s, %v; want %s", in, got, err, want)
		}
		b, _ := Duration(got).MarshalJSON()
		var back Duration
		if err := back.UnmarshalJSON(b); err != nil || time.Duration(back) != want {
			t.Fatalf("%q does not round-trip through %s", in, b)
		}
	}
	for _, bad := range []string{"", "d", "-1d", "1.5d", "99999d", "3 days", "87601h", "1500000h"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Fatalf("ParseDuration(%q) accepted", bad)
		}
	}
}

// TestEveryProviderPresetLoadsWithItsDocumentedDefaults: a source naming only its scheme and
// secret gets the provider's locators, retry horizon and delivery timeout, and a replay guard
// exactly where its event id is not signed.
func TestEveryProviderPresetLoadsWithItsDocumentedDefaults(t *testing.T) {
	t.Parallel()
	f, err := Parse([]byte(`{"sources":{
		"clerk":  {"scheme":"svix","secrets":[{"env":"S"}]},
		"slack":  {"scheme":"slack","secrets":[{"env":"S"}]},
		"paddle": {"scheme":"paddle","secrets":[{"env":"S"}]},
		"pd":     {"scheme":"pagerduty","secrets":[{"env":"S"}]},
		"linear": {"scheme":"linear","secrets":[{"env":"S"}]},
		"twitch": {"scheme":"twitch","secrets":[{"env":"S"}],"retry_horizon":"1h"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, id, typ, guard string
		horizon, timeout     time.Duration
	}{
		{"clerk", "header svix-id", "json type", ReplayGuardOff, 28 * time.Hour, 15 * time.Second},
		{"slack", "json event_id", "json event.type", ReplayGuardOff, 10 * time.Minute, 3 * time.Second},
		{"paddle", "json event_id", "json event_type", ReplayGuardOff, 72 * time.Hour, 5 * time.Second},
		{"pd", "json event.id", "json event.event_type", ReplayGuardOff, 48 * time.Hour, 5 * time.Second},
		{"linear", "header Linear-Delivery", "json type", ReplayGuardBody, 8 * time.Hour, 5 * time.Second},
		{"twitch", "header Twitch-Eventsub-Message-Id", "json subscription.type", ReplayGuardOff, time.Hour, 3 * time.Second},
	} {
		s := f.Sources[c.name]
		loc := func(l *Locator) string {
			if l.Header != "" {
				return "header " + l.Header
			}
			return "json " + l.JSON
		}
		if loc(s.EventID) != c.id || loc(s.EventType) != c.typ || s.ReplayGuard != c.guard ||
			time.Duration(s.RetryHorizon) != c.horizon || time.Duration(s.DeliveryTimeout) != c.timeout {
			t.Errorf("%s: id %s, type %s, guard %s, horizon %v, timeout %v; want %+v", c.name, loc(s.EventID), loc(s.EventType), s.ReplayGuard,
				time.Duration(s.RetryHorizon), time.Duration(s.DeliveryTimeout), c)
		}
	}
}

// TestTheProvidersExampleLoads: examples/sources.providers.json, one source per scheme, is a
// valid file and covers every scheme.
func TestTheProvidersExampleLoads(t *testing.T) {
	t.Parallel()
	f, err := Load("../examples/sources.providers.json")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range f.Sources {
		seen[s.Scheme] = true
	}
	for _, scheme := range Schemes {
		if !seen[scheme] {
			t.Errorf("no %s source in the example", scheme)
		}
	}
}

// TestEverySchemeIsOneTheVerifierKnows: the sources file accepts exactly the schemes
// webhook.New makes.
func TestEverySchemeIsOneTheVerifierKnows(t *testing.T) {
	t.Parallel()
	a, b := slices.Sorted(slices.Values(Schemes)), slices.Sorted(slices.Values(webhook.Names))
	if !slices.Equal(a, b) {
		t.Fatalf("sources.Schemes %v, webhook.Names %v", a, b)
	}
}

// Two SendGrid verification keys (P-256, SubjectPublicKeyInfo in base64): the first
// examples/sources.providers.json's, the second made by openssl.
const (
	sgKey1 = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
	sgKey2 = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE34w6s0RvBIQHYkqQXMu7ZBWtaJN0LRuw8/ShWCeuiwrHqpdGDnQtghnZQyVH6MKTEFNuqk3IYxf0WntxK37GJQ=="
)

// TestTheNewShapesDefaults: twilio's body is a form, a sendgrid source is a batch, a
// public-key source's keys are its secrets for the receiver, and a form:<key> body names the
// key that holds its JSON.
func TestTheNewShapesDefaults(t *testing.T) {
	t.Parallel()
	f, err := Parse([]byte(`{"sources":{
  "twilio":   {"scheme":"twilio","secrets":[{"env":"S"}],"event_type":{"form":"MessageStatus"}},
  "sendgrid": {"scheme":"sendgrid","public_keys":["` + sgKey1 + `","` + sgKey2 + `"]},
  "actions":  {"scheme":"slack","secrets":[{"env":"S"}],"body":"form:payload","event_id":{"json":"trigger_id"},"event_type":{"json":"type"}},
  "commands": {"scheme":"slack","secrets":[{"env":"S"}],"body":"form","event_id":{"form":"trigger_id"},"event_type":{"form":"command"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if tw := f.Sources["twilio"]; tw.Body != BodyForm || tw.EventID.Header != "I-Twilio-Idempotency-Token" || tw.IDSigned() || tw.ReplayGuard != ReplayGuardBody {
		t.Fatalf("twilio: %+v", tw)
	}
	if sg := f.Sources["sendgrid"]; !sg.Batch || sg.EventID.JSON != "sg_event_id" || !sg.IDSigned() || sg.ReplayGuard != ReplayGuardOff {
		t.Fatalf("sendgrid: %+v", sg)
	}
	if c := f.Sources["commands"]; c.OccurredAt != nil {
		t.Fatalf("slash commands: the Events API's JSON event_time was kept for a form: %v", c.OccurredAt)
	}
	if key, ok := f.Sources["actions"].FormPayload(); !ok || key != "payload" {
		t.Fatalf("form payload %q %v", key, ok)
	}
	secrets, err := NewSecrets(t.Context(), f, &Resolver{Getenv: func(string) string { return "s" }}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := secrets.Get("sendgrid"); !slices.Equal(got, []string{sgKey1, sgKey2}) {
		t.Fatalf("sendgrid's keys %v", got)
	}
	if changed, err := secrets.Refresh(t.Context(), "sendgrid"); changed || err != nil {
		t.Fatalf("refreshing public keys: %v %v", changed, err)
	}
}

// TestTablesBecomeTheStoresTables: the sources file's tables, by the name planners use, with
// their physical names and keys.
func TestTablesBecomeTheStoresTables(t *testing.T) {
	t.Parallel()
	f, err := Parse([]byte(`{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"30d"}},
  "tables":{"orders":{"name":"Orders-prod","partition_key":"order_id","actions":["put","check"]},
            "ledger":{"partition_key":"account","sort_key":"seq","actions":["update"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := f.DedupTables()
	want := map[string]dedup.TableKeys{"orders": {Name: "Orders-prod", PartitionKey: "order_id"}, "ledger": {Name: "ledger", PartitionKey: "account", SortKey: "seq"}}
	if len(got) != 2 || got["orders"] != want["orders"] || got["ledger"] != want["ledger"] {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// TestAWSTargetsLoad: each type with its resource; an EventBridge target defaults to the
// default bus; an SQS target's queue URL comes from its ARN.
func TestAWSTargetsLoad(t *testing.T) {
	t.Parallel()
	f, err := Parse([]byte(`{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"30d"}},
  "targets":{"q":{"type":"sqs","arn":"arn:aws:sqs:eu-west-1:222222222222:orders.fifo","group_id":"g"},
             "e":{"type":"eventbridge","detail_type":"OrderShipped"},
             "h":{"url":"https://e.example/send"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if q := f.Targets["q"]; q.QueueURL() != "https://sqs.eu-west-1.amazonaws.com/222222222222/orders.fifo" {
		t.Fatalf("queue url %q", q.QueueURL())
	}
	if e := f.Targets["e"]; e.ARN != "default" || e.Type != TargetEventBridge {
		t.Fatalf("eventbridge target %+v", e)
	}
	if h := f.Targets["h"]; h.Type != TargetHTTP {
		t.Fatalf("http target %+v", h)
	}
}

// TestTheSchemeKindsAgreeWithTheVerifier: the sources file's notion of which schemes take
// public keys and which sign the URL is the verifier's own (webhook.PublicKeyScheme,
// webhook.URLVerifier), scheme by scheme.
func TestTheSchemeKindsAgreeWithTheVerifier(t *testing.T) {
	t.Parallel()
	for _, name := range webhook.Names {
		opts := webhook.Options{}
		if name == webhook.HMACSHA256 {
			opts.Header = "X-Signature"
		}
		s, err := webhook.New(name, opts)
		if err != nil {
			t.Fatal(err)
		}
		_, public := s.(webhook.PublicKeyScheme)
		_, signsURL := s.(webhook.URLVerifier)
		if PublicKeyScheme(name) != public || URLScheme(name) != signsURL {
			t.Errorf("%s: sources says public keys %v, signed URL %v; the verifier %v, %v", name, PublicKeyScheme(name), URLScheme(name), public, signsURL)
		}
	}
}

// A retention that rests on a default nobody chose is said where the file is loaded: a source
// without redrive_window keeps its claims for the retry horizon + the margin only, so a redrive
// of older events would run them again. One chosen (even "0d"), or a keep of its own, is not.
func TestRetentionOnADefaultIsWarned(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, source string
		warn         string // "" for none
	}{
		{"stripe without redrive_window", `"scheme":"stripe","secrets":[{"env":"S"}]`, "sources.s.redrive_window: not set"},
		{"its retry horizon named as the preset's", `"scheme":"stripe","secrets":[{"env":"S"}]`, "3d, the stripe preset's"},
		{"a horizon of its own, no redrive window", `"scheme":"github","secrets":[{"env":"S"}],"retry_horizon":"1h"`, "sources.s.redrive_window: not set"},
		{"a redrive window chosen", `"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"30d"`, ""},
		{"no redrive, chosen", `"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"0d"`, ""},
		{"a keep of its own", `"scheme":"stripe","secrets":[{"env":"S"}],"keep":"90d"`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse([]byte(`{"sources":{"s":{` + c.source + `}}}`))
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, w := range f.Warnings() {
				all = append(all, w.String())
			}
			got := strings.Join(all, "\n")
			if c.warn == "" && got != "" {
				t.Fatalf("warned %q", got)
			}
			if !strings.Contains(got, c.warn) {
				t.Fatalf("warnings %q, want one with %q", got, c.warn)
			}
		})
	}
}

// An id read from a header is signed when the scheme signs that header, whichever it is (its id
// header or its timestamp header): a captured delivery cannot be re-sent under another id, so
// no body guard is needed by default. One in a header the scheme does not sign is not signed.
func TestAnIDInAHeaderIsSignedWhenTheSchemeSignsThatHeader(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		scheme, header string
		signed         bool
	}{
		{"standard-webhooks", "webhook-id", true},
		{"standard-webhooks", "Webhook-Timestamp", true},
		{"slack", "X-Slack-Request-Timestamp", true},
		{"standard-webhooks", "X-Request-Id", false},
		{"stripe", "Stripe-Signature-Id", false},
	} {
		f, err := Parse([]byte(`{"sources":{"s":{"scheme":"` + c.scheme + `","secrets":[{"env":"S"}],"retry_horizon":"1h","redrive_window":"0d",` +
			`"event_id":{"header":"` + c.header + `"},"event_type":{"json":"type"}}}}`))
		if err != nil {
			t.Fatalf("%s %s: %v", c.scheme, c.header, err)
		}
		s := f.Sources["s"]
		want := ReplayGuardBody
		if c.signed {
			want = ReplayGuardOff
		}
		if s.IDSigned() != c.signed || s.ReplayGuard != want {
			t.Errorf("%s, id in %s: signed %v, replay_guard %q; want %v, %q", c.scheme, c.header, s.IDSigned(), s.ReplayGuard, c.signed, want)
		}
	}
}
