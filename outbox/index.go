package outbox

import (
	"context"
	"iter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// IndexAPI is the part of the DynamoDB client a reader of the pending index uses.
type IndexAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// ParkedClaims yields the claims with parked intents: those under the pending index's parked
// shards (where the outbox puts a claim once nothing in it is open and something is parked),
// shard by shard, oldest first within a shard, each read consistently by its key (the index
// holds keys only). A claim gone between the query and the read is skipped. It stops at the
// first error, which it yields. shards is the deployment's shard count (dedup.PendingShards
// unless configured). This is the list the ParkedIntents alarm points to.
func ParkedClaims(ctx context.Context, api IndexAPI, table string, shards int) iter.Seq2[*dedup.Claim, error] {
	return func(yield func(*dedup.Claim, error) bool) {
		_, parked := dedup.ShardNames(shards)
		for _, shard := range parked {
			for c, err := range IndexedClaims(ctx, api, table, shard) {
				if !yield(c, err) || err != nil {
					return
				}
			}
		}
	}
}

// IndexedClaims yields the claims under one hash key of the pending index (a due shard "P<n>"
// or a parked one "parked-<n>"), oldest first, each read consistently by its key. A claim gone
// between the query and the read is skipped. It stops at the first error, which it yields.
func IndexedClaims(ctx context.Context, api IndexAPI, table, shard string) iter.Seq2[*dedup.Claim, error] {
	return func(yield func(*dedup.Claim, error) bool) {
		p := dynamodb.NewQueryPaginator(api, &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			IndexName:                 aws.String(dedup.PendingIndex),
			KeyConditionExpression:    aws.String(dedup.AttrPendingShard + " = :s"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: shard}},
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, key := range page.Items {
				out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
					Key: map[string]types.AttributeValue{dedup.AttrPK: key[dedup.AttrPK], dedup.AttrSK: key[dedup.AttrSK]}})
				if err != nil {
					yield(nil, err)
					return
				}
				if out.Item == nil {
					continue
				}
				c, err := dedup.UnmarshalClaim(out.Item)
				if !yield(c, err) || err != nil {
					return
				}
			}
		}
	}
}
