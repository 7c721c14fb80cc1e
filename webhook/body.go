package webhook

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// GitHub, Shopify and the generic scheme sign the body alone: one header carries
// prefix + encode(HMAC-SHA256(secret, body)), with the secret's bytes as written for the key.
// They carry no timestamp, so they have no replay window of their own: the dedup claim on the
// event id is what makes a replayed delivery harmless.
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
//     (https://linear.app/developers/webhooks#securing-webhooks).

// GitHubHeader is the header carrying GitHub's SHA-256 signature.
const GitHubHeader = "X-Hub-Signature-256"

// ShopifyHeader is the header carrying Shopify's signature, in net/http's canonical form.
const ShopifyHeader = "X-Shopify-Hmac-Sha256"

// PagerDutyHeader and LinearHeader carry PagerDuty's and Linear's signatures.
const (
	PagerDutyHeader = "X-Pagerduty-Signature"
	LinearHeader    = "Linear-Signature"
)

// The encodings of the generic scheme's digest (Options.Encoding).
const (
	// EncodingHex is lower- or upper-case hexadecimal, 64 digits (GitHub's encoding).
	EncodingHex = "hex"
	// EncodingBase64 is padded standard base64, 44 characters (Shopify's encoding).
	EncodingBase64 = "base64"
)

type bodyScheme struct {
	name     string
	header   string
	prefix   string
	encoding string
	list     string // when set, the header is a list of signatures separated by it (PagerDuty)
	ring     *keyring
}

func newBodyScheme(name, header, prefix, encoding string) *bodyScheme {
	return &bodyScheme{name: name, header: header, prefix: prefix, encoding: encoding,
		ring: newKeyring(name, rawSecret)}
}

func (s *bodyScheme) Name() string { return s.name }

// parseBodySignature decodes prefix + encoded digest into dst, or says why it is malformed.
func parseBodySignature(v, prefix, encoding string, dst *[sha256.Size]byte) (detail string) {
	digest, ok := strings.CutPrefix(v, prefix)
	if !ok {
		return "the value does not start with the expected prefix"
	}
	if encoding == EncodingBase64 {
		if !decodeBase64(digest, dst) {
			return "the signature is not a base64 SHA-256 digest"
		}
		return ""
	}
	if !decodeHex(digest, dst) {
		return "the signature is not 64 hex digits"
	}
	return ""
}

func (s *bodyScheme) Verify(h http.Header, body []byte, secrets []string, _ time.Time) error {
	if err := s.ring.check(secrets); err != nil {
		return err
	}
	v, reason, detail := header(h, s.header)
	if reason != "" {
		return reject(s.name, reason, s.header, detail)
	}
	var sigs signatures
	if s.list == "" {
		if detail := parseBodySignature(v, s.prefix, s.encoding, &sigs.sig[0]); detail != "" {
			return reject(s.name, ReasonMalformedHeader, s.header, detail)
		}
		sigs.n = 1
	} else {
		for rest, more := v, true; more; {
			var item string
			item, rest, more = strings.Cut(rest, s.list)
			item = trimSpace(item)
			if !strings.HasPrefix(item, s.prefix) {
				continue // another version
			}
			if sigs.n == maxSignatures {
				return reject(s.name, ReasonMalformedHeader, s.header, "too many signatures")
			}
			if detail := parseBodySignature(item, s.prefix, s.encoding, &sigs.sig[sigs.n]); detail != "" {
				return reject(s.name, ReasonMalformedHeader, s.header, detail)
			}
			sigs.n++
		}
		if sigs.n == 0 {
			return reject(s.name, ReasonNoMatch, s.header, "there is no "+strings.TrimSuffix(s.prefix, "=")+" signature")
		}
	}
	if !s.ring.anySecret(secrets, &sigs, body) {
		return reject(s.name, ReasonNoMatch, s.header, "")
	}
	return nil
}

func (s *bodyScheme) Sign(h http.Header, body []byte, secret string, _ string, _ time.Time) error {
	if h == nil {
		return nilHeader(s.name)
	}
	sum, err := s.ring.sign(secret, body)
	if err != nil {
		return err
	}
	var digest string
	if s.encoding == EncodingBase64 {
		digest = base64.StdEncoding.EncodeToString(sum[:])
	} else {
		digest = hex.EncodeToString(sum[:])
	}
	h.Set(s.header, s.prefix+digest)
	return nil
}

func (s *bodyScheme) checkSecrets(secrets []string) error { return s.ring.check(secrets) }
