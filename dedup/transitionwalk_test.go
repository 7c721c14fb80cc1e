package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
)

// TestEveryTransitionInRandomOrders: random walks over a claim of three intents (leases,
// at most once or not, done, park, retry, give back, redrive, resolve, settle; fresh and stale
// reads; the clock running past leases): no write may be refused by DynamoDB for its
// expression values (an unused or undefined placeholder), only by its conditions
// (ErrLeaseLost, ErrNotParked, ErrStranded); and the claim's place in the pending index must
// follow its intents' statuses.
func TestEveryTransitionInRandomOrders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cs := e.claims(e.client)
	ctx := context.Background()
	intents := []string{"a", "b", "c"}
	tally := map[string]int{}
	defer func() { t.Logf("outcomes: %v", tally) }()
	for seed := range 12 {
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		id := fmt.Sprintf("evt_walk_%d", seed)
		stale := e.threeIntents(t, id)
		var leases []*dedup.Lease
		for step := range 60 {
			fresh := e.claim(t, "shop", id)
			read := fresh
			if rng.IntN(4) == 0 {
				read = stale
			}
			stale = fresh
			intent := intents[rng.IntN(3)]
			var err error
			op := ""
			switch k := rng.IntN(10); {
			case k < 3:
				op = "lease"
				var l *dedup.Lease
				l, err = cs.Lease(ctx, read, intent, dedup.LeaseOptions{For: time.Minute, AtMostOnce: rng.IntN(2) == 0, StrandedAfter: time.Second})
				if l != nil {
					leases = append(leases, l)
				}
			case k < 7 && len(leases) > 0:
				i := rng.IntN(len(leases))
				l := leases[i]
				leases = append(leases[:i], leases[i+1:]...)
				switch rng.IntN(4) {
				case 0:
					op, err = "done", cs.Done(ctx, l, "msg")
				case 1:
					op, err = "park", cs.Park(ctx, l, "no")
				case 2:
					op, err = "retry", cs.Retry(ctx, l, e.clock.Now().Add(time.Duration(rng.IntN(3))*time.Second), "later")
				default:
					op, err = "give back", cs.GiveBack(ctx, l)
				}
			case k == 7:
				op, err = "redrive", cs.RedriveBy(ctx, read, intent, "ops@example.com")
			case k == 8:
				op, err = "resolve", cs.Resolve(ctx, read, intent, "ops", "handled by hand")
			default:
				op, err = "settle", cs.Settle(ctx, read)
			}
			tally[fmt.Sprintf("%s: %v", op, err)]++
			if rng.IntN(5) == 0 {
				e.clock.Advance(time.Duration(rng.IntN(90)) * time.Second)
			}
			if err != nil && !errors.Is(err, dedup.ErrLeaseLost) && !errors.Is(err, dedup.ErrNotParked) && !errors.Is(err, dedup.ErrStranded) {
				if strings.Contains(err.Error(), "kept changing") {
					continue
				}
				t.Fatalf("seed %d step %d %s %s: %v", seed, step, op, intent, err)
			}
			c := e.claim(t, "shop", id)
			open, parked := false, false
			for _, in := range c.Intents {
				switch in.Status {
				case dedup.IntentPending, dedup.IntentRunning:
					open = true
				case dedup.IntentParked:
					parked = true
				}
			}
			// A finish writes the place itself; Settle after it. Only where nothing says the
			// claim moved is it checked: open intents keep it out of the parked-only shard, and
			// a claim with nothing open or parked is out of the index once settled.
			if err == nil && op != "lease" && op != "give back" && op != "retry" {
				sh := c.PendingShard
				switch {
				case open && (sh == "" || dedup.IsParkedShard(sh)):
					t.Fatalf("seed %d step %d %s %s: open intents, shard %q (%+v)", seed, step, op, intent, sh, c.Intents)
				case !open && !parked && sh != "" && op != "redrive":
					t.Fatalf("seed %d step %d %s %s: nothing open or parked, shard %q", seed, step, op, intent, sh)
				}
			}
		}
	}
}
