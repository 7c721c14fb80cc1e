package webhook

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Stripe signs "t.body" with HMAC-SHA256, keyed with the endpoint's signing secret as written
// (the whole "whsec_..." string is the key), and sends
//
//	Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...][,v0=<hex>]
//
// with one v1 per active secret while a secret is being rolled, and a fake v0 for test events.
// Only v1 is verified: anything else is ignored, which is what prevents downgrade attacks.
// (Format: https://docs.stripe.com/webhooks, "Verify webhook signatures manually".)

// StripeHeader is the header carrying Stripe's timestamp and signatures.
const StripeHeader = "Stripe-Signature"

type stripeScheme struct {
	tolerance time.Duration
	ring      *keyring
}

func newStripe(tolerance time.Duration) *stripeScheme {
	return &stripeScheme{tolerance: tolerance, ring: newKeyring(Stripe, rawSecret)}
}

func (s *stripeScheme) Name() string { return Stripe }

// stripeSignature is a parsed Stripe-Signature header.
type stripeSignature struct {
	t    string // the timestamp as sent, which is what is signed
	unix int64
	sigs signatures
}

// parseStripeSignature parses a Stripe-Signature value into p, or says why it is malformed.
// Exactly one t is required; v1 values must be 64 hex digits; other keys are skipped.
func parseStripeSignature(v string, p *stripeSignature) (detail string) {
	if detail := parseSignedList(v, ',', "t", "v1", &p.t, &p.sigs); detail != "" {
		return detail
	}
	unix, ok := parseUnix(p.t)
	if !ok {
		return "the timestamp is not a Unix time in seconds"
	}
	p.unix = unix
	return ""
}

// parseSignedList parses the "<tsKey>=<time><sep><sigKey>=<hex>[<sep><sigKey>=<hex>...]" form
// Stripe (t, v1, ",") and Paddle (ts, h1, ";") use: exactly one timestamp, up to maxSignatures
// signatures of 64 hex digits, other keys skipped so a provider can add some.
func parseSignedList(v string, sep byte, tsKey, sigKey string, ts *string, sigs *signatures) (detail string) {
	seenTS := false
	for rest, more := v, true; more; {
		var elem string
		elem, rest, more = strings.Cut(rest, string(sep))
		k, val, ok := strings.Cut(trimSpace(elem), "=")
		if !ok {
			return "an element is not a key=value pair"
		}
		switch k {
		case tsKey:
			if seenTS {
				return "the timestamp is repeated"
			}
			seenTS = true
			*ts = val
		case sigKey:
			if sigs.n == maxSignatures {
				return "too many " + sigKey + " signatures"
			}
			if !decodeHex(val, sigs.sig[sigs.n][:]) {
				return "a " + sigKey + " signature is not 64 hex digits"
			}
			sigs.n++
		}
	}
	if !seenTS {
		return "there is no timestamp"
	}
	return ""
}

func (s *stripeScheme) Verify(h http.Header, body []byte, secrets []string, now time.Time) error {
	if err := s.ring.check(secrets); err != nil {
		return err
	}
	v, reason, detail := header(h, StripeHeader)
	if reason != "" {
		return reject(Stripe, reason, StripeHeader, detail)
	}
	var p stripeSignature
	if detail := parseStripeSignature(v, &p); detail != "" {
		return reject(Stripe, ReasonMalformedHeader, StripeHeader, detail)
	}
	if detail := timestampDetail(p.unix, now, s.tolerance); detail != "" {
		return reject(Stripe, ReasonTimestamp, StripeHeader, detail)
	}
	if p.sigs.n == 0 {
		return reject(Stripe, ReasonNoMatch, StripeHeader, "there is no v1 signature")
	}
	if !s.ring.anySecret(secrets, &p.sigs, body, p.t) {
		return reject(Stripe, ReasonNoMatch, StripeHeader, "")
	}
	return nil
}

func (s *stripeScheme) Sign(h http.Header, body []byte, secret string, _ string, now time.Time) error {
	if h == nil {
		return nilHeader(Stripe)
	}
	if now.Unix() < 0 {
		return &InvalidError{Scheme: Stripe, Field: "now", Reason: "the time is before 1970"}
	}
	t := strconv.FormatInt(now.Unix(), 10)
	sum, err := s.ring.sign(secret, body, t)
	if err != nil {
		return err
	}
	h.Set(StripeHeader, "t="+t+",v1="+hex.EncodeToString(sum[:]))
	return nil
}

func (s *stripeScheme) checkSecrets(secrets []string) error { return s.ring.check(secrets) }
