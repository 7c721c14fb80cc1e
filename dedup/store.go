package dedup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// API is the part of the DynamoDB client a Store uses. *dynamodb.Client satisfies it, and so do
// the decorators tests and the load harness wrap around it (call counting, fault injection).
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	// BatchGetItem reads the claims of a redelivered batch before writing it (CommitBatch).
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Config configures a Store.
type Config struct {
	// Table is the DynamoDB table holding claims, effects and outboxes.
	Table string
	// Sources maps each accepted source name to its retention. A Commit for a source not
	// listed here is refused: its retention would be a guess.
	Sources map[string]Retention
	// Now is the clock; time.Now when nil. Tests inject one to move past expiry without sleeping.
	Now func() time.Time
	// Observer receives a Report per Commit; none when nil.
	Observer Observer
	// ConflictRetries bounds how often a transaction cancelled by TransactionConflict (a
	// concurrent double is committing the same claim) is tried again: 0 means the default,
	// 3; NoConflictRetries turns retries off; at most MaxConflictRetries.
	ConflictRetries int
	// ConflictBackoff is the base of the jittered backoff between those tries. Default 20 ms.
	ConflictBackoff time.Duration
	// Tables are the application's other tables that effects may write (Effect.In), by the
	// name planners use, with their key schemas: same account and Region, written in the
	// claim's transaction.
	Tables map[string]TableKeys
	// PendingShards is how many hash keys the pending index spreads claims with intents over:
	// PendingShards (16) when zero, at most MaxPendingShards. The outbox's sweeper must read
	// the same count, and it may only ever grow (see DueShard).
	PendingShards int
}

// TableKeys is another table: its name in DynamoDB (the Config.Tables key when empty; a table
// ARN also serves), its partition key attribute and its sort key attribute ("" for a table
// without one). Key values may be strings, numbers or binary.
type TableKeys struct {
	Name         string
	PartitionKey string
	SortKey      string
}

// MaxConflictRetries bounds Config.ConflictRetries; NoConflictRetries disables retries.
const (
	MaxConflictRetries = 10
	NoConflictRetries  = -1
)

func (c *Config) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Observer == nil {
		c.Observer = ObserverFunc(func(context.Context, Report) {})
	}
	switch c.ConflictRetries {
	case 0:
		c.ConflictRetries = 3
	case NoConflictRetries:
		c.ConflictRetries = 0
	}
	c.ConflictBackoff = cmp.Or(c.ConflictBackoff, 20*time.Millisecond)
	c.PendingShards = cmp.Or(c.PendingShards, PendingShards)
}

// Validate checks the configuration: a table, at least one source, valid source names and a
// safe retention for each (see Retention.Validate).
func (c *Config) Validate() error {
	if c.Table == "" {
		return &InvalidError{Field: "table", Reason: "is empty"}
	}
	if len(c.Sources) == 0 {
		return &InvalidError{Field: "sources", Reason: "is empty; configure at least one source"}
	}
	for name, r := range c.Sources {
		if err := validName("sources."+name, name, MaxSourceLen); err != nil {
			return err
		}
		if err := r.Validate(name); err != nil {
			return err
		}
	}
	if c.ConflictRetries < 0 || c.ConflictRetries > MaxConflictRetries {
		return &InvalidError{Field: "conflict_retries", Reason: fmt.Sprintf("must be between 0 (default 3) and %d", MaxConflictRetries)}
	}
	if c.ConflictBackoff < 0 || c.ConflictBackoff > time.Second {
		return &InvalidError{Field: "conflict_backoff", Reason: "must be between 0 (default 20ms) and 1s"}
	}
	for name, k := range c.Tables {
		switch {
		case name == "" || len(name) > 255:
			return &InvalidError{Field: "tables", Reason: fmt.Sprintf("%q is not a table name", name)}
		case tableName(name) == tableName(c.Table) || tableName(k.Name) == tableName(c.Table):
			return &InvalidError{Field: "tables." + name, Reason: "is the claims' own table: its effects need no Effect.In"}
		case k.PartitionKey == "":
			return &InvalidError{Field: "tables." + name + ".partition_key", Reason: "is empty"}
		case k.SortKey == k.PartitionKey:
			return &InvalidError{Field: "tables." + name + ".sort_key", Reason: "is the partition key"}
		}
	}
	if c.PendingShards < 1 || c.PendingShards > MaxPendingShards {
		return &InvalidError{Field: "pending_shards", Reason: fmt.Sprintf("must be between 1 and %d", MaxPendingShards)}
	}
	return nil
}

// Store commits deliveries: claim, effects and outbox in one write.
type Store struct {
	api      API
	cfg      Config  // with its defaults set; Sources a copy
	tablePtr *string // shared by every request: the SDK only reads it
	tables   map[string]otherTable
	nowVals  atomic.Pointer[nowValues]
}

// otherTable is a configured table of Config.Tables, with its name shared by every request.
type otherTable struct {
	TableKeys
	name *string
}

// tableName is a table's name, an ARN's (arn:aws:dynamodb:region:account:table/NAME) reduced
// to it: Config.Tables are of the claims' account and Region, so one name is one table.
func tableName(s string) string {
	if strings.HasPrefix(s, "arn:") {
		if i := strings.LastIndex(s, ":table/"); i >= 0 {
			return s[i+len(":table/"):]
		}
	}
	return s
}

// New validates cfg and returns a Store writing through api. A configuration that would let
// claims expire inside a provider's retry horizon or redrive window is refused here, so a
// function with such a configuration does not start.
func New(api API, cfg Config) (*Store, error) {
	if api == nil {
		return nil, errors.New("dedup: nil DynamoDB API")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tables := make(map[string]otherTable, len(cfg.Tables))
	for name, k := range cfg.Tables {
		tables[name] = otherTable{TableKeys: k, name: aws.String(cmp.Or(k.Name, name))}
	}
	cfg.Sources = maps.Clone(cfg.Sources)
	return &Store{api: api, cfg: cfg, tablePtr: aws.String(cfg.Table), tables: tables}, nil
}

// Table is the name of the table the Store writes to.
func (s *Store) Table() string { return s.cfg.Table }

// Retention returns the retention configured for source.
func (s *Store) Retention(source string) (Retention, bool) {
	r, ok := s.cfg.Sources[source]
	return r, ok
}

// Claimed answers ev from its claim, read consistently, as Commit would answer it when the
// claim holds the id (OutcomeDuplicate, the first delivery's id and time, PayloadMismatch;
// Calls 1); otherwise its Outcome is zero. It is the answer a receiver needs when it cannot
// plan or commit a delivery (a planner change, a payload the planner now refuses) and must
// still answer 200, as any duplicate, if the event was accepted before.
func (s *Store) Claimed(ctx context.Context, ev Event) (Result, error) {
	return s.answer(ctx, ev, true)
}

// ClaimedBatch is Claimed for a batch's events, their claims read together (GetClaims: 100 to
// a consistent BatchGetItem, of what Claimed reads) instead of one GetItem each, with the calls
// it made. A receiver needs it when many events of a redelivered batch can no longer be planned:
// read one by one, a few hundred of them outlast the provider's timeout on every retry.
//
// The claims are read in the events' order, each once: on an error, results holds the answers
// of the events before the first whose claim was not read, all a receiver needs to refuse the
// batch at its first unclaimed event.
func (s *Store) ClaimedBatch(ctx context.Context, evs []Event) (results []Result, calls int, err error) {
	pks, seen := make([]string, len(evs)), map[string]bool{}
	var order []string // each claim once, in the order of the events that first name it
	for i, ev := range evs {
		if _, err := s.admit(&ev); err != nil {
			return nil, 0, &EventError{Index: i, Err: under(fmt.Sprintf("events[%d]", i), err)}
		}
		if pks[i] = ClaimKey(ev.Source, ev.ID); !seen[pks[i]] {
			seen[pks[i]], order = true, append(order, pks[i])
		}
	}
	read := map[string]map[string]types.AttributeValue{}               // by claim key; nil: no claim
	results, now, n := make([]Result, len(evs)), s.cfg.Now().Unix(), 0 // n: the events answered
	for chunk := range slices.Chunk(order, maxBatchGetKeys) {
		items, c, err := getClaims(ctx, s.api, s.cfg.Table, chunk, claimedRounds, probeProjection)
		calls += c
		switch {
		case errors.Is(err, ErrUnprocessed):
			return results[:n], calls, &UnavailableError{Reason: "throttled", RetryAfter: retryLater, Err: err}
		case err != nil:
			return results[:n], calls, classify("BatchGetItem", err)
		}
		for _, pk := range chunk {
			read[pk] = items[pk]
		}
		for ; n < len(evs); n++ {
			item, done := read[pks[n]]
			if !done {
				break
			}
			if holds(item, now) {
				results[n] = duplicate(item, payloadHash(evs[n].Payload), Result{})
			}
		}
	}
	return results, calls, nil
}

// claimedRounds bounds ClaimedBatch's calls per 100 keys while DynamoDB leaves keys unprocessed:
// past them the table is throttling, and the receiver's 503 asks the provider to come back.
const claimedRounds = 4

// Probe is Claimed read before any plan is made, eventually consistent and in one attempt:
// when its Outcome is zero, Commit decides: no claim seen, a claim past its expiry that TTL has
// not deleted yet (the condition admits a new claim over it), or a failed read (its error
// returned).
//
// The read is one eventually consistent GetItem of what the Result needs: half a read unit for
// a claim under 4 KB, where a duplicate's cancelled transaction costs two write units per item.
// A stale read can miss a claim just written, and Commit then answers it; it never shows one
// that no longer holds, since a claim's expiry never moves earlier and only TTL deletes a claim,
// so what it answers is what Commit would. Being only an optimisation, it is not retried and
// takes nothing from the client's retry quota, which the write may need.
func (s *Store) Probe(ctx context.Context, ev Event) (Result, error) { return s.answer(ctx, ev, false) }

func (s *Store) answer(ctx context.Context, ev Event, consistent bool) (Result, error) {
	if _, err := s.admit(&ev); err != nil {
		return Result{}, err
	}
	var opts []func(*dynamodb.Options)
	if !consistent {
		opts = oneAttempt
	}
	res := Result{Calls: 1}
	item, err := s.readClaim(ctx, ClaimKey(ev.Source, ev.ID), consistent, probeProjection, opts...)
	if err != nil || !holds(item, s.cfg.Now().Unix()) {
		return res, err
	}
	return duplicate(item, payloadHash(ev.Payload), res), nil
}

// oneAttempt makes a call once, taking nothing from the client's retry quota: the probe's
// read, an optimisation a write may need the quota more than.
var oneAttempt = []func(*dynamodb.Options){func(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} }}

// What Claimed and Probe read of a claim: what holds tests, and what a duplicate's Result says.
var probeProjection = aws.String(PartitionKey + ", " + TTLAttribute + ", " + attrPayloadSHA256 + ", " + attrDeliveryID + ", " + attrReceivedAt)

// readClaim reads the projection (nil: all) of the claim keyed pk: nil when there is none.
func (s *Store) readClaim(ctx context.Context, pk string, consistent bool, projection *string, opts ...func(*dynamodb.Options)) (map[string]types.AttributeValue, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            s.tablePtr,
		Key:                  ClaimItemKey(pk),
		ConsistentRead:       aws.Bool(consistent),
		ProjectionExpression: projection,
	}, opts...)
	if err != nil {
		return nil, classify("GetItem", err)
	}
	return out.Item, nil
}

// OutcomeBackfilled marks claims imported by Backfill: events processed before dedup was
// switched on.
const OutcomeBackfilled = "backfilled"

// Backfill claims an event that was processed before oncehook guarded it (the design card's
// reconciliation pass), so its redeliveries become duplicates. processedAt is when it was
// processed; the claim expires a retention after that, as if it had been received then. It
// writes no effects and no intents, and leaves an existing unexpired claim alone: it reports
// whether it wrote one.
func (s *Store) Backfill(ctx context.Context, source, eventID string, processedAt time.Time) (bool, error) {
	ev := Event{Source: source, ID: eventID, Type: OutcomeBackfilled}
	keep, err := s.admit(&ev)
	if err != nil {
		return false, err
	}
	expires := processedAt.Add(keep)
	now := s.cfg.Now()
	if !expires.After(now) {
		return false, nil // its retention has passed: a claim would already count as expired
	}
	req := &request{nowVals: s.nowValues(now), claim: map[string]types.AttributeValue{
		PartitionKey:    str(ClaimKey(source, eventID)),
		SortKey:         str(ClaimSK),
		attrSource:      str(source),
		attrEventID:     str(eventID),
		attrEventType:   str(OutcomeBackfilled),
		attrReceivedAt:  str(processedAt.UTC().Format(time.RFC3339Nano)),
		TTLAttribute:    num(expires.Unix()),
		attrOutcome:     str(OutcomeBackfilled),
		attrCommitToken: str(commitToken(&ev, now, rand.Uint64())),
	}}
	// Commit's own PutItem: a claim that holds is left alone (a duplicate), and our own write,
	// sent again after a lost response, is told by its commit token (accepted).
	res, err := s.put(ctx, req)
	return res.Outcome == OutcomeAccepted, err
}
