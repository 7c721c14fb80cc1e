package webhook

import (
	"bytes"
	"encoding/json"
)

// A provider's quirks in how it wants to be answered reach a receiver through these optional
// interfaces: the receiver asks the scheme, never the provider's name.

// control decodes body into v when body holds marker, which every control message of its
// provider does: events, which do not, skip the JSON decoding on the hot path.
func control(body []byte, marker string, v any) bool {
	return bytes.Contains(body, []byte(marker)) && json.Unmarshal(body, v) == nil
}

// NoContentAnswerer is a Scheme whose provider wants an accepted delivery answered 204 No
// Content, with no body, when AnswersNoContent is true (Discord requires it of webhook events).
type NoContentAnswerer interface{ AnswersNoContent() bool }

// HeadAnswerer is a Scheme whose provider checks an endpoint with a HEAD request before it
// sends to it, when AnswersHead is true (Intercom): a receiver answers 200, reading nothing.
type HeadAnswerer interface{ AnswersHead() bool }

// NoRetryMarker is a Scheme whose provider stops retrying a refused delivery when the answer
// carries a header: NoRetryHeader names it and its value, or returns "" (Slack's
// X-Slack-No-Retry: 1, api.slack.com/apis/events-api "Retries"). A receiver sets it on a 400,
// which a retry would only get again.
type NoRetryMarker interface{ NoRetryHeader() (name, value string) }

// AnswersNoContent is true for Discord.
func (s *publicKeyScheme) AnswersNoContent() bool { return s.name == Discord }

// AnswersHead is true for Intercom.
func (s *bodyScheme) AnswersHead() bool { return s.name == Intercom }

// NoRetryHeader is Slack's X-Slack-No-Retry.
func (s *timestamped) NoRetryHeader() (string, string) {
	if s.name == Slack {
		return "X-Slack-No-Retry", "1"
	}
	return "", ""
}
