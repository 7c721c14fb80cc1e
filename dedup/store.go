package dedup

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// API is the part of the DynamoDB client a Store uses. *dynamodb.Client satisfies it, and so do
// the decorators tests and the load harness wrap around it (call counting, fault injection).
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
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
	// concurrent double is committing the same claim) is tried again. Default 3.
	ConflictRetries int
	// ConflictBackoff is the base of the jittered backoff between those tries. Default 20 ms.
	ConflictBackoff time.Duration
}

func (c *Config) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.ConflictRetries == 0 {
		c.ConflictRetries = 3
	}
	if c.ConflictBackoff == 0 {
		c.ConflictBackoff = 20 * time.Millisecond
	}
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
	if c.ConflictRetries < 0 {
		return &InvalidError{Field: "conflict_retries", Reason: "must not be negative"}
	}
	return nil
}

// Store commits deliveries: claim, effects and outbox in one write.
type Store struct {
	api      API
	table    string
	sources  map[string]Retention
	now      func() time.Time
	observer Observer
	retries  int
	backoff  time.Duration
}

// New validates cfg and returns a Store writing through api. A configuration that would let
// claims expire inside a provider's retry horizon or redrive window is refused here, so a
// function with such a configuration does not start.
func New(api API, cfg Config) (*Store, error) {
	if api == nil {
		return nil, fmt.Errorf("dedup: nil DynamoDB API")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sources := make(map[string]Retention, len(cfg.Sources))
	for k, v := range cfg.Sources {
		sources[k] = v
	}
	return &Store{
		api:      api,
		table:    cfg.Table,
		sources:  sources,
		now:      cfg.Now,
		observer: cfg.Observer,
		retries:  cfg.ConflictRetries,
		backoff:  cfg.ConflictBackoff,
	}, nil
}

// Table is the name of the table the Store writes to.
func (s *Store) Table() string { return s.table }

// Retention returns the retention configured for source.
func (s *Store) Retention(source string) (Retention, bool) {
	r, ok := s.sources[source]
	return r, ok
}
