// Package seeds gives the randomized schedule tests their seeds: new on every run, or those
// ONCEHOOK_SCHEDULE_SEED names, so that a failure is replayed from the seed its log printed.
package seeds

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// Schedule returns n consecutive seeds from a random base, or from ONCEHOOK_SCHEDULE_SEED when
// it is set, and logs how to replay them.
func Schedule(t testing.TB, n int) []uint64 {
	t.Helper()
	base := rand.Uint64() % 1_000_000
	if s := os.Getenv("ONCEHOOK_SCHEDULE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ONCEHOOK_SCHEDULE_SEED=%q: %v", s, err)
		}
		base = v
	}
	t.Logf("seeds %d to %d (ONCEHOOK_SCHEDULE_SEED=%d replays them)", base, base+uint64(n)-1, base)
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}
