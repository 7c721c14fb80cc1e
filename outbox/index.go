package outbox

import (
	"context"
	"iter"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// IndexAPI is the part of the DynamoDB client a reader of the pending index uses.
type IndexAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// ParkedClaims yields the claims with parked intents (under the pending index's parked and
// due-parked shards, dedup.ParkedViewShards), as IndexedClaims reads them, shard by shard;
// shards is the deployment's shard count. This is the list the ParkedIntents alarm points to.
func ParkedClaims(ctx context.Context, api IndexAPI, table string, shards int) iter.Seq2[*dedup.Claim, error] {
	return func(yield func(*dedup.Claim, error) bool) {
		for _, shard := range dedup.ParkedViewShards(shards) {
			for c, err := range IndexedClaims(ctx, api, table, shard) {
				if !yield(c, err) || err != nil {
					return
				}
			}
		}
	}
}

// IndexedClaims yields the claims under one hash key of the pending index (a due shard "P<n>",
// a due-parked one "due-parked-<n>" or a parked one "parked-<n>"), oldest first, read
// consistently by their keys (the index holds keys only), 100 to a BatchGetItem. A claim gone
// between the query and the read is skipped. It stops at the first error, which it yields.
func IndexedClaims(ctx context.Context, api IndexAPI, table, shard string) iter.Seq2[*dedup.Claim, error] {
	return func(yield func(*dedup.Claim, error) bool) {
		p := dynamodb.NewQueryPaginator(api, dedup.IndexQuery(table, shard))
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			for keys := range slices.Chunk(page.Items, 100) {
				pks := make([]string, len(keys))
				for i, k := range keys {
					pks[i] = k[dedup.PartitionKey].(*types.AttributeValueMemberS).Value
				}
				items, err := dedup.GetClaims(ctx, api, table, pks, 0)
				if err != nil {
					yield(nil, err)
					return
				}
				for _, pk := range pks {
					item, ok := items[pk]
					if !ok {
						continue
					}
					c, err := dedup.UnmarshalClaim(item)
					if !yield(c, err) || err != nil {
						return
					}
				}
			}
		}
	}
}
