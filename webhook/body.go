package webhook

import (
	"crypto/sha1"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// GitHub, Shopify and the generic scheme sign the body alone: one header carries
// prefix + encode(HMAC-SHA256(secret, body)), with the secret's bytes as written for the key.
// Apart from Linear's, they carry no time, so they have no replay window of their own: the
// dedup claim on the event id is what makes a replayed delivery harmless.
//
//   - GitHub: X-Hub-Signature-256: sha256=<hex>
//     (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
//     The legacy SHA-1 X-Hub-Signature is never read.
//   - Shopify: X-Shopify-Hmac-Sha256: <base64>
//     (https://shopify.dev/docs/apps/build/webhooks/verify-deliveries).
//   - PagerDuty (v3 webhooks): X-PagerDuty-Signature: v1=<hex>[,v1=<hex>...], one per active
//     secret while it is rotated; other versions are skipped
//     (https://developer.pagerduty.com/docs/webhooks-overview#verifying-signatures).
//   - Linear: Linear-Signature: <hex>
//     (https://linear.app/developers/webhooks#securing-webhooks). Its body carries the time it
//     was sent, webhookTimestamp, which Verify holds to the tolerance as the timestamped
//     schemes hold theirs.
//   - Intercom: X-Hub-Signature: sha1=<hex HMAC-SHA1> with the app's client secret
//     (https://developers.intercom.com/docs/references/webhooks/webhook-models#signed-notifications).
//     SHA-1 is what Intercom sends; HMAC-SHA1 is not broken by SHA-1's collisions (an HMAC's
//     security rests on the compression function being a PRF, RFC 6151 §2).

// The headers of the body-signing schemes, in net/http's canonical form.
const (
	GitHubHeader    = "X-Hub-Signature-256"
	ShopifyHeader   = "X-Shopify-Hmac-Sha256"
	PagerDutyHeader = "X-Pagerduty-Signature"
	LinearHeader    = "Linear-Signature"
	IntercomHeader  = "X-Hub-Signature"
)

// The encodings of the generic scheme's digest (Options.Encoding).
const (
	// EncodingHex is lower- or upper-case hexadecimal, 64 digits (GitHub's encoding).
	EncodingHex = "hex"
	// EncodingBase64 is padded standard base64, 44 characters (Shopify's encoding).
	EncodingBase64 = "base64"
)

type bodyScheme struct {
	base     // tolerance bounds Linear's webhookTimestamp; 0 for the schemes that sign no time
	header   string
	prefix   string
	encoding string
	list     string // when set, the header is a list of signatures separated by it (PagerDuty)
}

func newBodyScheme(name, header, prefix, encoding string) *bodyScheme {
	return &bodyScheme{base: base{name: name, ring: newKeyring(name)}, header: header, prefix: prefix, encoding: encoding}
}

// digestName names a digest by its length, for error details.
func digestName(size int) string {
	if size == sha1.Size {
		return "SHA-1"
	}
	return "SHA-256"
}

// parseBodySignature decodes prefix + encoded digest into dst, or says why it is malformed.
func parseBodySignature(v, prefix, encoding string, dst []byte) (detail string) {
	digest, ok := strings.CutPrefix(v, prefix)
	switch {
	case !ok:
		return "the value does not start with the expected prefix"
	case decodeDigest(digest, encoding == EncodingBase64, dst):
		return ""
	case encoding == EncodingBase64:
		return "the signature is not a base64 " + digestName(len(dst)) + " digest"
	}
	return "the signature is not " + strconv.Itoa(2*len(dst)) + " hex digits"
}

func (s *bodyScheme) Verify(h http.Header, body []byte, secrets []string, now time.Time) error {
	if err := s.ring.check(secrets); err != nil {
		return err
	}
	v, err := s.readHeader(h, s.header)
	if err != nil {
		return err
	}
	var sigs signatures
	if s.list == "" {
		if detail := parseBodySignature(v, s.prefix, s.encoding, sigs.sig[0][:s.ring.size]); detail != "" {
			return s.reject(ReasonMalformedHeader, s.header, detail)
		}
		sigs.n = 1
	}
	for rest, more := v, s.list != ""; more; {
		var item string
		item, rest, more = strings.Cut(rest, s.list)
		item = strings.Trim(item, " \t")
		if !strings.HasPrefix(item, s.prefix) {
			continue // another version
		}
		if sigs.n == maxSignatures {
			return s.reject(ReasonMalformedHeader, s.header, "too many signatures")
		}
		if detail := parseBodySignature(item, s.prefix, s.encoding, sigs.sig[sigs.n][:s.ring.size]); detail != "" {
			return s.reject(ReasonMalformedHeader, s.header, detail)
		}
		sigs.n++
	}
	if err := s.match(s.header, strings.TrimSuffix(s.prefix, "="), secrets, &sigs, body); err != nil || s.tolerance == 0 {
		return err
	}
	// Linear's time is webhookTimestamp, milliseconds, in the body the signature covers: read
	// once the body is known to be Linear's. A body without one is let through, as Linear's
	// SDK does; every payload Linear documents has one.
	var m struct {
		WebhookTimestamp json.Number `json:"webhookTimestamp"`
	}
	if json.Unmarshal(body, &m) != nil || m.WebhookTimestamp == "" {
		return nil
	}
	ms, err := m.WebhookTimestamp.Int64()
	if err != nil {
		return s.reject(ReasonMalformedBody, "", "webhookTimestamp is not a whole number of milliseconds")
	}
	return s.checkTime("", ms/1000, true, now)
}

func (s *bodyScheme) Sign(h http.Header, body []byte, secret string, _ string, _ time.Time) error {
	if h == nil {
		return s.nilHeader()
	}
	sum, err := s.ring.sign(secret, body)
	if err != nil {
		return err
	}
	h.Set(s.header, s.prefix+encodeDigest(sum[:s.ring.size], s.encoding == EncodingBase64))
	return nil
}

// Challenge acknowledges Intercom's pings (topic "ping", with a null id), which every
// subscription receives and which are not events.
func (s *bodyScheme) Challenge(_ http.Header, body []byte, _ []string) ([]byte, string, bool) {
	var n struct{ Type, Topic string }
	if s.name != Intercom || !control(body, `"ping"`, &n) || n.Type != "notification_event" || n.Topic != "ping" {
		return nil, "", false
	}
	return nil, "text/plain", true
}
