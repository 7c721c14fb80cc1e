// Package e2e tests the deployed stack end to end: signed POSTs to the API Gateway URL ->
// receiver Lambda -> table -> stream -> outbox Lambda -> a downstream HTTP server run by the
// test on 127.0.0.1:8025 (the "email" target of localstack/sources.local.json).
//
// `make test` deploys the stack to the emulator first (localstack/deploy) and sets
// ONCEHOOK_URL and TABLE_NAME; without them these tests skip, unless ONCEHOOK_E2E=required.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/webhook"
)

// demoSecret is the local stack's signing secret (localstack/stack puts it in Secrets Manager).
const demoSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

type stack struct {
	url, table string
	db         *dynamodb.Client
	down       *downstream
	scheme     webhook.Scheme
	client     *http.Client
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
	sharedOnce.Do(func() {
		var d *downstream
		d, sharedErr = startDownstream("127.0.0.1:8025")
		scheme, _ := webhook.New("standard-webhooks", webhook.Options{})
		shared = &stack{url: url, table: table, down: d, scheme: scheme,
			client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	})
	if sharedErr != nil {
		t.Fatalf("downstream on 127.0.0.1:8025 (is `make run` running?): %v", sharedErr)
	}
	shared.db = awstest.Client(t)
	return shared
}

// downstream applies each Idempotency-Key's effect once, like a real email or payment API.
type downstream struct {
	mu      sync.Mutex
	calls   map[string]int
	applied map[string]int
}

func startDownstream(addr string) (*downstream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	d := &downstream{calls: map[string]int{}, applied: map[string]int{}}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		io.Copy(io.Discard, r.Body)
		d.mu.Lock()
		d.calls[key]++
		if d.applied[key] == 0 {
			d.applied[key] = 1
		}
		d.mu.Unlock()
		w.Write([]byte(`{"ok":true}`))
	}))
	return d, nil
}

func (d *downstream) appliedWith(prefix string) (keys, calls int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, n := range d.calls {
		if strings.HasPrefix(k, prefix) {
			keys++
			calls += n
		}
	}
	return keys, calls
}

// post sends one signed delivery and returns the status and whether it was a duplicate.
func (s *stack) post(t *testing.T, id, body string, sign bool) (int, bool) {
	req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if sign {
		if err := s.scheme.Sign(req.Header, []byte(body), demoSecret, id, time.Now()); err != nil {
			t.Fatal(err)
		}
	} else {
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", fmt.Sprint(time.Now().Unix()))
		req.Header.Set("webhook-signature", "v1,Zm9yZ2VkIHNpZ25hdHVyZSBmb3JnZWQgc2lnbmF0dXJlIQ==")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", id, err)
		return 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, bytes.Contains(b, []byte(`"duplicate":true`))
}

func order(run, i int) (id, body string) {
	id = fmt.Sprintf("msg_e2e_%d_%05d", run, i)
	return id, fmt.Sprintf(`{"type":"order.paid","data":{"order_id":"ord_%d_%05d","customer_email":"c%d@example.com"}}`, run, i, i)
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

// send posts each (id, body) copies times with bounded concurrency and counts the answers.
func (s *stack) send(t *testing.T, ids []int, run, copies, workers int) (fresh, dups int64) {
	var f, d atomic.Int64
	work := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				id, body := order(run, i)
				status, dup := s.post(t, id, body, true)
				if status != 200 {
					t.Errorf("%s: status %d", id, status)
				} else if dup {
					d.Add(1)
				} else {
					f.Add(1)
				}
			}
		}()
	}
	for _, i := range ids {
		for range copies {
			work <- i
		}
	}
	close(work)
	wg.Wait()
	return f.Load(), d.Load()
}

func TestConcurrentDoublesThroughTheDeployedStack(t *testing.T) {
	s := deployed(t)
	const events, copies = 200, 4
	run := int(time.Now().Unix() % 100000)
	ids := make([]int, events)
	for i := range ids {
		ids[i] = i
	}
	// Copies of one event are sent back to back by different workers: concurrent doubles.
	fresh, dups := s.send(t, ids, run, copies, 16)
	if fresh != events || dups != events*(copies-1) {
		t.Fatalf("%d accepted and %d duplicates, want %d and %d", fresh, dups, events, events*(copies-1))
	}
	prefix := fmt.Sprintf("ORDER#ord_%d_", run)
	if n := s.count(t, prefix); n != events {
		t.Fatalf("%d shipments, want %d", n, events)
	}
	keyPrefix := fmt.Sprintf("shop:msg_e2e_%d_", run)
	eventually(t, "one downstream call per event", func() (bool, string) {
		keys, calls := s.down.appliedWith(keyPrefix)
		return keys == events && calls == events, fmt.Sprintf("%d keys / %d calls", keys, calls)
	})
}

func TestARedriveOfSeenAndUnseenEventsThroughTheDeployedStack(t *testing.T) {
	s := deployed(t)
	const events = 1000
	run := int(time.Now().Unix()%100000) + 100000
	var seen, all []int
	for i := range events {
		if i%2 == 0 {
			seen = append(seen, i)
		}
		all = append(all, i)
	}
	if fresh, dups := s.send(t, seen, run, 1, 16); fresh != events/2 || dups != 0 {
		t.Fatalf("before the outage: %d accepted, %d duplicates", fresh, dups)
	}
	fresh, dups := s.send(t, all, run, 1, 16)
	if fresh != events/2 || dups != events/2 {
		t.Fatalf("redrive: %d accepted, %d duplicates; want %d and %d", fresh, dups, events/2, events/2)
	}
	if n := s.count(t, fmt.Sprintf("ORDER#ord_%d_", run)); n != events {
		t.Fatalf("%d shipments, want %d", n, events)
	}
	keyPrefix := fmt.Sprintf("shop:msg_e2e_%d_", run)
	eventually(t, "one downstream call per event", func() (bool, string) {
		keys, calls := s.down.appliedWith(keyPrefix)
		return keys == events && calls == events, fmt.Sprintf("%d keys / %d calls", keys, calls)
	})
}

func TestForgedDeliveriesWriteNothing(t *testing.T) {
	s := deployed(t)
	run := int(time.Now().Unix()%100000) + 200000
	for i := range 20 {
		id, body := order(run, i)
		if status, _ := s.post(t, id, body, false); status != 401 {
			t.Fatalf("forged %s: status %d, want 401", id, status)
		}
	}
	if n := s.count(t, fmt.Sprintf("%sshop#msg_e2e_%d_", dedup.ClaimPrefix, run)); n != 0 {
		t.Fatalf("%d claims written by forged deliveries", n)
	}
}
