package receiver

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncehook/oncehook/dedup"
)

// A Planner turns one event into its plan: the local effect records to write with the claim
// and the intents (external effects) for the outbox. It must be a pure function of the event:
// every delivery of an event must plan the same thing, and it must not call anything that has
// effects: those belong in the plan.
type Planner func(ctx context.Context, ev dedup.Event) (dedup.Plan, error)

// ErrBadPayload is matched by planner errors that blame the payload (a missing field, a wrong
// type). The receiver answers 400 with the error's message and claims nothing; any other
// planner error is a 500, and the provider will retry.
var ErrBadPayload = errors.New("bad payload")

// PayloadError is a planner's complaint about one field of the payload.
type PayloadError struct {
	Field  string // e.g. "data.order_id"
	Reason string // e.g. "is missing"
}

func (e *PayloadError) Error() string { return e.Field + " " + e.Reason }

// Is makes errors.Is(err, ErrBadPayload) true.
func (e *PayloadError) Is(target error) bool { return target == ErrBadPayload }

// Planners maps (source, event type) to a Planner. Event types without one are claimed with
// an empty plan (so their redeliveries are still deduplicated) and counted as UnknownType.
type Planners struct {
	m map[[2]string]Planner
}

// NewPlanners returns an empty registry.
func NewPlanners() *Planners { return &Planners{m: map[[2]string]Planner{}} }

// Handle registers p for events of eventType from source. Registering a pair twice panics: it
// is a wiring mistake, found at start.
func (ps *Planners) Handle(source, eventType string, p Planner) {
	k := [2]string{source, eventType}
	if _, dup := ps.m[k]; dup {
		panic(fmt.Sprintf("receiver: a planner for %s %s is already registered", source, eventType))
	}
	ps.m[k] = p
}

// lookup returns the planner for the event, if one is registered.
func (ps *Planners) lookup(source, eventType string) (Planner, bool) {
	if ps == nil {
		return nil, false
	}
	p, ok := ps.m[[2]string{source, eventType}]
	return p, ok
}

// JSONField returns the string (or number, as written) at a dot-separated path in a payload
// the receiver has already checked to be a JSON object, without decoding the rest of it:
// planners that need two fields of a large payload need not pay for decoding all of it.
func JSONField(payload []byte, path string) (string, bool) {
	return jsonString(payload, path)
}
