package dedup

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestTheCapacityTableHoldsForTheCodesShardChoice checks docs/capacity.md's shard counts
// against the code's own key choice (DueShard): for each documented rate, the busiest pending
// index shard, among realistic claim keys, stays under the 800 write units per second the
// document allows a shard (80% of DynamoDB's 1,000 per partition). Each event writes its
// shard twice: the commit puts the index entry, the finish deletes it.
func TestTheCapacityTableHoldsForTheCodesShardChoice(t *testing.T) {
	t.Parallel()
	const perShardLimit = 800.0
	keys := realisticClaimKeys(200_000)
	for _, row := range []struct {
		events float64 // new events per second
		shards int
		fits   bool
	}{
		{1_000, PendingShards, true},
		{10_000, PendingShards, false}, // why the document says to raise it
		{10_000, 32, true},
		{50_000, 128, false}, // 2 x 50,000 / 128 = 781 if even; FNV over real keys is not quite
		{50_000, 256, true},
	} {
		counts := make([]int, row.shards)
		for _, k := range keys {
			counts[shardOf(k, row.shards)]++
		}
		busiest := 0
		for _, c := range counts {
			busiest = max(busiest, c)
		}
		share := float64(busiest) / float64(len(keys))
		peak := 2 * row.events * share
		t.Logf("%6.0f events/s over %3d shards: busiest shard takes %.2f%% of claims (even: %.2f%%), %4.0f index writes/s",
			row.events, row.shards, 100*share, 100/float64(row.shards), peak)
		if (peak <= perShardLimit) != row.fits {
			t.Errorf("%.0f events/s over %d shards: busiest shard %.0f writes/s; the document says it %s", row.events, row.shards, peak,
				map[bool]string{true: "fits", false: "does not fit"}[row.fits])
		}
	}
}

// realisticClaimKeys mixes the id shapes providers send: Stripe's evt_ + 24 base62, Standard
// Webhooks' msg_ + 27 (KSUID-like), GitHub's hook id and delivery GUID.
func realisticClaimKeys(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	token := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alnum[r.IntN(len(alnum))]
		}
		return string(b)
	}
	keys := make([]string, n)
	for i := range keys {
		switch i % 3 {
		case 0:
			keys[i] = ClaimKey("stripe", "evt_"+token(24))
		case 1:
			keys[i] = ClaimKey("shop", "msg_"+token(27))
		default:
			keys[i] = ClaimKey("github", fmt.Sprintf("%d:%08x-%04x-%04x-%04x-%012x", 292430182+r.IntN(5), r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff))
		}
	}
	return keys
}
