package receiver

import (
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
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

// reader is what the receiver reads from one source's deliveries: the event's id, type,
// delivery id and time, and its planners' fields, every JSON path among them read in the one
// pass that checks the body.
type reader struct {
	// locs locate the values named by located, in its order; slot is each one's index in
	// paths, or -1 (a header, a form key, or none).
	locs     [4]*sources.Locator
	slot     [4]int
	planners map[string]plannerAt // by event type
	paths    jsonPaths
	// form: the body is a form, read by key; formJSON: a form field holding the JSON payload.
	form     bool
	formJSON string
}

// located names the values a reader locates; the first two are required.
var located = [4]string{"event_id", "event_type", "delivery_id", "occurred_at"}

// plannerAt is a registered planner with the index in paths of each field it reads.
type plannerAt struct {
	planner
	slots []int
}

func newReader(src *sources.Source, planners map[string]planner) (*reader, error) {
	r := &reader{planners: make(map[string]plannerAt, len(planners)), form: src.Body == sources.BodyForm}
	if key, ok := src.FormPayload(); ok {
		r.formJSON = key
	}
	var paths []string
	slots := map[string]int{}
	slotOf := func(path string) int {
		if i, ok := slots[path]; ok {
			return i
		}
		slots[path] = len(paths)
		paths = append(paths, path)
		return len(paths) - 1
	}
	for i, loc := range []*sources.Locator{src.EventID, src.EventType, src.DeliveryID, src.OccurredAt} {
		r.slot[i] = -1
		if loc == nil {
			continue
		}
		// A copy with canonical header names: canonicalizing "webhook-id" on every request's Get allocates.
		c := *loc
		c.Header, c.ScopeHeader = textproto.CanonicalMIMEHeaderKey(c.Header), textproto.CanonicalMIMEHeaderKey(c.ScopeHeader)
		r.locs[i] = &c
		if c.JSON != "" {
			r.slot[i] = slotOf(c.JSON)
		}
	}
	for typ, p := range planners {
		at := plannerAt{planner: p}
		if !r.form { // a form's fields are read by key, in plan
			for _, f := range p.fields.names {
				at.slots = append(at.slots, slotOf(f))
			}
		}
		r.planners[typ] = at
	}
	var err error
	if r.paths, err = compilePaths(paths...); err != nil {
		return nil, fmt.Errorf("the event locators and the planners' fields: %w", err)
	}
	return r, nil
}

// payload returns what the locators and planners read (the body, or a "form:<key>" source's
// JSON field), and a form body's fields.
func (r *reader) payload(raw []byte, text string) ([]byte, string, url.Values, error) {
	if !r.form && r.formJSON == "" {
		return raw, text, nil, nil
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return nil, "", nil, &fieldError{field: "body", reason: "is not form-encoded"}
	}
	if r.form {
		return raw, text, form, nil
	}
	vs := form[r.formJSON]
	if len(vs) != 1 {
		return nil, "", nil, &fieldError{field: "body", reason: "has no single " + strconv.Quote(r.formJSON) + " field holding the payload"}
	}
	return []byte(vs[0]), vs[0], nil, nil
}

// formValue is the single value of a form key; a repeated key is ambiguous and refused.
func formValue(form url.Values, key string) (string, error) {
	vs := form[key]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", &fieldError{field: "body", reason: "repeats the form key " + strconv.Quote(key)}
}

// extract builds the dedup event from a verified delivery: one pass checks the body is a JSON
// object and finds, in at (room for maxPaths), every value read; text is raw as a string, or
// "" (see scalar). A form body (form non-nil) is read by key instead.
func (r *reader) extract(name string, h http.Header, raw []byte, text string, at []span, form url.Values) (dedup.Event, error) {
	if form == nil && !r.paths.scan(raw, at) {
		return dedup.Event{}, &fieldError{field: "body", reason: "is not a JSON object"}
	}
	var vals [len(located)]string
	var repeated error // an optional key repeated: the last one read is named
	for i, loc := range r.locs {
		var err error
		switch {
		case loc == nil:
			continue
		case loc.Form != "":
			vals[i], err = formValue(form, loc.Form)
		case r.slot[i] >= 0:
			vals[i] = scalar(raw, text, at[r.slot[i]])
		default:
			vals[i] = h.Get(loc.Header)
		}
		if err != nil {
			if i < 2 {
				return dedup.Event{}, err
			}
			repeated = err
			continue
		}
		if vals[i] != "" && loc.ScopeHeader != "" {
			if scope := h.Get(loc.ScopeHeader); scope != "" {
				vals[i] = scope + ":" + vals[i]
			} else {
				vals[i] = ""
			}
		}
		if vals[i] == "" && i < 2 {
			return dedup.Event{}, &fieldError{field: located[i], reason: "is missing (expected at " + loc.String() + ")"}
		}
	}
	if repeated != nil {
		return dedup.Event{}, repeated
	}
	// The time is informational: an unreadable one is left out, not refused.
	return dedup.Event{Source: name, Payload: raw, ID: vals[0], Type: vals[1], DeliveryID: vals[2], OccurredAt: parseTime(vals[3])}, nil
}

// plan runs the planner registered for the event's type, if any, with its fields read by extract.
func (r *reader) plan(ctx context.Context, ev dedup.Event, text string, at []span, form url.Values) (plan dedup.Plan, known bool, err error) {
	p, ok := r.planners[ev.Type]
	if !ok {
		return dedup.Plan{}, false, nil
	}
	vals := make([]string, len(p.fields.names))
	if form != nil {
		for i, key := range p.fields.names {
			if vals[i], err = formValue(form, key); err != nil {
				return dedup.Plan{}, true, &PayloadError{Field: key, Reason: "is repeated"}
			}
		}
	}
	for i, slot := range p.slots {
		vals[i] = scalar(ev.Payload, text, at[slot])
	}
	plan, err = p.fp(ctx, ev, vals)
	return plan, true, err
}

// parseTime reads RFC 3339 or Unix seconds; zero when it is neither.
func parseTime(v string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		switch {
		case n < 1<<34: // Unix seconds (until the year 2514)
			return time.Unix(n, 0)
		case n >= 1e12 && n < 1e15: // Unix milliseconds (Linear's webhookTimestamp)
			return time.UnixMilli(n)
		}
	}
	return time.Time{}
}
