package dedup

import (
	"context"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A redelivered batch must get further than the attempt before it. That attempt may have
// claimed most of the batch before its provider gave up waiting; written again chunk by chunk,
// every claimed chunk costs a cancelled transaction (its write capacity and a round trip), and
// the retry runs out of time where the first did, for ever. So once a chunk comes back with a
// claim already taken, the rest of the batch is read first, in parallel BatchGetItem calls
// (cheaper than cancelled writes, and one round trip for the lot), and only the events not yet
// claimed are written.

// maxBatchGetKeys is BatchGetItem's limit; probeParallel bounds the calls in flight.
const (
	maxBatchGetKeys = 100
	probeParallel   = 8
)

// skipClaimed settles, from what it reads, every event of pending whose claim is already held
// (unexpired), as a cancelled transaction would have (a duplicate; our own write, recovered),
// and returns the events still to write. Keys DynamoDB leaves unprocessed, and every key of a
// failed call, stay pending: the transactions then decide them.
func (s *Store) skipClaimed(ctx context.Context, reqs []*request, pending []int, results []Result, now int64) (rest []int, calls int, err error) {
	groups := slices.Collect(slices.Chunk(pending, maxBatchGetKeys))
	found := make([]map[string]map[string]types.AttributeValue, len(groups)) // per group: claim pk -> item
	var wg sync.WaitGroup
	sem := make(chan struct{}, probeParallel)
	for g, group := range groups {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			pks := make([]string, len(group))
			for k, i := range group {
				pks[k] = attrString(reqs[i].claim, PartitionKey)
			}
			// One call: what it leaves unprocessed, or all of it when it fails, the
			// transactions decide.
			found[g], _, _ = getClaims(ctx, s.api, s.cfg.Table, pks, 1, nil)
		})
	}
	wg.Wait()
	calls = len(groups)
	for g, group := range groups {
		for _, i := range group {
			old := found[g][attrString(reqs[i].claim, PartitionKey)]
			if !holds(old, now) {
				rest = append(rest, i)
				continue
			}
			if results[i], err = s.taken(ctx, reqs[i], old, Result{}); err != nil {
				return nil, calls, err
			}
		}
	}
	return rest, calls, nil
}
