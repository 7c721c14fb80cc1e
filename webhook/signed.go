package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
)

// What a signature covers decides what a receiver may act on. A delivery carries signed bytes
// and unsigned ones (most headers, and for some providers the event id or type); anything read
// from the unsigned part can be changed by whoever holds a captured delivery, without its
// signature failing. SignedContent and HeaderChecker are how a receiver keeps to the signed part.

// SignedContent returns what the delivery's signature covers, as its provider canonicalises
// it, apart from what the provider varies from one attempt to the next (a signed timestamp or
// message id): the raw body, for the schemes that sign the body; for Twilio, the URL followed by
// the form fields' names and values in the order Twilio signs them (sorted, decoded, with no
// delimiters); for Square, the URL followed by the body. rawURL is the URL the delivery was
// POSTed to, as VerifyURL takes it (ignored by the schemes that do not sign it).
//
// Any transformation of a delivery that keeps its signature valid (reordering or re-encoding
// Twilio's form fields, shifting the boundaries between them, changing an unsigned header)
// keeps its SignedContent, so a replay guard keyed on it refuses every such copy. A delivery
// whose body the scheme cannot read (a Twilio body that is not a form) gives a *SignatureError
// with ReasonMalformedBody, as Verify does.
func SignedContent(s Scheme, rawURL string, body []byte) ([]byte, error) {
	u, ok := s.(*urlScheme)
	if !ok {
		return body, nil
	}
	if u.name == Square {
		return append([]byte(rawURL), body...), nil
	}
	parsed, err := parseSignedURL(rawURL)
	if err != nil {
		return nil, u.badURL()
	}
	params, detail := twilioParams(parsed, body)
	if detail != "" {
		return nil, u.reject(ReasonMalformedBody, "", detail)
	}
	return twilioMessage(rawURL, params), nil
}

// SignsFields reports whether the scheme's signature binds each form field's name to its value.
// Twilio's does not: it signs names and values run together ("SmsSidSM1SmsStatussent"), so one
// field can swallow the ones after it and still verify. An event id read from such a form is
// not a signed id, however signed the string it came from.
func SignsFields(s Scheme) bool {
	u, ok := s.(*urlScheme)
	return !ok || u.name != Twilio
}

// HeaderChecker is a Scheme whose provider repeats in unsigned headers what its signed body
// says (Twitch's message and subscription types, Linear's event type). CheckHeaders returns a
// *HeaderMismatchError for the first such header that contradicts the body, and nil when each
// agrees or is absent. A receiver reads these values from the body and refuses (400) a delivery
// whose headers say otherwise, rather than act on either.
type HeaderChecker interface {
	CheckHeaders(h http.Header, body []byte) error
}

// ErrHeaderMismatch is matched (errors.Is) by every *HeaderMismatchError.
var ErrHeaderMismatch = errors.New("webhook: an unsigned header contradicts the signed body")

// HeaderMismatchError is an unsigned header that contradicts the delivery's signed body.
type HeaderMismatchError struct {
	// Scheme is the scheme's name, e.g. "twitch".
	Scheme string
	// Header is the header's canonical name.
	Header string
	// Says is the header's value, truncated and quoted; Signed is what the body says.
	Says, Signed string
}

// Error returns "webhook: <scheme>: <header> says <says>, the signed body <signed>".
func (e *HeaderMismatchError) Error() string {
	return "webhook: " + e.Scheme + ": " + e.Header + " says " + e.Says + ", the signed body " + e.Signed
}

// Is reports whether target is ErrHeaderMismatch.
func (e *HeaderMismatchError) Is(target error) bool { return target == ErrHeaderMismatch }

// The kinds of Twitch EventSub message, as Twitch-Eventsub-Message-Type names them
// (dev.twitch.tv/docs/eventsub/handling-webhook-events).
const (
	TwitchNotification = "notification"
	TwitchVerification = "webhook_callback_verification"
	TwitchRevocation   = "revocation"
	// TwitchSubscriptionTypeHeader repeats the body's subscription.type.
	TwitchSubscriptionTypeHeader = "Twitch-Eventsub-Subscription-Type"
	// LinearEventHeader repeats the body's type.
	LinearEventHeader = "Linear-Event"
)

// twitchMessage is what a Twitch body says of itself.
type twitchMessage struct {
	Challenge    string          `json:"challenge"`
	Event        json.RawMessage `json:"event"`
	Subscription struct {
		Type   string `json:"type"`
		Status string `json:"status"`
	} `json:"subscription"`
}

// kind is the message's kind, from the signed body: a verification carries a challenge, a
// notification an event, and a revocation neither, with its subscription's status no longer
// "enabled" (Twitch's three bodies, per its guide). A body of none of these shapes is "".
func (m *twitchMessage) kind() string {
	switch {
	case m.Challenge != "":
		return TwitchVerification
	case len(m.Event) > 0 && string(m.Event) != "null": // not a secret: JSON's null
		return TwitchNotification
	case m.Subscription.Status != "" && m.Subscription.Status != "enabled":
		return TwitchRevocation
	}
	return ""
}

// TwitchMessageKind returns the kind of a Twitch EventSub message (TwitchNotification,
// TwitchVerification or TwitchRevocation) from its signed body, or "" for a body of none of
// these shapes.
func TwitchMessageKind(body []byte) string {
	var m twitchMessage
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	return m.kind()
}

// CheckHeaders holds Twitch's Twitch-Eventsub-Message-Type and
// Twitch-Eventsub-Subscription-Type, and Linear's Linear-Event, to the signed body.
func (s *timestamped) CheckHeaders(h http.Header, body []byte) error {
	if s.name != Twitch {
		return nil
	}
	var m twitchMessage
	if json.Unmarshal(body, &m) != nil {
		return nil // not an object: the receiver refuses it for what it is
	}
	if v := h.Get(TwitchTypeHeader); v != "" && v != m.kind() {
		signed := "is a " + m.kind()
		if m.kind() == "" {
			signed = "is none of the messages Twitch sends"
		}
		return &HeaderMismatchError{Scheme: s.name, Header: TwitchTypeHeader, Says: quote(v), Signed: signed}
	}
	if v := h.Get(TwitchSubscriptionTypeHeader); v != "" && v != m.Subscription.Type {
		return &HeaderMismatchError{Scheme: s.name, Header: TwitchSubscriptionTypeHeader, Says: quote(v), Signed: "says " + quote(m.Subscription.Type)}
	}
	return nil
}

// CheckHeaders holds Linear's Linear-Event to the signed body's type.
func (s *bodyScheme) CheckHeaders(h http.Header, body []byte) error {
	var m struct{ Type string }
	if v := h.Get(LinearEventHeader); s.name == Linear && v != "" && json.Unmarshal(body, &m) == nil && v != m.Type {
		return &HeaderMismatchError{Scheme: s.name, Header: LinearEventHeader, Says: quote(v), Signed: "says " + quote(m.Type)}
	}
	return nil
}

// Coverage is what one scheme's signature covers. Everything else a delivery carries (other
// headers, the query string of a scheme that does not sign the URL, Twilio's form encoding) can
// be changed by whoever holds a captured delivery, and must not decide what a receiver does.
type Coverage struct {
	// Signature is the header carrying the signature.
	Signature string
	// Body: the raw body, byte for byte. False for Twilio, which signs its form's fields
	// decoded (Fields), or a JSON body's SHA-256 as the URL's bodySHA256.
	Body bool
	// Fields: the form fields' decoded names and values, sorted and run together (Twilio).
	Fields bool
	// URL: the URL called, query string included (Twilio, Square).
	URL bool
	// Headers are the other headers signed (a timestamp, a message id), canonical names.
	Headers []string
}

// Covers returns what s's signature covers.
func Covers(s Scheme) Coverage {
	switch s := s.(type) {
	case *timestamped: // Stripe's and Paddle's timestamp is in the signature header
		c := Coverage{Signature: s.sigHeader, Body: true}
		if s.idHeader != "" {
			c.Headers = append(c.Headers, s.idHeader)
		}
		if s.tsHeader != "" {
			c.Headers = append(c.Headers, s.tsHeader)
		}
		return c
	case *bodyScheme:
		return Coverage{Signature: s.header, Body: true}
	case *publicKeyScheme:
		return Covers(s.timestamped)
	case *urlScheme:
		if s.name == Twilio {
			return Coverage{Signature: s.header, Fields: true, URL: true}
		}
		return Coverage{Signature: s.header, Body: true, URL: true}
	}
	return Coverage{}
}
