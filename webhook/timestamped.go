package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Slack, Zoom, Paddle and Twitch sign a timestamp (and Twitch a message id) with the body, each with
// HMAC-SHA256, hex-encoded, keyed with the secret as written:
//
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
	s := &timestamped{name: name, tolerance: tolerance, ring: newKeyring(name, rawSecret)}
	switch name {
	case Slack:
		s.sigHeader, s.tsHeader, s.version, s.sigPrefix = SlackSignatureHeader, SlackTimestampHeader, "v0", "v0="
		s.ring.sep = ":"
	case Zoom:
		s.sigHeader, s.tsHeader, s.version, s.sigPrefix = ZoomSignatureHeader, ZoomTimestampHeader, "v0", "v0="
		s.ring.sep = ":"
	case Paddle:
		s.sigHeader = PaddleHeader
		s.ring.sep = ":"
	case Twitch:
		s.sigHeader, s.tsHeader, s.idHeader, s.sigPrefix, s.rfc3339 = TwitchSignatureHeader, TwitchTimestampHeader, TwitchIDHeader, "sha256=", true
		s.ring.sep = ""
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
		if detail := parseBodySignature(v, s.sigPrefix, EncodingHex, sigs.sig[0][:]); detail != "" {
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
// Zoom's endpoint.url_validation (whose answer proves the secret), and acknowledges Twitch's
// revocation messages.
func (s *timestamped) Challenge(h http.Header, body []byte, secrets []string) ([]byte, string, bool) {
	switch s.name {
	case Zoom:
		if !bytes.Contains(body, []byte(`"endpoint.url_validation"`)) {
			return nil, "", false
		}
		var c struct {
			Event   string
			Payload struct{ PlainToken string }
		}
		if json.Unmarshal(body, &c) != nil || c.Event != "endpoint.url_validation" || c.Payload.PlainToken == "" {
			return nil, "", false
		}
		secret, ok := s.signedBy(h, body, secrets)
		if !ok {
			return nil, "", false
		}
		// https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint:
		// encryptedToken is the hex HMAC-SHA256 of plainToken keyed with the secret token.
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(c.Payload.PlainToken))
		answer, _ := json.Marshal(struct {
			PlainToken     string `json:"plainToken"`
			EncryptedToken string `json:"encryptedToken"`
		}{c.Payload.PlainToken, hex.EncodeToString(m.Sum(nil))})
		return answer, "application/json", true
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
		// What the message is comes from the signed body; Twitch-Eventsub-Message-Type, unsigned,
		// is only held to it (CheckHeaders).
		m, ok := readTwitch(body)
		if !ok {
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
	if ts, err := strconv.ParseInt(h.Get(s.tsHeader), 10, 64); err == nil {
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
// challenge whose answer must echo a value from it, or prove the secret, before events are sent
// (Slack's url_verification, Twitch's webhook_callback_verification, Zoom's
// endpoint.url_validation), or a notice to acknowledge (Twitch's revocation, Intercom's
// pings, Discord's PING). The receiver asks
// it once the signature is verified, and answers one without claiming anything.
type Challenger interface {
	// Challenge returns the answer's body and content type when the delivery is a control
	// message: an empty answer without a content type asks for 204 No Content (Discord's
	// PING). secrets are those the delivery was verified with.
	Challenge(h http.Header, body []byte, secrets []string) (answer []byte, contentType string, ok bool)
}
