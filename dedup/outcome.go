package dedup

import (
	"context"
	"time"
)

// Outcome is what a Commit did with one delivery. Every outcome but OutcomeReplay means the
// event id is durably claimed; a receiver answers 200 for each of them, OutcomeReplay included
// (see there).
type Outcome int

const (
	// OutcomeAccepted: this delivery claimed the event; its effects and intents are committed.
	OutcomeAccepted Outcome = iota + 1
	// OutcomeDuplicate: an unexpired claim for the event id already existed; nothing was written.
	OutcomeDuplicate
	// OutcomeAbsorbed: the claim was free but an effect's own business condition failed (the
	// second line of defence caught what the claim could not, e.g. a provider that sent one
	// fact under two event ids). The rule: a plan is applied whole or not at all, so the
	// event is claimed with none of its effects and none of its intents, the claim records
	// which effects were refused, and the outcome is counted as backstop absorbed.
	OutcomeAbsorbed
	// OutcomeReplay: the event id was free, but its body (Event.GuardBody) is already claimed
	// under another event id that has not expired: a signed delivery re-sent under a forged
	// id, or (the trade-off of the guard) a provider sending one fact twice under two ids.
	// Nothing was written and nothing of the plan runs. The body's event is durably accepted
	// under its first id, so a receiver answers as for a duplicate, and counts it.
	OutcomeReplay
)

func (o Outcome) String() string {
	if o < OutcomeAccepted || o > OutcomeReplay {
		return "unknown"
	}
	return [...]string{"accepted", "duplicate", "absorbed", "replay"}[o-OutcomeAccepted]
}

// Result describes a committed delivery.
type Result struct {
	Outcome Outcome
	// PayloadMismatch is set on a duplicate whose payload hash differs from the first
	// delivery's: the provider reused an event id for different content. It is still a
	// duplicate (the id is the identity), but it deserves a look.
	PayloadMismatch bool
	// FirstDeliveryID and FirstReceivedAt describe the delivery that holds the claim, when the
	// outcome is a duplicate.
	FirstDeliveryID string
	FirstReceivedAt time.Time
	// FirstEventID is the event id that holds the body, for OutcomeReplay.
	FirstEventID string
	// Absorbed lists the indexes in Plan.Effects whose conditions failed (OutcomeAbsorbed).
	Absorbed []int
	// Recovered is set when a lost response hid our own successful write and the retry found
	// the claim this very Commit had written: the outcome is Accepted, not Duplicate.
	Recovered bool
	// Calls is the number of DynamoDB requests this Commit issued (SDK retries not counted).
	Calls int
	// ExpiresAt is when the claim this delivery wrote expires (zero for a duplicate).
	ExpiresAt time.Time
}

// Report is what a Commit tells its Observer: one per call, success or failure.
type Report struct {
	Source, EventType, EventID, DeliveryID string
	Result                                 Result // zero Outcome when Err is set
	Latency                                time.Duration
	Err                                    error
}

// Observer receives one Report per Commit, for programs that use the Store directly (the
// receiver observes whole deliveries itself); it must not block.
type Observer interface {
	ObserveCommit(ctx context.Context, r Report)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, r Report)

// ObserveCommit calls f.
func (f ObserverFunc) ObserveCommit(ctx context.Context, r Report) { f(ctx, r) }
