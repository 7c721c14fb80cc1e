package dedup

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func reasons(codes ...string) []types.CancellationReason {
	out := make([]types.CancellationReason, len(codes))
	for i, c := range codes {
		out[i] = types.CancellationReason{Code: aws.String(c)}
	}
	return out
}

// TestCancellationReasonsAreReadByPositionInOrderOfPrecedence pins the rule in
// readCancellation, case by case, without an engine.
func TestCancellationReasonsAreReadByPositionInOrderOfPrecedence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		reasons []types.CancellationReason
		effects int
		want    cancelKind
		refused []int
		guarded bool // a body guard at index 1
	}{
		{"a failed claim is a duplicate", reasons("ConditionalCheckFailed", "None"), 1, claimTaken, nil, false},
		{"a failed claim wins over a conflict elsewhere", reasons("ConditionalCheckFailed", "TransactionConflict"), 1, claimTaken, nil, false},
		{"a failed claim wins over failed effects", reasons("ConditionalCheckFailed", "ConditionalCheckFailed"), 1, claimTaken, nil, false},
		{"a conflict on the claim is retried", reasons("TransactionConflict", "None"), 1, conflicted, nil, false},
		{"a conflict wins over a failed effect", reasons("None", "ConditionalCheckFailed", "TransactionConflict"), 2, conflicted, nil, false},
		{"throttling on any item is throttled", reasons("None", "ThrottlingError"), 1, throttled, nil, false},
		{"throttling wins over a failed effect", reasons("None", "ConditionalCheckFailed", "ProvisionedThroughputExceeded"), 2, throttled, nil, false},
		{"failed effects alone are absorbed, by index", reasons("None", "None", "ConditionalCheckFailed", "ConditionalCheckFailed"), 3, effectRefused, []int{1, 2}, false},
		{"a validation error wins over a failed effect", reasons("None", "ConditionalCheckFailed", "ValidationError"), 2, cancelOther, nil, false},
		{"an item collection limit is an error", reasons("None", "ItemCollectionSizeLimitExceeded"), 1, cancelOther, nil, false},
		{"reasons that do not match the actions are an error", reasons("ConditionalCheckFailed"), 1, cancelOther, nil, false},
		{"no failing reason is an error", reasons("None", "None"), 1, cancelOther, nil, false},
		{"a failed body guard is a replay", reasons("None", "ConditionalCheckFailed"), 0, bodyTaken, nil, true},
		{"a failed body guard wins over failed effects", reasons("None", "ConditionalCheckFailed", "ConditionalCheckFailed"), 1, bodyTaken, nil, true},
		{"a failed claim wins over a failed body guard", reasons("ConditionalCheckFailed", "ConditionalCheckFailed"), 0, claimTaken, nil, true},
		{"a conflict wins over a failed body guard", reasons("None", "ConditionalCheckFailed", "TransactionConflict"), 1, conflicted, nil, true},
		{"effects after a body guard are numbered from 0", reasons("None", "None", "None", "ConditionalCheckFailed"), 2, effectRefused, []int{1}, true},
		{"a validation error wins over a failed body guard", reasons("None", "ConditionalCheckFailed", "ValidationError"), 1, cancelOther, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := readCancellation(c.reasons, c.effects, c.guarded)
			if got.kind != c.want || len(got.refused) != len(c.refused) {
				t.Fatalf("got %+v, want kind %d refused %v", got, c.want, c.refused)
			}
			for i := range c.refused {
				if got.refused[i] != c.refused[i] {
					t.Fatalf("refused %v, want %v", got.refused, c.refused)
				}
			}
			if c.want == cancelOther && got.detail == "" {
				t.Fatal("an error must say what failed")
			}
		})
	}
}

// scripted answers each call with the next scripted response, for the paths no engine here
// takes (see the README's engine notes).
type scripted struct {
	puts     []error
	transact []error
	get      *dynamodb.GetItemOutput
	calls    []string
}

func (s *scripted) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	s.calls = append(s.calls, "PutItem")
	err := s.puts[0]
	s.puts = s.puts[1:]
	return &dynamodb.PutItemOutput{}, err
}

func (s *scripted) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.calls = append(s.calls, "TransactWriteItems")
	err := s.transact[0]
	s.transact = s.transact[1:]
	return &dynamodb.TransactWriteItemsOutput{}, err
}

func (s *scripted) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	s.calls = append(s.calls, "BatchGetItem")
	return &dynamodb.BatchGetItemOutput{}, nil
}

func (s *scripted) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	s.calls = append(s.calls, "GetItem")
	return s.get, nil
}

func scriptedStore(t *testing.T, api API) *Store {
	st, err := New(api, Config{Table: "t", Sources: map[string]Retention{"shop": {RetryHorizon: day}}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestAnEngineWithoutOldItemsCostsOneReadOnDuplicates(t *testing.T) {
	t.Parallel()
	first := map[string]types.AttributeValue{
		PartitionKey: str("EVT#shop#evt_8f2c1a"), SortKey: str(ClaimSK), attrDeliveryID: str("dlv_first"),
		attrPayloadSHA256: str(payloadHash([]byte("other"))), attrCommitToken: str("someone-else"),
		attrReceivedAt: str(time.Now().UTC().Format(time.RFC3339Nano)),
	}
	api := &scripted{puts: []error{&types.ConditionalCheckFailedException{}}, get: &dynamodb.GetItemOutput{Item: first}}
	res, err := scriptedStore(t, api).Commit(context.Background(), *sampleEvent([]byte("mine")), Plan{})
	if err != nil || res.Outcome != OutcomeDuplicate || !res.PayloadMismatch || res.FirstDeliveryID != "dlv_first" || res.Calls != 2 {
		t.Fatalf("got %+v, %v; want a duplicate with mismatch, read back in a second call", res, err)
	}
}

func TestAConcurrentDoubleDuringAnAbsorbIsADuplicate(t *testing.T) {
	t.Parallel()
	cancelled := &types.TransactionCanceledException{CancellationReasons: reasons("None", "ConditionalCheckFailed", "None", "None")}
	winner := map[string]types.AttributeValue{attrCommitToken: str("the-winner"), attrDeliveryID: str("dlv_winner")}
	api := &scripted{
		transact: []error{cancelled},
		puts:     []error{&types.ConditionalCheckFailedException{Item: winner}},
	}
	res, err := scriptedStore(t, api).Commit(context.Background(), *sampleEvent(nil), *samplePlan())
	if err != nil || res.Outcome != OutcomeDuplicate || res.FirstDeliveryID != "dlv_winner" || res.Calls != 2 {
		t.Fatalf("got %+v, %v (calls %v); want a duplicate after the absorbing put lost", res, err, api.calls)
	}
}

func TestConflictSettingsAreBounded(t *testing.T) {
	t.Parallel()
	base := Config{Table: "t", Sources: map[string]Retention{"shop": {RetryHorizon: day}}}
	for _, c := range []struct {
		name string
		edit func(*Config)
	}{
		{"negative backoff", func(c *Config) { c.ConflictBackoff = -time.Millisecond }},
		{"too many retries", func(c *Config) { c.ConflictRetries = 40 }},
		{"negative retries other than NoConflictRetries", func(c *Config) { c.ConflictRetries = -5 }},
		{"more pending shards than MaxPendingShards", func(c *Config) { c.PendingShards = MaxPendingShards + 1 }},
	} {
		cfg := base
		c.edit(&cfg)
		if _, err := New(nopAPI{}, cfg); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: got %v, want ErrInvalid", c.name, err)
		}
	}
	cfg := base
	cfg.ConflictRetries = NoConflictRetries
	st, err := New(&scripted{transact: []error{&types.TransactionCanceledException{CancellationReasons: reasons("TransactionConflict", "None", "None", "None")}}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(context.Background(), *sampleEvent(nil), *samplePlan()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("with retries off a conflict is unavailable at once: %v", err)
	}
}
