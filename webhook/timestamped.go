package webhook

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Slack, Paddle and Twitch sign a timestamp (and Twitch a message id) with the body, each with
// HMAC-SHA256, hex-encoded, keyed with the secret as written:
//
//   - Slack: HMAC("v0:" + X-Slack-Request-Timestamp + ":" + body), sent as
//     X-Slack-Signature: v0=<hex>
//     (https://api.slack.com/authentication/verifying-requests-from-slack).
//   - Paddle Billing: HMAC(ts + ":" + body), sent as Paddle-Signature: ts=<unix>;h1=<hex>, with
//     one h1 per active secret while it is rotated
//     (https://developer.paddle.com/webhooks/signature-verification).
//   - Twitch EventSub: HMAC(Twitch-Eventsub-Message-Id + Twitch-Eventsub-Message-Timestamp +
//     body), sent as Twitch-Eventsub-Message-Signature: sha256=<hex>; the timestamp is RFC 3339
//     (https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message).

// The headers of the timestamped schemes, in net/http's canonical form.
const (
	SlackSignatureHeader  = "X-Slack-Signature"
	SlackTimestampHeader  = "X-Slack-Request-Timestamp"
	PaddleHeader          = "Paddle-Signature"
	TwitchSignatureHeader = "Twitch-Eventsub-Message-Signature"
	TwitchIDHeader        = "Twitch-Eventsub-Message-Id"
	TwitchTimestampHeader = "Twitch-Eventsub-Message-Timestamp"
	TwitchTypeHeader      = "Twitch-Eventsub-Message-Type"
)

// The providers' own tolerances: Slack's guide rejects requests over five minutes old, Paddle's
// SDKs allow five seconds, Twitch's guide ten minutes.
const (
	DefaultSlackTolerance  = 5 * time.Minute
	DefaultPaddleTolerance = 5 * time.Second
	DefaultTwitchTolerance = 10 * time.Minute
)

type timestamped struct {
	name      string
	sigHeader string
	tsHeader  string // "" when the timestamp is in the signature header (Paddle)
	idHeader  string // a signed message id (Twitch)
	version   string // a literal signed before the timestamp (Slack's "v0")
	sigPrefix string // before the hex digest in a single-signature header
	rfc3339   bool   // the timestamp is RFC 3339, not Unix seconds
	tolerance time.Duration
	ring      *keyring
}

func newTimestamped(name string, tolerance time.Duration) *timestamped {
	s := &timestamped{name: name, ring: newKeyring(name, rawSecret)}
	switch name {
	case Slack:
		s.sigHeader, s.tsHeader, s.version, s.sigPrefix, s.tolerance = SlackSignatureHeader, SlackTimestampHeader, "v0", "v0=", DefaultSlackTolerance
		s.ring.sep = ":"
	case Paddle:
		s.sigHeader, s.tolerance = PaddleHeader, DefaultPaddleTolerance
		s.ring.sep = ":"
	case Twitch:
		s.sigHeader, s.tsHeader, s.idHeader, s.sigPrefix, s.rfc3339, s.tolerance = TwitchSignatureHeader, TwitchTimestampHeader, TwitchIDHeader, "sha256=", true, DefaultTwitchTolerance
		s.ring.sep = ""
	}
	if tolerance != 0 {
		s.tolerance = tolerance
	}
	return s
}

func (s *timestamped) Name() string { return s.name }

// unix reads a signed timestamp as sent.
func (s *timestamped) unix(ts string) (int64, bool) {
	if !s.rfc3339 {
		return parseUnix(ts)
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return 0, false
	}
	return t.Unix(), true
}

func (s *timestamped) Verify(h http.Header, body []byte, secrets []string, now time.Time) error {
	if err := s.ring.check(secrets); err != nil {
		return err
	}
	v, reason, detail := header(h, s.sigHeader)
	if reason != "" {
		return reject(s.name, reason, s.sigHeader, detail)
	}
	var sigs signatures
	var ts, id string
	tsAt := s.sigHeader
	if s.tsHeader == "" {
		if detail := parseSignedList(v, ';', "ts", "h1", &ts, &sigs); detail != "" {
			return reject(s.name, ReasonMalformedHeader, s.sigHeader, detail)
		}
	} else {
		if detail := parseBodySignature(v, s.sigPrefix, EncodingHex, &sigs.sig[0]); detail != "" {
			return reject(s.name, ReasonMalformedHeader, s.sigHeader, detail)
		}
		sigs.n = 1
		if ts, reason, detail = header(h, s.tsHeader); reason != "" {
			return reject(s.name, reason, s.tsHeader, detail)
		}
		tsAt = s.tsHeader
	}
	if s.idHeader != "" {
		if id, reason, detail = header(h, s.idHeader); reason != "" {
			return reject(s.name, reason, s.idHeader, detail)
		}
	}
	unix, ok := s.unix(ts)
	if !ok {
		return reject(s.name, ReasonMalformedHeader, tsAt, "the timestamp is not of the scheme's form")
	}
	if detail := timestampDetail(unix, now, s.tolerance); detail != "" {
		return reject(s.name, ReasonTimestamp, tsAt, detail)
	}
	if sigs.n == 0 {
		return reject(s.name, ReasonNoMatch, s.sigHeader, "there is no h1 signature")
	}
	var f [2]string
	if !s.ring.anySecret(secrets, &sigs, body, s.fields(&f, id, ts)...) {
		return reject(s.name, ReasonNoMatch, s.sigHeader, "")
	}
	return nil
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
	if h == nil {
		return nilHeader(s.name)
	}
	if now.Unix() < 0 {
		return &InvalidError{Scheme: s.name, Field: "now", Reason: "the time is before 1970"}
	}
	if s.idHeader != "" && id == "" {
		return &InvalidError{Scheme: s.name, Field: "id", Reason: "the message id is signed and must not be empty"}
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	if s.rfc3339 {
		ts = now.UTC().Format(time.RFC3339Nano)
	}
	var f [2]string
	sum, err := s.ring.sign(secret, body, s.fields(&f, id, ts)...)
	if err != nil {
		return err
	}
	digest := hex.EncodeToString(sum[:])
	switch {
	case s.tsHeader == "":
		h.Set(s.sigHeader, "ts="+ts+";h1="+digest)
	default:
		h.Set(s.sigHeader, s.sigPrefix+digest)
		h.Set(s.tsHeader, ts)
	}
	if s.idHeader != "" {
		h.Set(s.idHeader, id)
	}
	return nil
}

func (s *timestamped) checkSecrets(secrets []string) error { return s.ring.check(secrets) }

// Challenge answers Slack's url_verification and Twitch's webhook_callback_verification (a
// signed request that asks the endpoint to echo its challenge before events are sent to it),
// and acknowledges Twitch's revocation messages.
func (s *timestamped) Challenge(h http.Header, body []byte) ([]byte, string, bool) {
	switch s.name {
	case Slack:
		if !bytes.Contains(body, []byte(`"url_verification"`)) {
			return nil, "", false // the hot path: no JSON decoding for events
		}
		var c struct{ Type, Challenge string }
		if json.Unmarshal(body, &c) != nil || c.Type != "url_verification" || c.Challenge == "" {
			return nil, "", false
		}
		return []byte(c.Challenge), "text/plain", true
	case Twitch:
		switch h.Get(TwitchTypeHeader) {
		case "revocation":
			// The subscription is gone (its user revoked it, or too many deliveries failed):
			// acknowledged, and nothing to claim.
			return nil, "text/plain", true
		case "webhook_callback_verification":
		default:
			return nil, "", false
		}
		var c struct{ Challenge string }
		if json.Unmarshal(body, &c) != nil || c.Challenge == "" {
			return nil, "", false
		}
		return []byte(c.Challenge), "text/plain", true
	}
	return nil, "", false
}

// Challenger is a scheme whose provider sends control messages besides events: a signed
// challenge whose answer must echo a value from it before events are sent (Slack's
// url_verification, Twitch's webhook_callback_verification), or a notice to acknowledge
// (Twitch's revocation). The receiver asks it once the signature is verified, and answers one
// without claiming anything.
type Challenger interface {
	// Challenge returns the answer's body and content type when the delivery is a control
	// message.
	Challenge(h http.Header, body []byte) (answer []byte, contentType string, ok bool)
}
