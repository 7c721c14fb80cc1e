package harness

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/internal/faults"
)

// Expect is what a run asked for, and so what its end state may be.
type Expect struct {
	Events int // one claim and one intent each
	// MaxAttempts is the outbox's attempt budget (MAX_ATTEMPTS; 0 means its default).
	MaxAttempts int
	// Downstream is the faults the downstream injected; DynamoDB the faults the functions
	// injected into their DynamoDB calls, by role, as Deployment.InjectedFaults counted them.
	Downstream faults.Rates
	DynamoDB   map[string]map[faults.Kind]int
}

// CheckOutbox compares a run's end state with what it asked for and returns what is wrong:
//   - one claim per event, and every intent done or parked: none pending, none running;
//   - parked only where the run asked for it: a permanent refusal injected (the downstream's
//     reject) or a retry budget it could run out of under failures; each parked intent must show
//     why (a permanent error, or its attempts exhausted), and without such faults none may be;
//   - every done intent's key applied at the downstream;
//   - without any fault, one call per event: calls == applied == events;
//   - under faults, a repeated call for an applied key only where something explains it: a lost
//     downstream answer for that key, or (bounded by their count) a fault injected into the
//     outbox's or the sweeper's DynamoDB writes.
func CheckOutbox(exp Expect, t Tally, d *Downstream, prefix string) []string {
	var p []string
	maxAttempts := cmp.Or(exp.MaxAttempts, deployment.DefaultMaxAttempts)
	done, parked := t.Intents[dedup.IntentDone], t.Intents[dedup.IntentParked]
	if t.Claims != exp.Events {
		p = append(p, fmt.Sprintf("%d claims, want %d", t.Claims, exp.Events))
	}
	if n := t.Intents[dedup.IntentPending] + t.Intents[dedup.IntentRunning]; n > 0 {
		p = append(p, fmt.Sprintf("%d intents still pending or running", n))
	}
	if done+parked != exp.Events {
		p = append(p, fmt.Sprintf("%d intents done and %d parked, want %d in all (lost intents)", done, parked, exp.Events))
	}
	functionFaults := 0
	for _, role := range []string{"outbox", "sweeper"} {
		for _, n := range exp.DynamoDB[role] {
			functionFaults += n
		}
	}
	failing := exp.Downstream.Error+exp.Downstream.Throttle+exp.Downstream.Timeout+exp.Downstream.Lose > 0 || functionFaults > 0
	for _, in := range t.Parked {
		permanent := strings.HasPrefix(in.LastError, "permanent:")
		exhausted := in.Attempts-in.AttemptsBase >= maxAttempts
		switch {
		case permanent && exp.Downstream.Reject == 0:
			p = append(p, fmt.Sprintf("%s parked as permanent (%q), and the run injected no permanent refusal", in.Key, in.LastError))
		case exhausted && !failing:
			p = append(p, fmt.Sprintf("%s parked after %d attempts, and the run injected no failure", in.Key, in.Attempts))
		case !permanent && !exhausted:
			p = append(p, fmt.Sprintf("%s parked with no reason: %d attempts, last error %q", in.Key, in.Attempts, in.LastError))
		}
		if len(p) > 20 {
			return append(p, "...")
		}
	}
	if d == nil {
		return p
	}
	st := d.Stats(prefix)
	missing := 0
	for _, key := range t.Done {
		if !d.Applied(key) {
			missing++
		}
	}
	if missing > 0 {
		p = append(p, fmt.Sprintf("%d intents done but never applied downstream", missing))
	}
	if st.Rejected > parked {
		p = append(p, fmt.Sprintf("%d keys refused with a 422 but only %d intents parked", st.Rejected, parked))
	}
	if exp.Downstream.Zero() && functionFaults == 0 {
		if st.Calls != exp.Events || st.Applied != exp.Events {
			p = append(p, fmt.Sprintf("no fault injected, yet %d calls and %d keys applied for %d events: each intent must be called once", st.Calls, st.Applied, exp.Events))
		}
	}
	if st.Unexplained > functionFaults {
		p = append(p, fmt.Sprintf("%d repeated calls of applied keys beyond what lost answers explain (and %d faults in the outbox's writes): %v", st.Unexplained, functionFaults, st.Worst))
	}
	return p
}

// MissingFaults names each DynamoDB fault kind the spec asked for (a rate above zero, for any
// operation) that no function injected: a spec that did not reach the functions would
// otherwise pass as a run "under faults".
func MissingFaults(spec faults.Spec, injected map[string]map[faults.Kind]int) []string {
	asked := map[faults.Kind]bool{}
	mark := func(r faults.Rates) {
		asked[faults.Throttle] = asked[faults.Throttle] || r.Throttle > 0
		asked[faults.Error] = asked[faults.Error] || r.Error > 0
		asked[faults.Lose] = asked[faults.Lose] || r.Lose > 0
	}
	mark(spec.DynamoDB)
	for _, r := range spec.Ops {
		mark(r)
	}
	var p []string
	for _, k := range []faults.Kind{faults.Throttle, faults.Error, faults.Lose} {
		n := 0
		for _, m := range injected {
			n += m[k]
		}
		if asked[k] && n == 0 {
			p = append(p, fmt.Sprintf("dynamodb %s faults were asked for and none was injected", k))
		}
	}
	return p
}
