package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// leavesKeys is the table's client, but each BatchGetItem leaves its last key unprocessed, as
// DynamoDB does when it throttles.
type leavesKeys struct {
	*dynamodb.Client
	batches int
}

func (l *leavesKeys) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	l.batches++
	for table, ka := range in.RequestItems {
		if len(ka.Keys) > 1 {
			last := ka.Keys[len(ka.Keys)-1]
			ka.Keys = ka.Keys[:len(ka.Keys)-1]
			in.RequestItems[table] = ka
			out, err := l.Client.BatchGetItem(ctx, in, o...)
			if err == nil {
				out.UnprocessedKeys = map[string]types.KeysAndAttributes{table: {Keys: []map[string]types.AttributeValue{last}, ConsistentRead: ka.ConsistentRead}}
			}
			return out, err
		}
	}
	return l.Client.BatchGetItem(ctx, in, o...)
}

// Every claim under a shard is yielded once, oldest first, in batches of 100, unprocessed keys
// asked again.
func TestIndexedClaimsReadsEveryClaimOfAShardInBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// One shard, so that one query page holds more keys than a batch.
	store, err := dedup.New(e.client, dedup.Config{Table: e.table, PendingShards: 1,
		Sources: map[string]dedup.Retention{"shop": {RetryHorizon: 72 * time.Hour, RedriveWindow: 30 * 24 * time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 230
	var want []string
	for i := range n {
		id := fmt.Sprintf("evt_idx_%03d", i)
		if _, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid"},
			dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email"}}}); err != nil {
			t.Fatal(err)
		}
		want = append(want, dedup.ClaimKey("shop", id))
	}
	api := &leavesKeys{Client: e.client}
	seen := map[string]int{}
	for _, shard := range []string{"P0"} {
		last := int64(0)
		for c, err := range outbox.IndexedClaims(context.Background(), api, e.table, shard) {
			if err != nil {
				t.Fatal(err)
			}
			if c.PendingShard != shard || c.PendingSince < last {
				t.Fatalf("%s under %s after %d: not this shard's, or out of order", c.PK, c.PendingShard, last)
			}
			last = c.PendingSince
			seen[c.PK]++
		}
	}
	for _, pk := range want {
		if seen[pk] != 1 {
			t.Fatalf("%s yielded %d times", pk, seen[pk])
		}
	}
	if len(seen) != n || api.batches < 6 { // 100 + 100 + 30 keys, each batch asked twice
		t.Fatalf("%d claims in %d batches", len(seen), api.batches)
	}
}
