package dedup

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Field limits for an Event. The event id is bounded well under DynamoDB's 2048-byte partition
// key limit so that the claim key EVT#<source>#<event_id> always fits.
const (
	MaxSourceLen     = 64
	MaxEventIDBytes  = 512
	MaxEventTypeLen  = 256
	MaxDeliveryIDLen = 256
)

// Event is one delivery of a provider's event, as the receiver parsed it.
type Event struct {
	// Source names the configured provider ("stripe", "github-acme"). It scopes the event id:
	// two providers may use the same ids. Lower-case letters, digits, '-' and '_'.
	Source string
	// ID is the provider's event id: stable across retries and redrives, and the dedup key.
	ID string
	// Type is the provider's event type, e.g. "order.paid". It selects the planner.
	Type string
	// DeliveryID identifies this delivery attempt. It is recorded and logged, never a key:
	// it changes on every retry by design.
	DeliveryID string
	// OccurredAt is when the provider says the event happened; zero when it does not say.
	OccurredAt time.Time
	// Payload is the raw body. Only its SHA-256 is stored, to detect an id reused with
	// different content; it is never part of the dedup key.
	Payload []byte
	// GuardBody claims the body itself along with the event id, in the same write: set it
	// when the signature does not cover the event id (GitHub's, Shopify's and generic HMAC
	// sources' ids are unsigned headers; only their bodies are signed). A byte-identical body
	// presented again under another event id within the retention is then refused as a
	// replay (OutcomeReplay) and nothing is written. The event id stays the dedup key: the
	// body guard only refuses what the key would have let through.
	GuardBody bool
	// Guard is what the body guard claims when GuardBody is set, in place of the payload:
	// what the provider's signature covers, as the provider canonicalises it, and anything
	// unsigned the source chooses to tell events apart by (webhook.SignedContent; Twilio's
	// URL and sorted fields, Shopify's topic and body). Nil means the payload. Only its
	// SHA-256 is stored.
	Guard []byte
}

// Validate reports the first field of e that cannot be claimed, as an *InvalidError.
func (e *Event) Validate() error {
	if err := validName("source", e.Source, MaxSourceLen); err != nil {
		return err
	}
	if err := validText("event_id", e.ID, MaxEventIDBytes, true); err != nil {
		return err
	}
	if err := validText("event_type", e.Type, MaxEventTypeLen, true); err != nil {
		return err
	}
	return validText("delivery_id", e.DeliveryID, MaxDeliveryIDLen, false)
}

// ValidateSourceName reports whether name can be a source: 1 to MaxSourceLen characters of
// a-z, 0-9, '-' and '_'. The error is an *InvalidError naming field.
func ValidateSourceName(field, name string) error { return validName(field, name, MaxSourceLen) }

// validName accepts the restricted alphabet used for sources and intent names. Keeping '#'
// out of sources is what makes the claim key EVT#<source>#<event_id> unambiguous.
func validName(field, s string, max int) error {
	if s == "" {
		return &InvalidError{Field: field, Reason: "is empty"}
	}
	if len(s) > max {
		return &InvalidError{Field: field, Reason: fmt.Sprintf("is %d bytes, limit is %d", len(s), max)}
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return &InvalidError{Field: field, Reason: fmt.Sprintf("has %q; use a-z, 0-9, '-' and '_'", r)}
		}
	}
	return nil
}

// validText accepts provider-chosen identifiers: any printable UTF-8 up to max bytes.
// Unprintable characters are refused because these values end up in keys, logs and metrics.
func validText(field, s string, max int, required bool) error {
	if s == "" {
		if required {
			return &InvalidError{Field: field, Reason: "is empty"}
		}
		return nil
	}
	if len(s) > max {
		return &InvalidError{Field: field, Reason: fmt.Sprintf("is %d bytes, limit is %d", len(s), max)}
	}
	for i := 0; i < len(s); {
		if c := s[i]; c >= 0x20 && c < 0x7f { // printable ASCII, nearly every id: no rune decoding
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return &InvalidError{Field: field, Reason: "is not valid UTF-8"}
		}
		// IsPrint, not just !IsControl: format and separator characters (U+202E, U+200B,
		// U+2028) make ids that look alike but differ, and spoof text in logs.
		if !unicode.IsPrint(r) {
			return &InvalidError{Field: field, Reason: fmt.Sprintf("contains the unprintable character %U", r)}
		}
		i += size
	}
	return nil
}

// ValidateTargetName reports whether name can be an intent's target: 1 to MaxIntentTargetLen
// bytes of printable UTF-8. A target a deployment names otherwise is one no intent can reach.
func ValidateTargetName(name string) error {
	return validText("target", name, MaxIntentTargetLen, true)
}

// ValidateEventID reports whether id can be an event's id: 1 to MaxEventIDBytes bytes of
// printable UTF-8, as Event.Validate holds it.
func ValidateEventID(id string) error { return validText("event_id", id, MaxEventIDBytes, true) }

// ValidateDeliveryID reports whether s can be stored as a delivery id. The receiver drops an
// unusable delivery id rather than refuse the event: it is informational, never a key.
func ValidateDeliveryID(s string) error {
	return validText("delivery_id", s, MaxDeliveryIDLen, false)
}
