package dedup

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
// claim is a *NoClaimError. Callers that take the source and id from a person should check
// them first (ValidateSourceName, Event.Validate): GetClaim builds the key from them as given.
func GetClaim(ctx context.Context, api GetItemAPI, table, source, eventID string) (*Claim, error) {
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
