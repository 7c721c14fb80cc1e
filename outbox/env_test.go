package outbox_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
)

// downstream is a real local HTTP service with its own idempotency, as the design expects of
// every downstream: it applies an Idempotency-Key's effect once and answers repeats with the
// stored result. It can be told to fail.
type downstream struct {
	*httptest.Server
	mu      sync.Mutex
	calls   map[string]int // Idempotency-Key -> requests seen
	applied map[string]int // Idempotency-Key -> effects applied (must never exceed 1)
	total   int            // requests seen
	fail    func(n int, key string) (status int, delay time.Duration)
	spans   []callSpan // when each request was under way
}

// callSpan is when one request was under way at the downstream (the real clock).
type callSpan struct {
	key        string
	start, end time.Time
}

func newDownstream(t testing.TB) *downstream {
	d := &downstream{calls: map[string]int{}, applied: map[string]int{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		start := time.Now()
		defer func() {
			d.mu.Lock()
			d.spans = append(d.spans, callSpan{key, start, time.Now()})
			d.mu.Unlock()
		}()
		d.mu.Lock()
		d.total++
		n := d.total
		d.calls[key]++
		fail := d.fail
		done := d.applied[key] > 0
		d.mu.Unlock()
		if key == "" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "missing Idempotency-Key", http.StatusBadRequest)
			return
		}
		if done { // the downstream's own dedup: same key, same answer, no new effect
			w.WriteHeader(http.StatusOK)
			return
		}
		status, delay := 0, time.Duration(0)
		if fail != nil {
			status, delay = fail(n, key)
		}
		if status == 0 || status == http.StatusOK {
			// The effect happens before the (possibly slow) answer: a timeout after it is the
			// "lost done" case the idempotency key exists for.
			d.mu.Lock()
			d.applied[key]++
			d.mu.Unlock()
			status = http.StatusOK
		}
		if delay > 0 {
			time.Sleep(delay)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *downstream) snapshot() (calls, applied map[string]int, total int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	calls, applied = map[string]int{}, map[string]int{}
	for k, v := range d.calls {
		calls[k] = v
	}
	for k, v := range d.applied {
		applied[k] = v
	}
	return calls, applied, d.total
}

// env is a table with committed claims, a downstream, and a clock the test moves.
type env struct {
	t      testing.TB
	client *dynamodb.Client
	table  string
	store  *dedup.Store
	down   *downstream
	mu     sync.Mutex
	offset time.Duration
	jumps  []time.Time // when the clock was moved (the real clock)
}

func newEnv(t testing.TB) *env {
	t.Helper()
	client := awstest.Client(t)
	e := &env{t: t, client: client, table: awstest.Table(t, client), down: newDownstream(t)}
	store, err := dedup.New(client, dedup.Config{Table: e.table, Now: e.now,
		Sources: map[string]dedup.Retention{"shop": {RetryHorizon: 72 * time.Hour, RedriveWindow: 30 * 24 * time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	return e
}

func (e *env) now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Now().Add(e.offset)
}

func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	e.offset += d
	e.jumps = append(e.jumps, time.Now())
	e.mu.Unlock()
}

// worker returns a worker over the env's table (through clientOpts, to inject faults) that
// sends both targets to the downstream.
func (e *env) worker(configure func(*outbox.Config), clientOpts ...func(*dynamodb.Options)) *outbox.Worker {
	e.t.Helper()
	client := e.client
	if len(clientOpts) > 0 {
		client = awstest.Client(e.t, clientOpts...)
	}
	exec := &outbox.HTTPExecutor{URL: e.down.URL, Timeout: 2 * time.Second}
	cfg := outbox.Config{
		Table:     e.table,
		Executors: map[string]outbox.Executor{"email": exec, "http:fulfilment": exec},
		Lease:     5 * time.Second,
		Margin:    500 * time.Millisecond,
		Now:       e.now,
		Backoff:   func(int) time.Duration { return 10 * time.Second },
	}
	if configure != nil {
		configure(&cfg)
	}
	w, err := outbox.New(client, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// commit commits n order events, each with two intents, and returns the intents' keys.
func (e *env) commit(n int) []string {
	e.t.Helper()
	var keys []string
	for i := range n {
		id := fmt.Sprintf("evt_%04d", i)
		_, err := e.store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)}, dedup.Plan{
			Intents: []dedup.Intent{
				{Name: "email.send", Target: "email", Payload: []byte(`{"template":"paid"}`)},
				{Name: "fulfilment.create", Target: "http:fulfilment", Payload: []byte(`{"order":"` + id + `"}`)},
			},
		})
		if err != nil {
			e.t.Fatal(err)
		}
		keys = append(keys, dedup.IdempotencyKey("shop", id, "email.send"), dedup.IdempotencyKey("shop", id, "fulfilment.create"))
	}
	return keys
}

// records reads the table's stream as Lambda would deliver it.
func (e *env) records() []events.DynamoDBEventRecord {
	return awstest.StreamRecords(e.t, e.client, e.table)
}

func batch(recs []events.DynamoDBEventRecord) events.DynamoDBEvent {
	return events.DynamoDBEvent{Records: recs}
}

// claims returns every claim as stored.
func (e *env) claims() []*dedup.Claim {
	var out []*dedup.Claim
	for _, it := range awstest.Items(e.t, e.client, e.table) {
		if sk, _ := it[dedup.SortKey].(*types.AttributeValueMemberS); sk == nil || sk.Value != dedup.ClaimSK {
			continue // effect records, the sweeper's lock, the targets' limit items
		}
		c, err := dedup.UnmarshalClaim(it)
		if err != nil {
			e.t.Fatal(err)
		}
		if strings.HasPrefix(c.PK, dedup.ClaimPrefix) && c.SK == dedup.ClaimSK {
			out = append(out, c)
		}
	}
	return out
}

// statuses counts intents by status.
func (e *env) statuses() map[string]int {
	m := map[string]int{}
	for _, c := range e.claims() {
		for _, in := range c.Intents {
			m[in.Status]++
		}
	}
	return m
}

// exactlyOnce fails unless every key was called exactly once downstream, and applied once.
func (e *env) exactlyOnce(keys []string) {
	e.t.Helper()
	e.appliedOnce(keys)
	calls, _, _ := e.down.snapshot()
	for _, k := range keys {
		if calls[k] != 1 {
			e.t.Fatalf("key %s called %d times downstream, want exactly 1", k, calls[k])
		}
	}
}

// appliedOnce fails unless every key's effect was applied exactly once downstream (it may have
// been called more often: after a failure, or a lost answer the downstream's dedup absorbed).
func (e *env) appliedOnce(keys []string) {
	e.t.Helper()
	_, applied, _ := e.down.snapshot()
	for _, k := range keys {
		if applied[k] != 1 {
			e.t.Fatalf("key %s applied %d times downstream, want exactly 1", k, applied[k])
		}
	}
	if len(applied) != len(keys) {
		e.t.Fatalf("%d keys applied downstream, want %d", len(applied), len(keys))
	}
}

// items returns every item as stored, by pk and sk.
func (e *env) items() map[string]map[string]types.AttributeValue {
	m := map[string]map[string]types.AttributeValue{}
	for _, it := range awstest.Items(e.t, e.client, e.table) {
		m[it["pk"].(*types.AttributeValueMemberS).Value+"/"+it["sk"].(*types.AttributeValueMemberS).Value] = it
	}
	return m
}

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK}}
}

func strp(s string) *string { return &s }

// vals builds expression values from name, value pairs (strings and ints).
func vals(kv ...any) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{}
	for i := 0; i < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case string:
			m[kv[i].(string)] = &types.AttributeValueMemberS{Value: v}
		case int:
			m[kv[i].(string)] = &types.AttributeValueMemberN{Value: strconv.Itoa(v)}
		}
	}
	return m
}

// readmittable is a store over the env's table whose claims expire after an hour (so a test can
// re-admit an event by moving the clock), and a commit of event id with one email intent.
func (e *env) readmittable(id string) (commit func()) {
	e.t.Helper()
	store, err := dedup.New(e.client, dedup.Config{Table: e.table, Now: e.now,
		Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour, Keep: time.Hour}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return func() {
		e.t.Helper()
		_, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "t", Payload: []byte(`{}`)},
			dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}})
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

// diesAfterTheCall is a client option under which every write recording an outcome fails, as
// if the function died between the downstream call and the record: with an error that no
// second try mends (a worker sends a write again after a failure that passes, a 5xx, while its
// lease lasts), so the worker stops trying at once, as a dead one would.
func diesAfterTheCall() func(*dynamodb.Options) {
	return awstest.WithTransport(&awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: -1, Status: 400,
		Body: `{"__type":"com.amazon.coral.validate#ValidationException","message":"injected: the worker died"}`, Match: "#st = :status"})
}

// redriveAt is an operator's redrive (dedup.Claims.Redrive) at now.
func redriveAt(ctx context.Context, api dedup.UpdateAPI, table string, c *dedup.Claim, intent string, now time.Time) error {
	return (&dedup.Claims{API: api, Table: table, Now: func() time.Time { return now }}).Redrive(ctx, c, intent)
}

// redriveByAt is an operator's redrive at now that records who re-drove it (dedup.Claims.RedriveBy).
func redriveByAt(ctx context.Context, api dedup.UpdateAPI, table string, c *dedup.Claim, intent string, now time.Time, by string) error {
	return (&dedup.Claims{API: api, Table: table, Now: func() time.Time { return now }}).RedriveBy(ctx, c, intent, by)
}
