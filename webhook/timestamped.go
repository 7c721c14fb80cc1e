package webhook

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (standard.go), Stripe, Slack, Zoom, Paddle and Twitch sign a timestamp (and
// Standard Webhooks and Twitch a message id) with the body, each with HMAC-SHA256, hex-encoded
// but for Standard Webhooks:
//
//   - Stripe: HMAC("t." + body), keyed with the whole "whsec_..." secret as written, sent as
//     Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...][,v0=<hex>], one v1 per active secret
//     while one is rolled and a fake v0 for test events. Only v1 is verified: ignoring anything
//     else is what prevents downgrade attacks
//     (https://docs.stripe.com/webhooks, "Verify webhook signatures manually").
//   - Slack: HMAC("v0:" + X-Slack-Request-Timestamp + ":" + body), sent as
//     X-Slack-Signature: v0=<hex>
//     (https://api.slack.com/authentication/verifying-requests-from-slack).
//   - Zoom: the same construction as Slack's, as X-Zm-Signature: v0=<hex> and
//     X-Zm-Request-Timestamp
//     (https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events).
//   - Paddle Billing: HMAC(ts + ":" + body), sent as Paddle-Signature: ts=<unix>;h1=<hex>, with
//     one h1 per active secret while it is rotated
//     (https://developer.paddle.com/webhooks/signature-verification).
//   - Twitch EventSub: HMAC(Twitch-Eventsub-Message-Id + Twitch-Eventsub-Message-Timestamp +
//     body), sent as Twitch-Eventsub-Message-Signature: sha256=<hex>; the timestamp is RFC 3339
//     (https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message).

// The headers of the timestamped schemes, in net/http's canonical form.
const (
	StripeHeader          = "Stripe-Signature"
	SlackSignatureHeader  = "X-Slack-Signature"
	SlackTimestampHeader  = "X-Slack-Request-Timestamp"
	PaddleHeader          = "Paddle-Signature"
	TwitchSignatureHeader = "Twitch-Eventsub-Message-Signature"
	TwitchIDHeader        = "Twitch-Eventsub-Message-Id"
	TwitchTimestampHeader = "Twitch-Eventsub-Message-Timestamp"
	TwitchTypeHeader      = "Twitch-Eventsub-Message-Type"
	ZoomSignatureHeader   = "X-Zm-Signature"
	ZoomTimestampHeader   = "X-Zm-Request-Timestamp"
)

// timestamped verifies a signature over a signed time (and id) and the body: an HMAC, or for
// Discord and SendGrid (asymmetric.go) a public key's.
type timestamped struct {
	base
	sigHeader string
	tsHeader  string // "" when the timestamp is in the signature header (Stripe, Paddle)
	idHeader  string // a signed message id (Twitch)
	version   string // a literal signed before the timestamp (Slack's "v0")
	sigPrefix string // before the digest in a single-signature header, or each of Standard Webhooks'
	rfc3339   bool   // the timestamp is RFC 3339, not Unix seconds
	spaced    bool   // the signature header is Standard Webhooks' space-delimited list, in base64
	// The signature header's form when it carries the timestamp (Stripe's ",", "t", "v1"):
	// the separator, and the timestamp's key; sigKey is also what a list's signatures are.
	listSep, tsKey, sigKey string
}

func newTimestamped(name string, tolerance time.Duration) *timestamped {
	s := &timestamped{base: base{name, tolerance, newKeyring(name)}}
	s.ring.sep = ":"
	switch name {
	case StandardWebhooks:
		s.sigHeader, s.tsHeader, s.idHeader = StandardSignatureHeader, StandardTimestampHeader, StandardIDHeader
	case Svix:
		s.sigHeader, s.tsHeader, s.idHeader = SvixSignatureHeader, SvixTimestampHeader, SvixIDHeader
	case Stripe:
		s.sigHeader, s.listSep, s.tsKey, s.sigKey = StripeHeader, ",", "t", "v1"
		s.ring.sep = "."
	case Slack:
		s.sigHeader, s.tsHeader, s.version, s.sigPrefix = SlackSignatureHeader, SlackTimestampHeader, "v0", "v0="
	case Zoom:
		s.sigHeader, s.tsHeader, s.version, s.sigPrefix = ZoomSignatureHeader, ZoomTimestampHeader, "v0", "v0="
	case Paddle:
		s.sigHeader, s.listSep, s.tsKey, s.sigKey = PaddleHeader, ";", "ts", "h1"
	case Twitch:
		s.sigHeader, s.tsHeader, s.idHeader, s.sigPrefix, s.rfc3339 = TwitchSignatureHeader, TwitchTimestampHeader, TwitchIDHeader, "sha256=", true
		s.ring.sep = ""
	case Discord:
		s.sigHeader, s.tsHeader, s.ring.public = DiscordSignatureHeader, DiscordTimestampHeader, parseEd25519Public
	case SendGrid:
		s.sigHeader, s.tsHeader, s.ring.public = SendGridSignatureHeader, SendGridTimestampHeader, parseECDSAPublic
	}
	if name == StandardWebhooks || name == Svix {
		s.sigPrefix, s.sigKey, s.spaced = "v1,", "v1", true
		s.ring.decode, s.ring.sep = decodeStandardSecret, "."
	}
	return s
}

// parseSignedList parses the "<tsKey>=<time><sep><sigKey>=<hex>[<sep><sigKey>=<hex>...]" form
// Stripe (t, v1, ",") and Paddle (ts, h1, ";") use: exactly one timestamp, up to maxSignatures
// signatures of 64 hex digits, other keys skipped so a provider can add some.
func parseSignedList(v string, sep byte, tsKey, sigKey string, ts *string, sigs *signatures) (detail string) {
	seenTS := false
	for rest, more := v, true; more; {
		var elem string
		elem, rest, more = strings.Cut(rest, string(sep))
		k, val, ok := strings.Cut(strings.Trim(elem, " \t"), "=")
		switch {
		case !ok:
			return "an element is not a key=value pair"
		case k == tsKey && seenTS:
			return "the timestamp is repeated"
		case k == tsKey:
			seenTS, *ts = true, val
		case k != sigKey:
		case sigs.n == maxSignatures:
			return "too many " + sigKey + " signatures"
		case !decodeDigest(val, false, sigs.sig[sigs.n][:]):
			return "a " + sigKey + " signature is not 64 hex digits"
		default:
			sigs.n++
		}
	}
	if !seenTS {
		return "there is no timestamp"
	}
	return ""
}

// unix reads a signed timestamp as sent.
func (s *timestamped) unix(ts string) (int64, bool) {
	if !s.rfc3339 {
		return parseUnix(ts)
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	return t.Unix(), err == nil
}

func (s *timestamped) Verify(h http.Header, body []byte, secrets []string, now time.Time) error {
	if err := s.ring.check(secrets); err != nil {
		return err
	}
	v, err := s.readHeader(h, s.sigHeader)
	if err != nil {
		return err
	}
	var sigs signatures
	var ts, id, detail string
	switch {
	case s.ring.public != nil: // verifyPublic reads it, once the time is checked
	case s.tsHeader == "":
		detail = parseSignedList(v, s.listSep[0], s.tsKey, s.sigKey, &ts, &sigs)
	case s.spaced:
		detail = parseStandardSignature(v, &sigs)
	default:
		detail, sigs.n = parseBodySignature(v, s.sigPrefix, EncodingHex, sigs.sig[0][:]), 1
	}
	if detail != "" {
		return s.reject(ReasonMalformedHeader, s.sigHeader, detail)
	}
	tsAt := cmp.Or(s.tsHeader, s.sigHeader)
	if s.tsHeader != "" {
		if ts, err = s.readHeader(h, s.tsHeader); err != nil {
			return err
		}
	}
	if s.idHeader != "" {
		if id, err = s.readHeader(h, s.idHeader); err != nil {
			return err
		}
	}
	unix, ok := s.unix(ts)
	if err := s.checkTime(tsAt, unix, ok, now); err != nil {
		return err
	}
	if s.ring.public != nil {
		return s.verifyPublic(v, ts, body, secrets)
	}
	var f [2]string
	return s.match(s.sigHeader, s.sigKey, secrets, &sigs, body, s.fields(&f, id, ts)...)
}

// fields are what is signed before the body, in order, in f (the caller's, so that nothing is
// allocated).
func (s *timestamped) fields(f *[2]string, id, ts string) []string {
	switch {
	case s.version != "":
		f[0], f[1] = s.version, ts
	case s.idHeader != "":
		f[0], f[1] = id, ts
	default:
		f[0] = ts
		return f[:1]
	}
	return f[:]
}

func (s *timestamped) Sign(h http.Header, body []byte, secret string, id string, now time.Time) error {
	switch {
	case h == nil:
		return s.nilHeader()
	case now.Unix() < 0:
		return &InvalidError{Scheme: s.name, Field: "now", Reason: "the time is before 1970"}
	case s.idHeader != "" && id == "":
		return &InvalidError{Scheme: s.name, Field: "id", Reason: "the message id is signed and must not be empty"}
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	if s.rfc3339 {
		ts = now.UTC().Format(time.RFC3339Nano)
	}
	var digest string
	var err error
	if s.ring.public != nil {
		digest, err = s.signPublic(secret, ts, body)
	} else {
		var f [2]string
		var sum [sha256.Size]byte
		sum, err = s.ring.sign(secret, body, s.fields(&f, id, ts)...)
		digest = encodeDigest(sum[:], s.spaced)
	}
	if err != nil {
		return err
	}
	if s.tsHeader == "" {
		h.Set(s.sigHeader, s.tsKey+"="+ts+s.listSep+s.sigKey+"="+digest)
	} else {
		h.Set(s.sigHeader, s.sigPrefix+digest)
		h.Set(s.tsHeader, ts)
	}
	if s.idHeader != "" {
		h.Set(s.idHeader, id)
	}
	return nil
}

// Challenge answers Slack's url_verification and Twitch's webhook_callback_verification (a
// signed request that asks the endpoint to echo its challenge before events are sent to it),
// Zoom's endpoint.url_validation (whose answer proves the secret), and acknowledges Twitch's
// revocation messages.
func (s *timestamped) Challenge(h http.Header, body []byte, secrets []string) ([]byte, string, bool) {
	switch s.name {
	case Zoom:
		var c struct {
			Event   string
			Payload struct{ PlainToken string }
		}
		if !control(body, `"endpoint.url_validation"`, &c) || c.Event != "endpoint.url_validation" || c.Payload.PlainToken == "" {
			return nil, "", false
		}
		secret, ok := s.signedBy(h, body, secrets)
		if !ok {
			return nil, "", false
		}
		// https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint:
		// encryptedToken is the hex HMAC-SHA256 of plainToken keyed with the secret token, as
		// the ring keys Zoom's (no error: the secret just verified the delivery).
		sum, _ := s.ring.sign(secret, []byte(c.Payload.PlainToken))
		answer, _ := json.Marshal(struct {
			PlainToken     string `json:"plainToken"`
			EncryptedToken string `json:"encryptedToken"`
		}{c.Payload.PlainToken, hex.EncodeToString(sum[:])})
		return answer, "application/json", true
	case Slack:
		var c struct{ Type, Challenge string }
		switch {
		case control(body, `"url_verification"`, &c) && c.Type == "url_verification" && c.Challenge != "":
			return []byte(c.Challenge), "text/plain", true
		case control(body, `"app_rate_limited"`, &c) && c.Type == "app_rate_limited":
			// The app passed Slack's events per workspace per hour: a notice, with no event.
			return nil, "text/plain", true
		}
		return nil, "", false
	case Twitch:
		// What the message is comes from the signed body; Twitch-Eventsub-Message-Type, unsigned,
		// is only held to it (CheckHeaders).
		var m twitchMessage
		if json.Unmarshal(body, &m) != nil {
			return nil, "", false
		}
		switch m.kind() {
		case TwitchRevocation:
			// The subscription is gone (its user revoked it, or too many deliveries failed):
			// acknowledged, and nothing to claim.
			return nil, "text/plain", true
		case TwitchVerification:
			return []byte(m.Challenge), "text/plain", true
		}
		return nil, "", false
	}
	return nil, "", false
}

// signedBy returns the secret, of secrets, that signed the delivery (a Zoom challenge's answer
// is keyed with it, so a rotation in progress answers with the secret Zoom holds).
func (s *timestamped) signedBy(h http.Header, body []byte, secrets []string) (string, bool) {
	now := time.Now()
	if ts, ok := s.unix(h.Get(s.tsHeader)); ok {
		now = time.Unix(ts, 0) // the timestamp was checked by Verify
	}
	for _, secret := range secrets {
		if s.Verify(h, body, []string{secret}, now) == nil {
			return secret, true
		}
	}
	return "", false
}

// Challenger is a scheme whose provider sends control messages besides events: a signed
// challenge whose answer must echo a value from it, or prove the secret (Slack's, Twitch's and
// Zoom's endpoint checks), or a notice to acknowledge (Twitch's revocation, Slack's
// app_rate_limited, Intercom's pings, Discord's PING). The receiver asks it once the signature
// is verified, and claims nothing.
type Challenger interface {
	// Challenge returns the answer's body and content type when the delivery is a control
	// message: an empty answer without a content type asks for 204 No Content (Discord's
	// PING). secrets are those the delivery was verified with.
	Challenge(h http.Header, body []byte, secrets []string) (answer []byte, contentType string, ok bool)
}
