package receiver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// fieldError is a 400: a value the source's configuration says is there is missing or wrong.
type fieldError struct {
	field  string
	reason string
}

func (e *fieldError) Error() string { return e.field + " " + e.reason }

// jsonString returns the JSON string or number at path in doc, as a string (numbers as
// written: numeric ids, Unix timestamps).
func jsonString(doc []byte, path string) (string, bool) {
	raw, ok := lookupJSON(doc, path)
	if !ok {
		return "", false
	}
	switch {
	case len(raw) > 1 && raw[0] == '"':
		if bytes.IndexByte(raw, '\\') < 0 {
			return string(raw[1 : len(raw)-1]), true
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", false
		}
		return v, true
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		return string(raw), true
	}
	return "", false
}

// locate returns the value a Locator points at, as a string: a header's value, or a JSON
// string or number. ok is false when it is absent or empty.
func locate(l *sources.Locator, h http.Header, body []byte) (string, bool) {
	var v string
	if l.Header != "" {
		v = h.Get(l.Header)
	} else {
		v, _ = jsonString(body, l.JSON)
	}
	if v == "" {
		return "", false
	}
	if l.ScopeHeader != "" {
		scope := h.Get(l.ScopeHeader)
		if scope == "" {
			return "", false
		}
		v = scope + ":" + v
	}
	return v, true
}

// extract builds the dedup event from a verified delivery.
func extract(name string, src *sources.Source, h http.Header, raw []byte) (dedup.Event, error) {
	// The body is checked once and read in place (see jsonscan.go).
	if !isObject(raw) {
		return dedup.Event{}, &fieldError{field: "body", reason: "is not a JSON object"}
	}
	b := raw
	ev := dedup.Event{Source: name, Payload: raw}
	var ok bool
	if ev.ID, ok = locate(src.EventID, h, b); !ok {
		return ev, &fieldError{field: "event_id", reason: "is missing (expected at " + src.EventID.String() + ")"}
	}
	if ev.Type, ok = locate(src.EventType, h, b); !ok {
		return ev, &fieldError{field: "event_type", reason: "is missing (expected at " + src.EventType.String() + ")"}
	}
	if src.DeliveryID != nil {
		ev.DeliveryID, _ = locate(src.DeliveryID, h, b)
	}
	if src.OccurredAt != nil {
		if v, ok := locate(src.OccurredAt, h, b); ok {
			ev.OccurredAt = parseTime(v) // informational: an unreadable time is left out, not refused
		}
	}
	return ev, nil
}

// parseTime reads RFC 3339 or Unix seconds; zero when it is neither.
func parseTime(v string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 && n < 1<<34 {
		return time.Unix(n, 0)
	}
	return time.Time{}
}
