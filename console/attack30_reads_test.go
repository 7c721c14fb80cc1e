package console_test

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/console"
)

// throttledBatches is the table under throttling: every BatchGetItem leaves every key
// unprocessed, as DynamoDB does when the read capacity is spent.
type throttledBatches struct {
	*dynamodb.Client
	mu     sync.Mutex
	calls  int
	giveUp int // calls after which the test, not the console, ends the request
	cancel context.CancelFunc
}

func (s *throttledBatches) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls >= s.giveUp {
		s.cancel()
	}
	return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
}

// The console reads claims with BatchGetItem and asks again for the keys it leaves
// unprocessed, after a pause of at most half a second, for as long as the request lasts: a
// page opened while the table is throttled (an incident, when the console is opened) reads
// on, twice a second, spending the capacity the outbox needs, until the browser gives up
// (hookctl console's server bounds the write, not the handler). A page's reads are bounded in
// number: after a few rounds of unprocessed keys it says the table is throttled.
func TestAPageGivesUpOnAThrottledTableByItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_throttled", false)
	api := &throttledBatches{Client: e.client, giveUp: 20}
	h, err := console.New(console.Config{DynamoDB: api, Table: e.table, Sources: e.file})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api.cancel = cancel
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:8030/backlog", nil)
	req.RemoteAddr = "127.0.0.1:40000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.calls >= api.giveUp {
		t.Fatalf("the backlog page asked BatchGetItem %d times for one claim and was still asking when the request was ended (%d)", api.calls, rec.Code)
	}
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "throttling") {
		t.Errorf("the backlog page on a throttled table: %d, want 503 saying the table is throttling:\n%s", rec.Code, rec.Body.String())
	}
}

// MaxIndexReads (hookctl console -max-reads) is taken whatever its size, and given to each
// query as its Limit, an int32: past 2^31-1 it wraps (negative here) and every index page
// answers 502 ("DynamoDB did not answer", a ValidationException). A bound the console cannot
// apply is refused when the console is made.
func TestAMaxIndexReadsAQueryCannotCarryIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_1", false)
	for _, n := range []int{1 << 31, math.MaxInt} {
		h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, MaxIndexReads: n})
		if err != nil {
			continue // refused: what must hold
		}
		b := newBrowser(t, serveHandler(t, h))
		if r := b.get("/backlog"); r.Status != http.StatusOK {
			t.Errorf("MaxIndexReads %d taken, and the backlog answers %d", n, r.Status)
		}
	}
}
