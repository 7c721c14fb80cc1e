package dedup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GetItemAPI is the part of the DynamoDB client a reader of single items uses.
type GetItemAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// ErrNoClaim is what GetClaim's error matches (errors.Is) when no claim is stored.
var ErrNoClaim = errors.New("dedup: no claim")

// NoClaimError is GetClaim's error for an event with no claim in the table: never claimed,
// or expired and deleted by TTL.
type NoClaimError struct{ Table, Source, EventID string }

func (e *NoClaimError) Error() string {
	return fmt.Sprintf("no claim for %s %s in %s", e.Source, e.EventID, e.Table)
}

// Is makes errors.Is(err, ErrNoClaim) true.
func (e *NoClaimError) Is(target error) bool { return target == ErrNoClaim }

// GetClaim reads one event's claim by its key, consistently: one GetItem. An event with no
// claim is a *NoClaimError; a source or id no event can have is an *InvalidError naming it,
// before any read (source "shop#a" with id "b" would be the key of source "shop", id "a#b").
func GetClaim(ctx context.Context, api GetItemAPI, table, source, eventID string) (*Claim, error) {
	if err := ValidateSourceName("source", source); err != nil {
		return nil, err
	}
	if err := ValidateEventID(eventID); err != nil {
		return nil, err
	}
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            ClaimItemKey(ClaimKey(source, eventID)),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	if out.Item == nil {
		return nil, &NoClaimError{Table: table, Source: source, EventID: eventID}
	}
	return UnmarshalClaim(out.Item)
}

// IndexQuery is the Query of one hash key (shard) of the pending index (PendingIndex): a due
// shard, a due-parked or a parked one; its entries hold the claims' keys, oldest first. A caller
// adds its own conditions (on IndexSortKey) and values to it.
func IndexQuery(table, shard string) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		IndexName:                 aws.String(PendingIndex),
		KeyConditionExpression:    aws.String(IndexPartitionKey + " = :s"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(shard)},
	}
}

// BatchGetAPI is the part of the DynamoDB client a reader of many claims uses.
type BatchGetAPI interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// ErrUnprocessed is GetClaims' error when DynamoDB still left keys unprocessed (the table is
// throttling reads) after the rounds it was given.
var ErrUnprocessed = errors.New("dedup: keys left unprocessed")

// GetClaims reads the claim items of pks (ClaimKey; a repeated one is read once),
// consistently, 100 to a BatchGetItem. Keys DynamoDB leaves unprocessed are asked again after
// a growing, jittered pause, in at most rounds calls per 100 keys (0: until none is left), then
// the error is ErrUnprocessed. A pk without a claim is absent from the map; UnmarshalClaim
// reads an item.
func GetClaims(ctx context.Context, api BatchGetAPI, table string, pks []string, rounds int) (map[string]map[string]types.AttributeValue, error) {
	out, _, err := getClaims(ctx, api, table, pks, rounds, nil)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// getClaims is GetClaims of a projection of the claims (nil: all of them), with the calls it
// made; on an error, out holds the claims read before it.
func getClaims(ctx context.Context, api BatchGetAPI, table string, pks []string, rounds int, projection *string) (out map[string]map[string]types.AttributeValue, calls int, err error) {
	out = make(map[string]map[string]types.AttributeValue, len(pks))
	var keys []map[string]types.AttributeValue
	for _, pk := range slices.Compact(slices.Sorted(slices.Values(pks))) { // BatchGetItem refuses a key twice
		keys = append(keys, ClaimItemKey(pk))
	}
	for req := range slices.Chunk(keys, maxBatchGetKeys) {
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt == rounds && rounds > 0 {
				return out, calls, ErrUnprocessed
			}
			// Unprocessed keys: the table is throttling, so back off before asking again.
			if attempt > 0 {
				if err := jitterWait(ctx, time.Duration(min(attempt, 10))*100*time.Millisecond); err != nil {
					return out, calls, err
				}
			}
			calls++
			resp, err := api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				table: {Keys: req, ConsistentRead: aws.Bool(true), ProjectionExpression: projection}}})
			if err != nil {
				return out, calls, err
			}
			for _, item := range resp.Responses[table] {
				out[attrString(item, PartitionKey)] = item
			}
			req = resp.UnprocessedKeys[table].Keys
		}
	}
	return out, calls, nil
}
