package receiver

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// A Planner turns one event into its plan: the effect records written with the claim and the
// intents for the outbox. It must be a pure function of the event, calling nothing that has
// effects: those belong in the plan.
type Planner func(ctx context.Context, ev dedup.Event) (dedup.Plan, error)

// ErrBadPayload is matched by planner errors that blame the payload: a 400 with the error's
// message, nothing claimed. Any other planner error is a 500, and the provider retries.
var ErrBadPayload = errors.New("bad payload")

// PayloadError is a planner's complaint about one field of the payload.
type PayloadError struct {
	Field  string // e.g. "data.order_id"
	Reason string // e.g. "is missing"
}

func (e *PayloadError) Error() string { return e.Field + " " + e.Reason }

// Is makes errors.Is(err, ErrBadPayload) true.
func (e *PayloadError) Is(target error) bool { return target == ErrBadPayload }

// A FieldPlanner is a Planner of a few payload fields, declared with HandleFields and read in
// the pass that checks the body. vals holds their values in the Fields' order (see Fields.Read).
type FieldPlanner func(ctx context.Context, ev dedup.Event, vals []string) (dedup.Plan, error)

// Planners maps (source, event type) to a Planner. Other types are handled as the source's
// unknown_types says and counted as UnknownType. Register every planner before New, which
// refuses (naming the pair) a pair registered twice or a source the sources file lacks.
type Planners struct {
	m    map[[2]string]planner
	errs []error
}

// planner is one registration: a FieldPlanner with the fields it reads (a Planner reads none).
type planner struct {
	fp     FieldPlanner
	fields *Fields
}

// NewPlanners returns an empty registry.
func NewPlanners() *Planners { return &Planners{m: map[[2]string]planner{}} }

// Handle registers p for events of eventType from source. Registering a pair twice is a wiring
// mistake that New reports.
func (ps *Planners) Handle(source, eventType string, p Planner) {
	var fp FieldPlanner
	if p != nil {
		fp = func(ctx context.Context, ev dedup.Event, _ []string) (dedup.Plan, error) { return p(ctx, ev) }
	}
	ps.add(source, eventType, planner{fp: fp, fields: noFields})
}

// noFields are a Planner's: it reads the payload itself.
var noFields = &Fields{}

// HandleFields registers p for events of eventType from source, with the fields it reads.
func (ps *Planners) HandleFields(source, eventType string, fields *Fields, p FieldPlanner) {
	ps.add(source, eventType, planner{fp: p, fields: fields})
}

func (ps *Planners) add(source, eventType string, p planner) {
	k := [2]string{source, eventType}
	if _, dup := ps.m[k]; dup {
		ps.errs = append(ps.errs, fmt.Errorf("receiver: a planner for %s %s is registered twice", source, eventType))
		return
	}
	if p.fp == nil || p.fields == nil {
		ps.errs = append(ps.errs, fmt.Errorf("receiver: the planner for %s %s is nil", source, eventType))
		return
	}
	ps.m[k] = p
}

// check reports registration mistakes: pairs registered twice, nil planners, and sources the
// sources file does not have (their planners would never run).
func (ps *Planners) check(srcs map[string]*sources.Source) error {
	if ps == nil {
		return nil
	}
	errs := append([]error(nil), ps.errs...)
	var unknown []string
	for k := range ps.m {
		if srcs[k[0]] == nil {
			unknown = append(unknown, k[0]+" "+k[1])
		}
	}
	slices.Sort(unknown)
	for _, u := range unknown {
		errs = append(errs, fmt.Errorf("receiver: a planner is registered for %s, and the sources file has no such source", u))
	}
	return errors.Join(errs...)
}

// Plan runs the planner registered for the event's source and type as the receiver does;
// known reports whether one is (with none, the plan is empty). Tests run planners with it.
func (ps *Planners) Plan(ctx context.Context, ev dedup.Event) (plan dedup.Plan, known bool, err error) {
	p, ok := ps.m[[2]string{ev.Source, ev.Type}]
	if !ok {
		return dedup.Plan{}, false, nil
	}
	var vals []string
	if p.fields != noFields {
		if vals = p.fields.Read(ev.Payload); vals == nil {
			return dedup.Plan{}, true, &PayloadError{Field: "body", Reason: "is not a JSON object"}
		}
	}
	plan, err = p.fp(ctx, ev, vals)
	return plan, true, err
}

// forSource returns the planners registered for source, by event type.
func (ps *Planners) forSource(source string) map[string]planner {
	m := map[string]planner{}
	if ps == nil {
		return m
	}
	for k, p := range ps.m {
		if k[0] == source {
			m[k[1]] = p
		}
	}
	return m
}

// Fields reads several values of a payload in one pass. Build it once, where the planner is
// declared.
type Fields struct {
	names []string
	paths jsonPaths
}

// NewFields compiles dot-separated paths of object keys ("data.object.id"), at most 64. It
// panics on an empty key: the paths are constants, so a wrong one is found at start.
func NewFields(paths ...string) *Fields {
	ps, err := compilePaths(paths...)
	if err != nil {
		panic(err)
	}
	return &Fields{names: paths, paths: ps}
}

// Read returns, in the paths' order, the string (decoded) or number (as written) at each, ""
// for none or another kind; nil when payload is not a JSON object. A repeated key's last wins.
func (f *Fields) Read(payload []byte) []string {
	var buf [maxPaths]span // NewFields takes no more
	at := buf[:len(f.paths)]
	if !f.paths.scan(payload, at) {
		return nil
	}
	vals := make([]string, len(at))
	for i, v := range at {
		vals[i] = scalar(payload, "", v)
	}
	return vals
}

// JSONField returns the string (or number, as written) at a dot-separated path of a payload,
// like a Fields of one path built for the call; ok is false where there is none.
func JSONField(payload []byte, path string) (string, bool) {
	ps, err := compilePaths(path)
	if err != nil {
		return "", false
	}
	if vals := (&Fields{paths: ps}).Read(payload); vals != nil && vals[0] != "" {
		return vals[0], true
	}
	return "", false
}
