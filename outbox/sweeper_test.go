package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
)

// TestTwoSweepsNeverRunAtOnce, with a context without a deadline and with one: Lambda always
// gives a deadline, which sizes the lock's expiry.
func TestTwoSweepsNeverRunAtOnce(t *testing.T) {
	t.Parallel()
	t.Run("no deadline", func(t *testing.T) { twoSweeps(t, context.Background) })
	t.Run("a deadline", func(t *testing.T) {
		twoSweeps(t, func() context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			t.Cleanup(cancel)
			return ctx
		})
	})
}

func twoSweeps(t *testing.T, newCtx func() context.Context) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_lock")
	e.advance(5 * time.Minute)
	hold := newBlocking()
	first := &outbox.Sweeper{Worker: e.worker(func(c *outbox.Config) { c.Executors["email"] = hold })}
	done := make(chan outbox.Summary)
	go func() {
		rep, err := first.Run(newCtx())
		if err != nil {
			t.Error(err)
		}
		done <- rep.Summary
	}()
	hold.await(t, done)
	var m countingMetrics
	second := &outbox.Sweeper{Worker: e.worker(func(c *outbox.Config) { c.Metrics = &m })}
	rep, err := second.Run(newCtx())
	if err != nil || !rep.Skipped || rep.Claims != 0 || m.sweeps != 1 {
		t.Fatalf("second sweep while the first runs: %+v, %v, %d reports; want it skipped, and reported", rep, err, m.sweeps)
	}
	hold.release(nil)
	if sum := <-done; sum[outbox.OutcomeDone] != 1 {
		t.Fatalf("first sweep: %v", sum)
	}
	// The lock is released: the next run runs.
	if rep, err := second.Run(newCtx()); err != nil || rep.Skipped {
		t.Fatalf("a sweep after the first ended: %+v, %v", rep, err)
	}
}

func TestASweepStopsBeforeItsDeadlineAndStillReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 40 {
		e.commitOne(fmt.Sprintf("evt_deadline_sweep_%02d", i))
	}
	e.advance(5 * time.Minute)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
	}))
	defer slow.Close()
	var m countingMetrics
	s := &outbox.Sweeper{Concurrency: 2, Worker: e.worker(func(c *outbox.Config) {
		c.Margin = 100 * time.Millisecond
		c.Metrics = &m
		c.Executors["email"] = &outbox.HTTPExecutor{URL: slow.URL, Timeout: 300 * time.Millisecond}
	})}
	// Time for a few claims (each needs its 300 ms call budget and two margins left), not 40.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	rep, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := rep.Summary[outbox.OutcomeDone]
	if !rep.Incomplete || done == 0 || done == 40 || m.sweeps != 1 {
		t.Fatalf("%+v, %d reports: want an incomplete run that did some, and its report sent", rep, m.sweeps)
	}
	st := e.statuses()
	if st[dedup.IntentRunning] != 0 || st[dedup.IntentDone] != done || st[dedup.IntentPending] != 40-done {
		t.Fatalf("statuses %v after %d done: no lease may be left without time to finish it", st, done)
	}
	// The next run, with time, does the rest.
	if rep, err := s.Run(context.Background()); err != nil || rep.Summary[outbox.OutcomeDone] != 40-done || rep.Incomplete {
		t.Fatalf("second run: %+v, %v", rep, err)
	}
}

func TestASweepServesEveryShardInTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Claims spread over every due shard, several per shard.
	perShard := map[string]int{}
	committed := 0
	for i := 0; committed < 5*dedup.PendingShards; i++ {
		id := fmt.Sprintf("evt_shard_%03d", i)
		if shard := dedup.PendingShard(dedup.ClaimKey("shop", id)); perShard[shard] < 5 {
			perShard[shard]++
			committed++
			e.commitOne(id)
		}
	}
	e.advance(5 * time.Minute)
	var mu sync.Mutex
	var order []string // the shards in the order the downstream saw their claims
	calls := atomic.Int32{}
	w := e.worker(func(c *outbox.Config) {
		c.Executors["email"] = outbox.ExecutorFunc(func(_ context.Context, task outbox.Task) error {
			calls.Add(1)
			mu.Lock()
			order = append(order, dedup.PendingShard(dedup.ClaimKey(task.Source, task.EventID)))
			mu.Unlock()
			return nil
		})
	})
	if _, err := (&outbox.Sweeper{Worker: w, Concurrency: 1}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := map[string]bool{}
	for _, s := range order[:dedup.PendingShards] {
		first[s] = true
	}
	if len(first) != dedup.PendingShards {
		t.Fatalf("the first %d claims came from %d shards (%v): a run that stopped there would have starved the rest",
			dedup.PendingShards, len(first), order[:dedup.PendingShards])
	}
	if int(calls.Load()) != committed {
		t.Fatalf("%d claims run, want all %d", calls.Load(), committed)
	}
}

// BenchmarkSweep10kDueRetries: 10,000 claims whose intent failed once and is due again, a
// downstream that takes 200 ms per call, one sweeper run with 5 minutes (the function's
// timeout). It reports intents per second and the share of the backlog drained.
//
//	go test ./outbox -run '^$' -bench Sweep10k -benchtime 1x -timeout 30m   (emulator up)
func BenchmarkSweep10kDueRetries(b *testing.B) {
	const claims = 10_000
	e := newEnv(b)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				id := fmt.Sprintf("evt_bench_%05d", i)
				e.commitOne(id)
				// Its first attempt failed; the retry is due.
				_, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
					TableName: aws.String(e.table), Key: key(dedup.ClaimKey("shop", id)),
					UpdateExpression:          aws.String("SET intents.#n.attempts = :one, intents.#n.next_attempt_at = :due, intents.#n.last_error = :err REMOVE wake"),
					ExpressionAttributeNames:  map[string]string{"#n": "email.send"},
					ExpressionAttributeValues: vals(":one", 1, ":due", int(e.now().UnixMilli()), ":err", "POST: 503"),
				})
				if err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range claims {
		work <- i
	}
	close(work)
	wg.Wait()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
	}))
	defer slow.Close()
	e.advance(5 * time.Minute)
	for b.Loop() {
		s := &outbox.Sweeper{Concurrency: 128, Worker: e.worker(func(c *outbox.Config) {
			c.Executors["email"] = &outbox.HTTPExecutor{URL: slow.URL, Timeout: 2 * time.Second,
				Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
		})}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		start := time.Now()
		rep, err := s.Run(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		done := rep.Summary[outbox.OutcomeDone]
		b.ReportMetric(float64(done)/time.Since(start).Seconds(), "intents/s")
		b.ReportMetric(float64(done)/claims, "drained")
		b.Logf("%d claims: %d done in %s (incomplete %v, deferred %d, failures %d)", claims, done, time.Since(start).Round(time.Millisecond), rep.Incomplete, rep.Deferred, rep.Failures)
	}
}

// TestASweepRunsTheLeakAuditAndLogsWhatItFinds: with an Auditor, each sweep that has time
// left audits the next sample and reports and logs a record written outside a claim.
func TestASweepRunsTheLeakAuditAndLogsWhatItFinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "ORDER#rogue"}, "sk": &types.AttributeValueMemberS{Value: "ORDER"},
	}}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := &outbox.Sweeper{
		Worker: e.worker(func(c *outbox.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) }),
		Audit:  &dedup.Auditor{Client: e.client, Table: e.table, Prefixes: []string{"ORDER#"}},
	}
	rep, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Audit == nil || rep.Audit.WithoutClaimCount != 1 || rep.Audit.WithoutClaim[0].PK != "ORDER#rogue" {
		t.Fatalf("audit %+v, want the rogue order", rep.Audit)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"effect record without a claim`) || !strings.Contains(logs.String(), `"pk":"ORDER#rogue"`) {
		t.Fatalf("log %s: the leak was not logged with its key", logs.String())
	}
	// An application's own table audited as well: its leak joins the same report, with its table.
	app := awstest.CreateTable(t, e.client, "app-orders-", &dynamodb.CreateTableInput{BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("order_id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("order_id"), KeyType: types.KeyTypeHash}}})
	if _, err := e.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(app), Item: map[string]types.AttributeValue{
		"order_id": &types.AttributeValueMemberS{Value: "ord_rogue"}}}); err != nil {
		t.Fatal(err)
	}
	s.AuditTables = []*dedup.Auditor{{Client: e.client, Table: e.table, Audited: app, PartitionKey: "order_id"}}
	rep, err = s.Run(context.Background())
	if err != nil || rep.Audit == nil || rep.Audit.WithoutClaimCount != 2 || !strings.Contains(logs.String(), `"table":"`+app+`","pk":"ord_rogue"`) {
		t.Fatalf("%+v, %v: want both leaks, the application's named with its table", rep.Audit, err)
	}
	// Without an Auditor, no audit and no report of one.
	s.Audit, s.AuditTables = nil, nil
	if rep, err := s.Run(context.Background()); err != nil || rep.Audit != nil {
		t.Fatalf("%+v, %v", rep.Audit, err)
	}
}

// TestASweepWithoutTimeForASlowTargetHandsItsIntentToTheOutbox: the sweeper's run has time for
// the fast target's calls, not for the slow one's. The slow intent is not deferred to a next
// run that would be as short (stranded, if its stream record and wake-up were lost): it is
// handed to the outbox function through a wake-up due now, which runs it. The run also says,
// naming the target, that its timeout cannot run it.
func TestASweepWithoutTimeForASlowTargetHandsItsIntentToTheOutbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_sweep_fast")
	e.commitOne("evt_sweep_slow", dedup.Intent{Name: "report", Target: "slow", Payload: []byte(`{}`)})
	e.advance(5 * time.Minute)
	var mu sync.Mutex
	var woken []string
	var logs bytes.Buffer
	w := e.worker(func(c *outbox.Config) {
		c.Margin = 200 * time.Millisecond
		c.Executors["email"] = &outbox.HTTPExecutor{URL: e.down.URL, Timeout: 300 * time.Millisecond}
		c.Executors["slow"] = &outbox.HTTPExecutor{URL: e.down.URL, Timeout: 4 * time.Second}
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		c.Scheduler = schedulerFunc(func(_ context.Context, pk string, due time.Time) error {
			mu.Lock()
			defer mu.Unlock()
			woken = append(woken, pk)
			return nil
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second) // room for the fast call on a loaded machine, not for the slow one
	defer cancel()
	rep, err := (&outbox.Sweeper{Worker: w}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary[outbox.OutcomeDone] != 1 || rep.Deferred != 1 || rep.HandedOff != 1 {
		t.Fatalf("%+v: want the fast intent done, the slow one deferred and handed off", rep)
	}
	mu.Lock()
	handed := append([]string(nil), woken...)
	mu.Unlock()
	if len(handed) != 1 || handed[0] != dedup.ClaimKey("shop", "evt_sweep_slow") {
		t.Fatalf("wake-ups %v: want the slow claim's", handed)
	}
	if !strings.Contains(logs.String(), `cannot run target \"slow\"`) {
		t.Fatalf("log %s: want the run to name the target its timeout cannot run", logs.String())
	}
	// The outbox function takes the wake-up, with the time its timeout gives it.
	body := fmt.Sprintf(`{"pk":%q,"due":%d}`, handed[0], e.now().UnixMilli())
	if resp, err := w.HandleRetries(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: body}}}); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v, %v", resp, err)
	}
	if in := e.claim("evt_sweep_slow").Intents["report"]; in.Status != dedup.IntentDone || in.Attempts != 1 {
		t.Fatalf("%+v: want the slow intent done by the outbox", in)
	}
}

// The parked alarm's gauge (SweepReport.Parked, ParkedClaims) counts the claims under the
// parked shards. An intent that parks while another of its event is still open (a retry
// waiting on its backoff, a paused target) leaves its claim under its due shard, and is not
// counted: during a second target's long outage, or its maintenance, the first target's
// parked intents raise no alarm.
func TestTheParkedCountIncludesAnIntentParkedBesideAnOpenOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_beside",
		dedup.Intent{Name: "email.send", Target: "email", Payload: []byte(`{}`)},
		dedup.Intent{Name: "fulfilment.create", Target: "http:fulfilment", Payload: []byte(`{}`)})
	w := e.worker(func(c *outbox.Config) {
		c.Executors["email"] = outbox.ExecutorFunc(func(context.Context, outbox.Task) error {
			return outbox.Permanent(fmt.Errorf("http 422: recipient unknown"))
		})
		c.Executors["http:fulfilment"] = outbox.ExecutorFunc(func(context.Context, outbox.Task) error {
			return fmt.Errorf("http 503: warehouse busy")
		})
		c.Backoff = func(int) time.Duration { return time.Hour }
	})
	if _, err := w.Process(context.Background(), e.claim("evt_beside")); err != nil {
		t.Fatal(err)
	}
	if cl := e.claim("evt_beside"); cl.Intents["email.send"].Status != dedup.IntentParked || cl.Intents["fulfilment.create"].Status != dedup.IntentPending {
		t.Fatalf("setup: %+v, want email.send parked and fulfilment.create pending", cl.Intents)
	}
	rep, err := (&outbox.Sweeper{Worker: w}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Parked != 1 {
		t.Errorf("the sweep counts %d parked claims, want 1: email.send of evt_beside is parked", rep.Parked)
	}
}

// settleFails refuses the write that takes a claim out of the pending index (Claims.Settle),
// as a throttled or unreachable table does: the write before it has been made.
type settleFails struct{ dedup.UpdateAPI }

func (s settleFails) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if strings.HasPrefix(aws.ToString(in.UpdateExpression), "REMOVE "+dedup.IndexPartitionKey) {
		return nil, fmt.Errorf("ProvisionedThroughputExceededException: the table is throttling")
	}
	return s.UpdateAPI.UpdateItem(ctx, in, o...)
}

// A resolve that took the intent out of its status but left its claim under the parked
// shards (a second write, Settle, failed: a throttled table, a dropped connection) would keep
// the claim in the parked alarm's count until it expires: sending the resolve again finds the
// intent resolved already ("not parked any more"), and the sweeper counts the parked shards
// without reading them. A resolve is one write, its claim's place in the index with its
// status: the wrapper below, which refuses a separate settle, leaves nothing half done.
func TestAResolveWhoseSettleFailedLeavesTheParkedCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_resolved")
	w := e.worker(func(c *outbox.Config) {
		c.Executors["email"] = outbox.ExecutorFunc(func(context.Context, outbox.Task) error {
			return outbox.Permanent(fmt.Errorf("http 422: recipient unknown"))
		})
	})
	if _, err := w.Process(context.Background(), e.claim("evt_resolved")); err != nil {
		t.Fatal(err)
	}
	sweep := &outbox.Sweeper{Worker: w}
	if rep, err := sweep.Run(context.Background()); err != nil || rep.Parked != 1 {
		t.Fatalf("setup: %+v %v, want one parked claim", rep, err)
	}
	claims := &dedup.Claims{API: settleFails{e.client}, Table: e.table, Now: e.now}
	if err := claims.Resolve(context.Background(), e.claim("evt_resolved"), "email.send", "ada (test)", "sent by hand"); err != nil {
		t.Logf("the resolve: %v", err) // a resolve of two writes fails here, its first one made
	}
	// The operator sends the resolve again, as the failure says to.
	again := &dedup.Claims{API: e.client, Table: e.table, Now: e.now}
	if err := again.Resolve(context.Background(), e.claim("evt_resolved"), "email.send", "ada (test)", "sent by hand"); err != nil && !errors.Is(err, dedup.ErrNotParked) {
		t.Fatal(err)
	}
	if in := e.claim("evt_resolved").Intents["email.send"]; in.Status != dedup.IntentResolved {
		t.Fatalf("setup: %+v, want resolved", in)
	}
	e.advance(time.Hour)
	rep, err := sweep.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Parked != 0 {
		t.Errorf("after the resolve, its retry and a sweep, the sweep counts %d parked claims, want 0: nothing of evt_resolved is parked", rep.Parked)
	}
}
