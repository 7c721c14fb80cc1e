// Package e2e tests the deployed stack end to end: signed POSTs to the API Gateway URL ->
// receiver Lambda -> table -> stream -> outbox Lambda -> a downstream HTTP server run by the
// test on 127.0.0.1:8025 (the "email" target of localstack/sources.local.json, or DEMO_PORT).
//
// `make test` deploys the stack to the emulator first (localstack/deploy) and sets
// ONCEHOOK_URL and TABLE_NAME; without them these tests skip, unless ONCEHOOK_E2E=required.
package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/harness"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

// demoSecret is the local stack's signing secret (localstack/secrets.local.json, which localstack/deploy puts in Secrets Manager).
const demoSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

type stack struct {
	table  string
	db     *dynamodb.Client
	down   *harness.Downstream
	sender *harness.Sender
}

var (
	shared     *stack
	sharedOnce sync.Once
	sharedErr  error
)

func deployed(t *testing.T) *stack {
	t.Helper()
	url, table := os.Getenv("ONCEHOOK_URL"), os.Getenv("TABLE_NAME")
	if url == "" || table == "" {
		if os.Getenv("ONCEHOOK_E2E") == "required" {
			t.Fatal("ONCEHOOK_URL and TABLE_NAME are not set: localstack/deploy did not run")
		}
		t.Skip("no deployed stack: run `make test` (it deploys one to the emulator)")
	}
	addr := demoDownstream(t)
	sharedOnce.Do(func() {
		var d *harness.Downstream
		d, sharedErr = harness.StartDownstream(addr)
		scheme, _ := webhook.New("standard-webhooks", webhook.Options{})
		shared = &stack{table: table, down: d, sender: &harness.Sender{URL: url, Scheme: scheme, Secret: demoSecret,
			Client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}}
	})
	if sharedErr != nil {
		t.Fatalf("downstream on %s (is `make run` running?): %v", addr, sharedErr)
	}
	shared.db = awstest.Client(t)
	return shared
}

// demoDownstream is where the deployed sources file's email target calls (127.0.0.1:8025
// unless make run's DEMO_PORT moved it): the tests' downstream listens there.
func demoDownstream(t *testing.T) string {
	f, err := sources.Load(os.Getenv("ONCEHOOK_SOURCES_FILE"))
	if err != nil {
		t.Fatalf("the deployed sources file (ONCEHOOK_SOURCES_FILE): %v", err)
	}
	u, err := url.Parse(f.Targets["email"].URL)
	if err != nil || u.Host == "" {
		t.Fatalf("the deployed email target's URL %q: %v", f.Targets["email"].URL, err)
	}
	return u.Host
}

// count counts items whose pk starts with prefix.
func (s *stack) count(t *testing.T, prefix string) int {
	n := 0
	p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("begins_with(pk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix}}})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Items)
	}
	return n
}

// eventually polls cond for up to a minute: the outbox runs asynchronously, from the stream.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for range 120 {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: still %s after a minute", what, last)
}

func runID(offset int) string {
	return fmt.Sprintf("e2e%d", time.Now().UnixNano()/1e6%1e9+int64(offset))
}

func (s *stack) storm(t *testing.T, run string, events []int, copies int) *harness.StormReport {
	t.Helper()
	rep := harness.Storm(context.Background(), s.sender, harness.StormConfig{Run: run, Events: events, Copies: copies, Concurrency: 16})
	if rep.Errors > 0 || len(rep.Statuses) > 0 {
		t.Fatalf("storm: %d transport errors, statuses %v", rep.Errors, rep.Statuses)
	}
	t.Logf("%d deliveries in %s: %.0f/s, p50 %s, p99 %s", rep.Sent, rep.Elapsed.Round(time.Millisecond), rep.PerSecond(),
		rep.Latency(0.5).Round(time.Millisecond), rep.Latency(0.99).Round(time.Millisecond))
	return rep
}

// exactlyOnce waits until the downstream has seen each event's email key once, and only once.
func (s *stack) exactlyOnce(t *testing.T, run string, events int) {
	t.Helper()
	if n := s.count(t, "ORDER#ord_"+run+"_"); n != events {
		t.Fatalf("%d shipments, want %d", n, events)
	}
	eventually(t, "one downstream call per event", func() (bool, string) {
		keys, calls := s.down.Seen("shop:msg_" + run + "_")
		return keys == events && calls == events, fmt.Sprintf("%d keys / %d calls", keys, calls)
	})
}

func TestConcurrentDoublesThroughTheDeployedStack(t *testing.T) {
	s := deployed(t)
	const events, copies = 200, 4
	run := runID(0)
	all := make([]int, events)
	for i := range all {
		all[i] = i
	}
	rep := s.storm(t, run, all, copies)
	if rep.Accepted != events || rep.Duplicates != events*(copies-1) {
		t.Fatalf("%d accepted and %d duplicates, want %d and %d", rep.Accepted, rep.Duplicates, events, events*(copies-1))
	}
	s.exactlyOnce(t, run, events)
}

func TestARedriveOfSeenAndUnseenEventsThroughTheDeployedStack(t *testing.T) {
	s := deployed(t)
	const events = 1000
	run := runID(1)
	var seen, all []int
	for i := range events {
		if i%2 == 0 {
			seen = append(seen, i)
		}
		all = append(all, i)
	}
	if rep := s.storm(t, run, seen, 1); rep.Accepted != events/2 || rep.Duplicates != 0 {
		t.Fatalf("before the outage: %d accepted, %d duplicates", rep.Accepted, rep.Duplicates)
	}
	rep := s.storm(t, run, all, 1)
	if rep.Accepted != events/2 || rep.Duplicates != events/2 {
		t.Fatalf("redrive: %d accepted, %d duplicates; want %d and %d", rep.Accepted, rep.Duplicates, events/2, events/2)
	}
	s.exactlyOnce(t, run, events)
}

func TestForgedDeliveriesWriteNothing(t *testing.T) {
	s := deployed(t)
	run := runID(2)
	for i := range 20 {
		id, body := harness.Order(run, i)
		if status, _, err := s.sender.Send(context.Background(), id, body, true); err != nil || status != http.StatusUnauthorized {
			t.Fatalf("forged %s: %d %v, want 401", id, status, err)
		}
	}
	if n := s.count(t, dedup.ClaimKey("shop", "msg_"+run)); n != 0 {
		t.Fatalf("%d claims written by forged deliveries", n)
	}
}
