package outbox_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// stopping is a worker's table access whose writes fail once stopAfter says so, as if the
// worker's process had died: the worker made its call and could record nothing after it,
// neither the call's outcome nor the slot's give-back.
type stopping struct {
	outbox.API
	stopAfter func(in *dynamodb.UpdateItemInput) bool
}

func (s *stopping) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if s.stopAfter(in) {
		return nil, errors.New("injected: the worker's process stopped")
	}
	return s.API.UpdateItem(ctx, in, optFns...)
}

func numberOf(t *testing.T, v types.AttributeValue) int64 {
	t.Helper()
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("%v is not a number", v)
	}
	x, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Invariant (docs/outbox.md; outbox.Limit): "A worker that stops mid-call holds its slot until
// that lease ends, never longer." A worker with max_in_flight 1 makes its call and stops before
// recording it or giving its slot back. Once its lease (5 s, and the margin) has ended, the
// intent is due again and the slot must be free: another worker runs the intent. The slot was
// written to be held until the admission's whole wait budget (30 s) plus the lease had passed,
// so the stopped worker holds it half a minute longer than its lease.
func TestAStoppedWorkersSlotIsFreeOnceItsLeaseHasEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := newLimitedDownstream(t, 0)
	e.commitOne("evt_stopped")
	cfg := outbox.Config{Table: e.table, Now: e.now, Lease: 5 * time.Second, Margin: 500 * time.Millisecond,
		Backoff:   func(int) time.Duration { return 10 * time.Second },
		Executors: map[string]outbox.Executor{"email": &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}},
		Limits:    map[string]outbox.Limit{"email": {MaxInFlight: 1}}}
	dies, err := outbox.New(&stopping{API: e.client, stopAfter: func(in *dynamodb.UpdateItemInput) bool {
		x := aws.ToString(in.UpdateExpression)
		return strings.Contains(x, "#st = :status") || strings.HasPrefix(x, "REMOVE #holder")
	}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dies.Process(context.Background(), e.claim("evt_stopped")); err == nil {
		t.Fatal("the stopping worker recorded its call")
	}
	in := e.claim("evt_stopped").Intents["email.send"]
	if in.Status != dedup.IntentRunning || len(down.keys) != 1 {
		t.Fatalf("%+v, %d calls: want the call made and left running under its lease", in, len(down.keys))
	}
	slot := e.items()[outbox.LimitPK("email")+"/SLOT#0"]
	t.Logf("lease until %s, slot held until %s", time.UnixMilli(in.LeaseUntil).Format(time.StampMilli),
		time.UnixMilli(numberOf(t, slot["until"])).Format(time.StampMilli))

	// The stopped worker's lease ends, and a margin: the intent is due again, and its slot free.
	e.advance(cfg.Lease + cfg.Margin + time.Second)
	next, err := outbox.New(e.client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second+cfg.Margin+time.Second)
	defer cancel()
	sum, err := next.Process(ctx, e.claim("evt_stopped"))
	if err != nil || sum[outbox.OutcomeDone] != 1 {
		t.Fatalf("%v %v: want the intent run once the stopped worker's lease has ended (its slot is free then)", sum, err)
	}
}
