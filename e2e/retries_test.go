package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/internal/harness"
)

// TestRetriesRunNearTheirDueTimeWithoutTheSweeper: 60 events, 30% of the downstream's calls
// failing, and the sweeper told to leave every claim of the run alone: every retry must come
// from its wake-up on the retry queue. For each retried call, its lateness is the time the
// downstream saw it minus the next_attempt_at the worker wrote for it (read from the claim
// while the attempt runs); p50 and p99 are logged, and a p99 of 30 s or more fails: a retry is
// the wake-up's to run near its due time, the 2-minute sweep is only the safety net.
func TestRetriesRunNearTheirDueTimeWithoutTheSweeper(t *testing.T) {
	s := deployed(t)
	ctx := context.Background()
	dep, err := harness.FindDeployment(ctx, lambda.NewFromConfig(awstest.Config(t)), s.table)
	if err != nil {
		t.Fatal(err)
	}
	restore, err := dep.SetEnv(ctx, map[string]map[string]string{"sweeper": {"SWEEP_MIN_AGE_SECONDS": "86400"}})
	t.Cleanup(func() {
		if err := restore(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	run := runID(4)
	prefix := "shop:msg_" + run + "_"
	var mu sync.Mutex
	var late []time.Duration
	s.down.OnCall(func(key string, _ http.Header) {
		if !strings.HasPrefix(key, prefix) {
			return
		}
		id := strings.TrimSuffix(strings.TrimPrefix(key, "shop:"), ":email.send")
		out, err := s.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: dedup.ClaimKey("shop", id)},
				"sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK},
			}})
		if err != nil || out.Item == nil {
			return
		}
		c, err := dedup.UnmarshalClaim(out.Item)
		if err != nil {
			return
		}
		if due := c.Intents["email.send"].NextAttemptAt; due > 0 {
			mu.Lock()
			late = append(late, time.Since(time.UnixMilli(due)))
			mu.Unlock()
		}
	})
	t.Cleanup(func() { s.down.OnCall(nil) })
	s.down.SetFaults(faults.Rates{Error: 0.3}, faults.NewDice(11).Float64)
	t.Cleanup(func() { s.down.SetFaults(faults.Rates{}, nil) })

	const events = 60
	all := make([]int, events)
	for i := range all {
		all[i] = i
	}
	s.storm(t, run, all, 1)
	unfinished, err := harness.WaitFinished(ctx, s.db, s.table, harness.ClaimPrefix("shop", run), 4*time.Minute, nil)
	if err != nil || unfinished > 0 {
		t.Fatalf("%d claims unfinished (%v): a retry was not woken", unfinished, err)
	}
	tally, err := harness.TallyClaims(ctx, s.db, s.table, harness.ClaimPrefix("shop", run))
	if err != nil {
		t.Fatal(err)
	}
	if tally.Intents[dedup.IntentDone] != events {
		t.Fatalf("intents %v, want all %d done", tally.Intents, events)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(late) == 0 {
		t.Fatal("no call was a retry: the downstream's faults are not in force")
	}
	slices.Sort(late)
	q := func(p float64) time.Duration { return late[min(int(p*float64(len(late))), len(late)-1)] }
	t.Logf("%d events, %d retried calls (attempts %d): lateness after next_attempt_at p50 %s, p99 %s, max %s",
		events, len(late), tally.Attempts, q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), late[len(late)-1].Round(time.Millisecond))
	if q(0.99) >= 30*time.Second {
		t.Errorf("a retried call's lateness after its due time: p99 %s, want under 30s (the sweep's 2 minutes, not the wake-up)", q(0.99).Round(time.Millisecond))
	}
}
