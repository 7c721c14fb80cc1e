package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// ClaimPrefix is the pk prefix of a run's claims for a source whose ids are not scoped.
func ClaimPrefix(source, run string) string { return dedup.ClaimKey(source, "msg_"+run+"_") }

// IDPrefix is the prefix of a run's event ids as the source keys them: msg_<run>_, after the
// scope receivertest sends ("1:") for a source whose id is scoped (GitHub's hook id).
func IDPrefix(src *sources.Source, run string) string {
	p := "msg_" + run + "_"
	if src.ScopedIDs() {
		p = "1:" + p
	}
	return p
}

// unfinished counts the claims under prefix that still have an intent pending or running: it
// reads the sparse pending index (a claim leaves it when every intent is done), and reads the
// claims themselves only when few are left in the index, since a parked intent keeps its claim
// there.
func unfinished(ctx context.Context, db *dynamodb.Client, table, prefix string) (n int, err error) {
	var pks []string
	for _, shard := range dedup.OpenShards(dedup.PendingShards) {
		in := dedup.IndexQuery(table, shard)
		in.FilterExpression = aws.String("begins_with(" + dedup.PartitionKey + ", :p)")
		in.ExpressionAttributeValues[":p"] = &types.AttributeValueMemberS{Value: prefix}
		p := dynamodb.NewQueryPaginator(db, in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return 0, err
			}
			for _, k := range page.Items {
				pks = append(pks, k[dedup.PartitionKey].(*types.AttributeValueMemberS).Value)
			}
		}
	}
	if len(pks) > 200 {
		return len(pks), nil
	}
	items, err := dedup.GetClaims(ctx, db, table, pks, 0)
	if err != nil {
		return 0, err
	}
	for _, item := range items {
		c, err := dedup.UnmarshalClaim(item)
		if err != nil {
			return 0, err
		}
		if c.Open() {
			n++
		}
	}
	return n, nil
}

// WaitFinished polls until no claim under prefix has a pending or running intent,
// calling tick (when set) between polls, for at most wait. It returns the last count.
func WaitFinished(ctx context.Context, db *dynamodb.Client, table, prefix string, wait time.Duration, tick func()) (int, error) {
	deadline := time.Now().Add(wait)
	for {
		n, err := unfinished(ctx, db, table, prefix)
		if err != nil || n == 0 || !time.Now().Before(deadline) {
			return n, err
		}
		if tick != nil {
			tick()
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Tally is the state of a run's claims and intents, read from the table.
type Tally struct {
	Claims  int
	Intents map[string]int // by status: pending, running, done, parked
	// Done lists the idempotency keys of the intents that are done.
	Done []string
	// Parked lists the parked intents, with what parked them.
	Parked []ParkedIntent
	// Attempts is every intent's attempt count, summed.
	Attempts int
}

// ParkedIntent is one parked intent as stored.
type ParkedIntent struct {
	Key                    string
	Attempts, AttemptsBase int
	LastError              string
}

// TallyClaims reads every claim under prefix (a consistent, filtered scan: a check, not a hot
// path) and counts its intents by status.
func TallyClaims(ctx context.Context, db *dynamodb.Client, table, prefix string) (Tally, error) {
	t := Tally{Intents: map[string]int{}}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		FilterExpression: aws.String("begins_with(" + dedup.PartitionKey + ", :p) AND " + dedup.SortKey + " = :sk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p":  &types.AttributeValueMemberS{Value: prefix},
			":sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK},
		}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return t, err
		}
		for _, item := range page.Items {
			c, err := dedup.UnmarshalClaim(item)
			if err != nil {
				return t, fmt.Errorf("claim %v: %w", item[dedup.PartitionKey], err)
			}
			t.Claims++
			for name, in := range c.Intents {
				t.Intents[in.Status]++
				t.Attempts += in.Attempts
				switch in.Status {
				case dedup.IntentDone:
					t.Done = append(t.Done, dedup.IdempotencyKey(c.Source, c.EventID, name))
				case dedup.IntentParked:
					t.Parked = append(t.Parked, ParkedIntent{Key: dedup.IdempotencyKey(c.Source, c.EventID, name),
						Attempts: in.Attempts, AttemptsBase: in.AttemptsBase, LastError: in.LastError})
				}
			}
		}
	}
	return t, nil
}
