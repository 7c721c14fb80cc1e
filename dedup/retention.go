package dedup

import (
	"fmt"
	"time"
)

// DefaultMargin is added to a source's retry horizon and redrive window when Keep is not set:
// room for our own replay tooling and operator-driven redrives. With a 72 h horizon and a 30-day
// redrive window it gives 47 days, inside the 45-60 days the design card recommends.
const DefaultMargin = 14 * 24 * time.Hour

// Retention is how long a source's claims must outlive their first delivery.
//
// A claim that expires while the provider can still deliver its event reopens the duplicate
// window, so the rule is: Keep >= RetryHorizon + RedriveWindow. Record the provider promise
// each number comes from next to the configuration; when the provider changes it, this is the
// one value to change.
type Retention struct {
	// RetryHorizon is how long the provider keeps retrying a failed delivery (Stripe: 3 days,
	// Standard Webhooks' reference schedule: about 1.5 days).
	RetryHorizon time.Duration
	// RedriveWindow is how old an event a redrive or replay can bring back.
	RedriveWindow time.Duration
	// Keep is how long claims live, from their receipt (from their event's time when that is
	// ahead of it). Zero means RetryHorizon + RedriveWindow + DefaultMargin.
	Keep time.Duration
}

// Needed is the shortest retention that is safe: RetryHorizon + RedriveWindow.
func (r Retention) Needed() time.Duration { return r.RetryHorizon + r.RedriveWindow }

// Effective is how long claims are kept: Keep, or the default derived from the provider.
func (r Retention) Effective() time.Duration {
	if r.Keep > 0 {
		return r.Keep
	}
	return r.Needed() + DefaultMargin
}

// Validate rejects a retention that would let claims expire while source can still deliver
// the same event: a *RetentionError when Keep is shorter than RetryHorizon + RedriveWindow,
// an *InvalidError for negative or missing durations, and for a sum too long to hold.
func (r Retention) Validate(source string) error {
	switch {
	case r.RetryHorizon <= 0:
		return &InvalidError{Field: "sources." + source + ".retry_horizon", Reason: "must be positive"}
	case r.RedriveWindow < 0:
		return &InvalidError{Field: "sources." + source + ".redrive_window", Reason: "must not be negative"}
	case r.Keep < 0:
		return &InvalidError{Field: "sources." + source + ".keep", Reason: "must not be negative"}
	case r.Needed() < r.RetryHorizon || r.Keep == 0 && r.Effective() < r.Needed(): // overflowed: born expired
		return &InvalidError{Field: "sources." + source + ".redrive_window", Reason: "with retry_horizon (and the default margin), longer than a duration can hold"}
	case r.Keep > 0 && r.Keep < r.Needed():
		return &RetentionError{Source: source, Keep: r.Keep, Needed: r.Needed()}
	}
	return nil
}

// String renders the retention with the promises it was derived from, for logs and docs.
func (r Retention) String() string {
	return fmt.Sprintf("keep %s (retry horizon %s + redrive window %s = %s needed)",
		days(r.Effective()), days(r.RetryHorizon), days(r.RedriveWindow), days(r.Needed()))
}

// days prints whole days as "30d" and anything else as a Go duration.
func days(d time.Duration) string {
	const day = 24 * time.Hour
	if d%day == 0 && d != 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	return d.String()
}
