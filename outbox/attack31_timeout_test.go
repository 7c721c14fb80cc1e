package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/outbox"
)

// Invariant (docs/outbox.md): max_in_flight is the calls to the target under way at once, across
// every worker. A call that timed out at the worker is still under way at the downstream (it
// has the request, and answers in its own time), but its slot is given back as soon as the
// timeout is recorded, and the next call starts while it is still running. A downstream slower
// than the target's timeout (1 s against 200 ms) sees three calls at once under max_in_flight 1.
func TestMaxInFlightHoldsWhenCallsOutlastTheirTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, time.Second)
	ids := []string{"evt_slow_a", "evt_slow_b", "evt_slow_c"}
	for _, id := range ids {
		e.commitOne(id)
	}
	ws := e.limitedWorkers(1, down, outbox.Limit{MaxInFlight: 1}, func(c *outbox.Config) {
		c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 200 * time.Millisecond}
	})
	var wg sync.WaitGroup
	for _, id := range ids {
		claim := e.claim(id)
		wg.Go(func() {
			if _, err := ws[0].Process(context.Background(), claim); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	down.mu.Lock()
	peak := down.peak
	down.mu.Unlock()
	if peak > 1 {
		t.Errorf("the downstream had %d calls under way at once, over max_in_flight 1", peak)
	}
}
