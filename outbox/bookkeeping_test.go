package outbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// scriptedReporter answers each call with the next step (the last repeats).
type scriptedReporter struct {
	mu    sync.Mutex
	steps []func() (string, error)
	calls int
}

func (x *scriptedReporter) Execute(ctx context.Context, t outbox.Task) error {
	_, err := x.ExecuteReport(ctx, t)
	return err
}

func (x *scriptedReporter) ExecuteReport(context.Context, outbox.Task) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	step := x.steps[min(x.calls, len(x.steps)-1)]
	x.calls++
	return step()
}

// TestTheLargestClaimCommitAcceptsHasRoomForEveryBookkeepingWrite: the invariant is that no
// write the worker makes to a claim Commit accepted can take it over DynamoDB's 400 KB (a
// refused done would call the intent again after every lease expiry, a refused lease would
// strand it). The claim is the largest Commit accepts (one byte more is refused), and its
// intent goes through the longest bookkeeping there is: a permanent failure with a long error
// (parked), a redrive (attempts_base), retried failures with long errors until its history is
// full (dedup.HistoryLength entries), then done with a long report (sent, next to the last
// error). After every step the item, as stored, is measured.
func TestTheLargestClaimCommitAcceptsHasRoomForEveryBookkeepingWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	long := strings.Repeat("é", 600) // over the stored 512 bytes, cut on a rune boundary
	intent := func(n int) dedup.Intent {
		return dedup.Intent{Name: "email.send", Target: "email", Payload: []byte(`"` + strings.Repeat("p", n) + `"`)}
	}
	// The probe's commits share one instant: the claim's timestamps are numbers whose stored
	// size follows their digits (trailing zeros are not stored), so commits a millisecond
	// apart can differ by a byte, and "one byte over the largest" must mean one instant's.
	at := e.now()
	frozen, err := dedup.New(e.client, dedup.Config{Table: e.table, Now: func() time.Time { return at },
		Sources: map[string]dedup.Retention{"shop": {RetryHorizon: 72 * time.Hour, RedriveWindow: 30 * 24 * time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(id string, n int) error {
		_, err := frozen.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
			dedup.Plan{Intents: []dedup.Intent{intent(n)}})
		return err
	}
	// Commit's refusal says how far over the limit a payload is: the largest accepted is about
	// that much shorter (probed on the event itself: a refused Commit writes nothing). About:
	// the claim holds numbers whose stored size follows their digits, so the first estimate
	// can be a byte off; each refusal corrects it.
	var le *dedup.LimitError
	largest := dedup.MaxItemBytes
	for {
		err := commit("evt_bk_c", largest)
		if err == nil {
			break
		}
		if !errors.As(err, &le) || le.Got <= le.Max {
			t.Fatalf("a %d-byte payload: %v, want a *dedup.LimitError", largest, err)
		}
		largest -= le.Got - le.Max
	}
	// The same event id: its pending shard's number (1 or 2 digits, from the id) is part of
	// the claim's size. The size is checked before any write, claimed or not.
	if err := commit("evt_bk_c", largest+1); !errors.As(err, &le) {
		t.Fatalf("a payload one byte over the largest: %v, want refused", err)
	}

	x := &scriptedReporter{steps: []func() (string, error){func() (string, error) { return "", outbox.Permanent(errors.New(long)) }}}
	for range dedup.HistoryLength - 1 { // the budget's last failure would park
		x.steps = append(x.steps, func() (string, error) { return "", errors.New(long) })
	}
	x.steps = append(x.steps, func() (string, error) { return long, nil })
	w := e.worker(func(c *outbox.Config) { c.Executors["email"] = x })
	measure := func(step string, want string) {
		t.Helper()
		out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.table),
			Key: key(dedup.ClaimKey("shop", "evt_bk_c")), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if n := storedSize(out.Item); n > dedup.MaxItemBytes {
			t.Fatalf("after %s the claim is %d bytes, over DynamoDB's %d", step, n, dedup.MaxItemBytes)
		}
		if in := e.claim("evt_bk_c").Intents["email.send"]; in.Status != want {
			t.Fatalf("after %s: %+v, want %s", step, in, want)
		}
	}
	process := func(step, want string) {
		t.Helper()
		if _, err := w.Process(context.Background(), e.claim("evt_bk_c")); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		measure(step, want)
	}
	process("a permanent failure", dedup.IntentParked)
	if err := redriveAt(context.Background(), e.client, e.table, e.claim("evt_bk_c"), "email.send", e.now()); err != nil {
		t.Fatal(err)
	}
	measure("the redrive", dedup.IntentPending)
	for range dedup.HistoryLength - 1 {
		process("a retried failure", dedup.IntentPending)
		e.advance(time.Hour) // past the backoff
	}
	process("done with a long report", dedup.IntentDone)
	if in := e.claim("evt_bk_c").Intents["email.send"]; in.Sent == "" || in.LastError == "" || len(in.History) != dedup.HistoryLength {
		t.Fatalf("%+v: want both the report and the last error kept (the longest done), and a full history", in)
	}
}

// storedSize is an item's size by DynamoDB's documented rules (names plus values; 3 bytes and
// 1 per element for a map or list; a number 1 byte per two significant digits plus 1).
func storedSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + storedValueSize(v)
	}
	return n
}

func storedValueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		digits := strings.Trim(strings.Replace(strings.TrimLeft(v.Value, "+-"), ".", "", 1), "0")
		return (len(digits)+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + storedValueSize(e)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + storedValueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	default:
		return 1
	}
}
