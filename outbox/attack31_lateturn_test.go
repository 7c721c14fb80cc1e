package outbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// slowWindows makes the first n writes to a rate window answer only after the window is over,
// as a throttled table's writes (the SDK's retries and backoff) do.
type slowWindows struct {
	outbox.API
	mu   sync.Mutex
	n    int
	slow time.Duration
}

func (s *slowWindows) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := s.API.UpdateItem(ctx, in, optFns...)
	if sk, ok := in.Key[dedup.SortKey].(*types.AttributeValueMemberS); ok && strings.HasPrefix(sk.Value, "RATE#") {
		s.mu.Lock()
		slow := s.n > 0
		s.n--
		s.mu.Unlock()
		if slow {
			time.Sleep(s.slow)
		}
	}
	return out, err
}

// Invariant (docs/outbox.md): a call its rate holds back after its lease waits "while the
// invocation has room for the call after the wait"; past that it is handed back (unlease),
// never spending an attempt and never parking. Here the window's writes outlast their windows
// (each turn forfeited and asked again): that loop never looks at the deadline, so the call
// goes out with less than its timeout left in the invocation, is cut short by the invocation's
// end, and the at-most-once intent parks as may-have-been-sent.
func TestACallWhoseRateTurnComesTooLateIsHandedBackNotCutShort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, 1900*time.Millisecond) // within its 2 s timeout
	e.commitOne("evt_late_turn")
	const rate = 4 // one call per 250 ms window
	cfg := outbox.Config{Table: e.table, Now: e.now, Lease: 5 * time.Second, Margin: 500 * time.Millisecond,
		Backoff:   func(int) time.Duration { return 10 * time.Second },
		Executors: map[string]outbox.Executor{"email": outbox.AtMostOnce(&outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second})},
		Limits:    map[string]outbox.Limit{"email": {Rate: rate}},
		Scheduler: schedulerFunc(func(context.Context, string, time.Time) error { return nil }),
	}
	w, err := outbox.New(&slowWindows{API: e.client, n: 3, slow: 300 * time.Millisecond}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// An invocation with room for the call and half a second to wait for its turn.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second+cfg.Margin+500*time.Millisecond)
	defer cancel()
	sum, err := w.Process(ctx, e.claim("evt_late_turn"))
	in := e.claim("evt_late_turn").Intents["email.send"]
	if in.Status == dedup.IntentParked || in.Spent() != 0 && in.Status != dedup.IntentDone {
		t.Fatalf("%v %v: %s after %d attempts (%s); want it handed back (pending, no attempt spent) or done",
			sum, err, in.Status, in.Spent(), in.LastError)
	}
}
