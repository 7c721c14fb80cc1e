// Package faults injects failures for the harness: an http.RoundTripper that sits under a
// DynamoDB client (the SDK's parsing and retries stay real) and, with a configured
// probability per call, answers the call itself with DynamoDB's own JSON error (throttling
// 400s, InternalServerError 500) before it reaches the engine, or lets the engine apply it and
// then loses the answer (the write landed, the client sees a connection reset); and the rates
// a test downstream uses to fail a share of its calls (500, 429, timeouts, applied then 500).
//
// It is off unless configured: one specification, e.g. ONCEHOOK_FAULTS in the functions'
// environment (package launch, in binaries built with -tags faultinject), parsed and validated by Parse:
//
//	dynamodb.throttle=0.05,dynamodb.error=0.02,dynamodb.lose=0.01,dynamodb.PutItem.lose=0.1,
//	downstream.error=0.05,downstream.throttle=0.05,downstream.timeout=0.02,downstream.lose=0.05,seed=7
//
// dynamodb.<kind> applies to every operation, dynamodb.<Operation>.<kind> replaces it for one
// operation; the kinds of one operation (and of the downstream) are exclusive outcomes of one
// draw, so their sum may not exceed 1. seed makes the draws reproducible (0: random).
//
// Neither the SDK nor a well-kept library offers this for a Go client (AWS FIS does not fault
// DynamoDB data-plane calls, and HTTP fault libraries such as github/go-fault are server-side
// handlers without DynamoDB's error shapes or a lost response), so the decorator is ours.
package faults

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Env is the environment variable the functions read their faults from.
const Env = "ONCEHOOK_FAULTS"

// Kind is one outcome of a draw.
type Kind string

// What a DynamoDB call or a downstream call can be made to do.
const (
	None     Kind = ""
	Throttle Kind = "throttle" // DynamoDB: a throttling 400; downstream: 429
	Error    Kind = "error"    // DynamoDB: InternalServerError 500; downstream: 500
	Lose     Kind = "lose"     // applied, then the answer is lost (DynamoDB) or a 500 (downstream)
	Timeout  Kind = "timeout"  // downstream only: no answer until the caller gives up
	Reject   Kind = "reject"   // downstream only: 422, a permanent refusal (the intent is parked)
)

// Rates are the probabilities of each fault for one kind of call.
type Rates struct {
	Throttle, Error, Lose, Timeout, Reject float64
}

// Zero reports whether no fault is configured.
func (r Rates) Zero() bool { return r == Rates{} }

// kinds are the faults in the order a draw meets them.
var kinds = []Kind{Throttle, Error, Lose, Timeout, Reject}

// rate is r's field for kind k; nil for None or an unknown kind.
func (r *Rates) rate(k Kind) *float64 {
	if i := slices.Index(kinds, k); i >= 0 {
		return [...]*float64{&r.Throttle, &r.Error, &r.Lose, &r.Timeout, &r.Reject}[i]
	}
	return nil
}

// Pick maps a uniform draw u in [0, 1) to a fault: [0, throttle) throttles, then error, lose,
// timeout and reject in turn; the rest is None.
func (r Rates) Pick(u float64) Kind {
	for _, k := range kinds {
		p := *r.rate(k)
		if u < p {
			return k
		}
		u -= p
	}
	return None
}

func (r Rates) sum() (s float64) {
	for _, k := range kinds {
		s += *r.rate(k)
	}
	return s
}

// Spec is a parsed fault specification.
type Spec struct {
	// DynamoDB applies to every DynamoDB operation without its own entry in Ops.
	DynamoDB Rates
	// Ops are per-operation rates ("PutItem", "TransactWriteItems"), replacing DynamoDB.
	Ops map[string]Rates
	// Downstream is for a test downstream (internal/harness); the functions ignore it.
	Downstream Rates
	// Seed makes the draws reproducible; 0 seeds at random.
	Seed uint64
}

// Operations are the DynamoDB operations a per-operation entry may name.
var Operations = []string{"BatchGetItem", "BatchWriteItem", "DeleteItem", "DescribeTable", "GetItem", "PutItem",
	"Query", "Scan", "TransactGetItems", "TransactWriteItems", "UpdateItem"}

// Parse reads a specification: comma-separated field=probability pairs (see the package
// doc). An empty string is no faults. Errors name the field.
func Parse(s string) (Spec, error) {
	var spec Spec
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		field, value, ok := strings.Cut(part, "=")
		field = strings.TrimSpace(field)
		if !ok {
			return Spec{}, fmt.Errorf("%q: want field=value", field)
		}
		value = strings.TrimSpace(value)
		if field == "seed" {
			n, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				return Spec{}, fmt.Errorf("%q: %q is not a non-negative integer", field, value)
			}
			spec.Seed = n
			continue
		}
		p, err := strconv.ParseFloat(value, 64)
		if err != nil || p < 0 || p > 1 || p != p {
			return Spec{}, fmt.Errorf("%q: %q is not a probability between 0 and 1", field, value)
		}
		if err := spec.set(field, p); err != nil {
			return Spec{}, fmt.Errorf("%q: %w", field, err)
		}
	}
	if spec.DynamoDB.sum() > 1 {
		return Spec{}, fmt.Errorf("%q: the dynamodb probabilities add up to more than 1", "dynamodb")
	}
	for op, r := range spec.Ops {
		if r.sum() > 1 {
			return Spec{}, fmt.Errorf("%q: the probabilities add up to more than 1", "dynamodb."+op)
		}
	}
	if spec.Downstream.sum() > 1 {
		return Spec{}, fmt.Errorf("%q: the downstream probabilities add up to more than 1", "downstream")
	}
	return spec, nil
}

var errField = errors.New("unknown field (want dynamodb[.Operation].throttle|error|lose, downstream.error|throttle|timeout|lose, or seed)")

func (s *Spec) set(field string, p float64) error {
	parts := strings.Split(field, ".")
	switch {
	case len(parts) == 2 && parts[0] == "downstream":
		return setKind(&s.Downstream, parts[1], p, true)
	case len(parts) == 2 && parts[0] == "dynamodb":
		return setKind(&s.DynamoDB, parts[1], p, false)
	case len(parts) == 3 && parts[0] == "dynamodb":
		op := parts[1]
		if !slices.Contains(Operations, op) {
			return fmt.Errorf("unknown DynamoDB operation %q (one of %s)", op, strings.Join(Operations, ", "))
		}
		r := s.Ops[op]
		if err := setKind(&r, parts[2], p, false); err != nil {
			return err
		}
		if s.Ops == nil {
			s.Ops = map[string]Rates{}
		}
		s.Ops[op] = r
		return nil
	}
	return errField
}

func setKind(r *Rates, kind string, p float64, downstream bool) error {
	f := r.rate(Kind(kind))
	switch {
	case f == nil:
		return errField
	case !downstream && (Kind(kind) == Timeout || Kind(kind) == Reject):
		return errors.New(kind + " is a downstream fault (DynamoDB calls: throttle, error, lose)")
	}
	*f = p
	return nil
}

// Rates returns the rates for one DynamoDB operation.
func (s Spec) Rates(op string) Rates {
	if r, ok := s.Ops[op]; ok {
		return r
	}
	return s.DynamoDB
}

// DynamoDBOn reports whether any DynamoDB fault is configured.
func (s Spec) DynamoDBOn() bool {
	if !s.DynamoDB.Zero() {
		return true
	}
	for _, r := range s.Ops {
		if !r.Zero() {
			return true
		}
	}
	return false
}

// OnlyDynamoDB is the spec without its downstream part: what the functions get.
func (s Spec) OnlyDynamoDB() Spec {
	s.Downstream = Rates{}
	return s
}

// String is the spec in Parse's syntax, fields in a fixed order, zero rates left out.
func (s Spec) String() string {
	var out []string
	add := func(prefix string, r Rates) {
		for _, k := range kinds {
			if p := *r.rate(k); p > 0 {
				out = append(out, prefix+string(k)+"="+strconv.FormatFloat(p, 'g', -1, 64))
			}
		}
	}
	add("dynamodb.", s.DynamoDB)
	for _, op := range slices.Sorted(maps.Keys(s.Ops)) {
		add("dynamodb."+op+".", s.Ops[op])
	}
	add("downstream.", s.Downstream)
	if s.Seed != 0 && len(out) > 0 {
		out = append(out, "seed="+strconv.FormatUint(s.Seed, 10))
	}
	return strings.Join(out, ",")
}

// Dice is a goroutine-safe source of uniform draws in [0, 1), seeded (0: at random).
type Dice struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewDice returns draws from seed (0: a random seed).
func NewDice(seed uint64) *Dice {
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &Dice{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Float64 is the next draw.
func (d *Dice) Float64() float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.r.Float64()
}
