package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncehook/oncehook/outbox"
)

// sleepToPhase sleeps until the clock is phase into a window of length w (the windows the rate
// limiter cuts time into: multiples of w since the epoch).
func sleepToPhase(now func() time.Time, w, phase time.Duration) {
	t := now()
	at := t.Truncate(w).Add(phase)
	if !at.After(t) {
		at = at.Add(w)
	}
	time.Sleep(at.Sub(t))
}

// overTheRate returns the first run of calls, from starts[i] to starts[j], that is more than
// rate*T plus two windows' quota over its span T (docs/outbox.md: over any span, never more
// than rate x T plus two quotas).
func overTheRate(starts []time.Time, rate float64) (i, j int, ok bool) {
	q := float64(outbox.RateQuota(rate))
	for i = range starts {
		for j = i; j < len(starts); j++ {
			if float64(j-i+1) > rate*starts[j].Sub(starts[i]).Seconds()+2*q {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

// Invariant (docs/outbox.md, "Per-target limits"): over any span T, never more than rate x T
// plus two windows' quota start, across workers (fixed windows let a span straddling a
// window's end and the next one's start see two quotas, however short the span). At rate 1 (a
// window of one call a second), two workers each with a call: one takes its turn in the later
// part of a window, the other at the start of the next: two calls, never three.
func TestTheRateHoldsOverASpanShorterThanAWindowAcrossWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, 0)
	e.commitOne("evt_rate_a")
	e.commitOne("evt_rate_b")
	const rate = 1
	window := time.Duration(float64(outbox.RateQuota(rate)) / rate * float64(time.Second))
	ws := e.limitedWorkers(2, down, outbox.Limit{Rate: rate}, nil)

	sleepToPhase(e.now, window, window*6/10) // the later part of a window
	if sum, err := ws[0].Process(context.Background(), e.claim("evt_rate_a")); err != nil || sum[outbox.OutcomeDone] != 1 {
		t.Fatalf("first worker: %v %v", sum, err)
	}
	sleepToPhase(e.now, window, 10*time.Millisecond) // the start of the next one
	if sum, err := ws[1].Process(context.Background(), e.claim("evt_rate_b")); err != nil || sum[outbox.OutcomeDone]+sum[outbox.OutcomeHeld] != 1 {
		t.Fatalf("second worker: %v %v", sum, err)
	}
	down.mu.Lock()
	starts := append([]time.Time(nil), down.starts...)
	down.mu.Unlock()
	if i, j, over := overTheRate(starts, rate); over {
		t.Errorf("%d calls started within %s at rate %g (quota %d): over rate x T + two windows' quota (%.2f)",
			j-i+1, starts[j].Sub(starts[i]).Round(time.Millisecond), float64(rate), outbox.RateQuota(rate),
			rate*starts[j].Sub(starts[i]).Seconds()+2*float64(outbox.RateQuota(rate)))
	}
}
