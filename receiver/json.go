package receiver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/oncehook/oncehook/dedup"
)

// HandleJSON registers p for events of eventType from source, with the verified body decoded
// into a T by encoding/json (fields the body lacks keep their zero value; fields T lacks are
// ignored). A body that does not decode is a *PayloadError (400, nothing claimed) naming the
// field's path and the kind of JSON value it held, never the value, and p is not run. A field
// that must be present is p's to check. A form-encoded body (Twilio) is refused as not JSON.
//
// It is a function, not a method of Planners, because Go methods take no type parameters.
func HandleJSON[T any](ps *Planners, source, eventType string, p func(ctx context.Context, ev dedup.Event, v T) (dedup.Plan, error)) {
	if p == nil {
		ps.Handle(source, eventType, nil) // reported by New, as for Handle
		return
	}
	ps.Handle(source, eventType, func(ctx context.Context, ev dedup.Event) (dedup.Plan, error) {
		var v T
		if err := decodeJSON(ev.Payload, &v); err != nil {
			return dedup.Plan{}, err
		}
		return p(ctx, ev, v)
	})
}

// decodeJSON decodes exactly one JSON value into v, blaming the field a type mismatch is in. A
// Decoder, not json.Unmarshal: a body cut short is "unexpected EOF", where Unmarshal's checker
// can name a character the body does not hold.
func decodeJSON(payload []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(payload))
	err := d.Decode(v)
	if err == nil {
		if _, extra := d.Token(); extra != io.EOF {
			return &PayloadError{Field: "body", Reason: "holds more than one JSON value"}
		}
		return nil
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		// te.Value is "number 1e999": the kind only, so a hostile value never reaches the log.
		kind, _, _ := strings.Cut(te.Value, " ")
		return &PayloadError{Field: cmp.Or(te.Field, "body"), Reason: fmt.Sprintf("is a JSON %s, want %s", kind, te.Type)}
	}
	return &PayloadError{Field: "body", Reason: "is not valid JSON: " + err.Error()}
}
