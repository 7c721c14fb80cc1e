package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/webhook"
)

func hookctl(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// testTable makes a table on the test endpoint, and the environment hookctl's own AWS
// configuration reads (it loads the default chain, like the functions).
func testTable(t *testing.T) (*dynamodb.Client, string) {
	client := awstest.Client(t)
	t.Setenv("AWS_REGION", "us-east-1")
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		t.Setenv("AWS_ACCESS_KEY_ID", "test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	}
	return client, awstest.Table(t, client)
}

func TestInspectAndRedriveAParkedIntent(t *testing.T) {
	client, table := testTable(t)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_1", Type: "order.paid", DeliveryID: "dlv_1", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := hookctl(t, "", "inspect", "-table", table, "shop", "evt_1")
	if code != 0 || !strings.Contains(out, "EVT#shop#evt_1") || !strings.Contains(out, "email.send") || !strings.Contains(out, "pending") {
		t.Fatalf("inspect: %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := hookctl(t, "", "redrive", "-table", table, "shop", "evt_1"); code != 0 || !strings.Contains(out, "nothing parked") {
		t.Fatalf("redrive with nothing parked: %d %s", code, out)
	}
	if code, _, errOut := hookctl(t, "", "redrive", "-table", table, "shop", "evt_1", "email.send"); code != 1 || !strings.Contains(errOut, "not parked") {
		t.Fatalf("redrive of a pending intent: %d %s", code, errOut)
	}
	if code, _, errOut := hookctl(t, "", "resolve", "-table", table, "shop", "evt_1", "email.send", "sent", "by", "hand"); code != 1 || !strings.Contains(errOut, "not parked") {
		t.Fatalf("resolve of a pending intent: %d %s", code, errOut)
	}
	if code, _, errOut := hookctl(t, "", "inspect", "-table", table, "shop", "evt_nope"); code != 1 || !strings.Contains(errOut, "no claim") {
		t.Fatalf("inspect of a missing claim: %d %s", code, errOut)
	}
}

func TestParkedListsEveryParkedIntentWithItsError(t *testing.T) {
	client, table := testTable(t)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"evt_ok", "evt_refused"} {
		_, err = store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
			dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	w, err := outbox.New(client, outbox.Config{Table: table, Executors: map[string]outbox.Executor{
		"email": outbox.ExecutorFunc(func(_ context.Context, task outbox.Task) error {
			if task.EventID == "evt_refused" {
				return outbox.Permanent(errors.New("422 address rejected"))
			}
			return nil
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"evt_ok", "evt_refused"} {
		out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dedup.ClaimKey("shop", id)}, "sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK}}})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := dedup.UnmarshalClaim(out.Item)
		if _, err := w.Process(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := hookctl(t, "", "parked", "-table", table)
	if code != 0 || !strings.Contains(out, "evt_refused") || !strings.Contains(out, "422 address rejected") || strings.Contains(out, "evt_ok") || !strings.Contains(out, "1 parked intents") {
		t.Fatalf("parked: %d\n%s%s", code, out, errOut)
	}
	// Resolved with why: never run again, and out of the parked list.
	if code, out, errOut := hookctl(t, "", "resolve", "-table", table, "shop", "evt_refused", "email.send", "address", "fixed", "by", "hand"); code != 0 || !strings.Contains(out, "resolved email.send") {
		t.Fatalf("resolve: %d\n%s%s", code, out, errOut)
	}
	// Its history: the attempt parked with its error, then the resolve with who.
	code, out, errOut = hookctl(t, "", "inspect", "-table", table, "shop", "evt_refused")
	if code != 0 || !regexp.MustCompile(`#1 +parked +- +permanent: 422 address rejected`).MatchString(out) ||
		!regexp.MustCompile(`#1 +resolved +- +by \S+ \(hookctl resolve\)`).MatchString(out) {
		t.Fatalf("inspect after the resolve: %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := hookctl(t, "", "parked", "-table", table); code != 0 || strings.Contains(out, "evt_refused") {
		t.Fatalf("parked after the resolve: %d\n%s%s", code, out, errOut)
	}
}

// A source with '#' could name another source's claim ("shop#a" "b" is the key of "shop"
// "a#b"): inspect and redrive refuse it, naming the source, and touch nothing.
func TestAnEventNamedAcrossTheKeysSeparatorIsRefused(t *testing.T) {
	client, table := testTable(t)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "a#b", Type: "order.paid", Payload: []byte(`{}`)}, dedup.Plan{}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"inspect", "redrive"} {
		if code, out, errOut := hookctl(t, "", cmd, "-table", table, "shop#a", "b"); code != 1 || strings.Contains(out, "a#b") || !strings.Contains(errOut, "source") {
			t.Errorf("%s shop#a b: %d %q %q, want 1 naming the source", cmd, code, out, errOut)
		}
	}
}

// A shard count the pending index cannot have is refused, by flag or by PENDING_SHARDS: read
// as given, parked would list the shards it names and no other (none for 0), and report what
// it found there as every parked intent. The flag replaces the variable, and a command that
// reads no shard does not read it.
func TestAShardCountThePendingIndexCannotHaveIsRefused(t *testing.T) {
	_, table := testTable(t)
	for _, n := range []string{"0", "-1", "1025", "many", "16 "} {
		t.Setenv("PENDING_SHARDS", "")
		if code, out, errOut := hookctl(t, "", "parked", "-table", "t", "-pending-shards", n); code != 2 || !strings.Contains(errOut, "-pending-shards") || out != "" {
			t.Errorf("parked -pending-shards %q: %d %q %q, want 2 naming -pending-shards", n, code, out, errOut)
		}
		t.Setenv("PENDING_SHARDS", n)
		if code, out, errOut := hookctl(t, "", "parked", "-table", table); code == 0 || !strings.Contains(errOut, "PENDING_SHARDS") || out != "" {
			t.Errorf("PENDING_SHARDS=%q hookctl parked: %d %q %q, want a refusal naming PENDING_SHARDS", n, code, out, errOut)
		}
		if code, out, errOut := hookctl(t, "", "parked", "-table", table, "-pending-shards", "16"); code != 0 || !strings.Contains(out, "0 parked intents") {
			t.Errorf("PENDING_SHARDS=%q hookctl parked -pending-shards 16: %d %q %q, want the flag's count used", n, code, out, errOut)
		}
		if _, _, errOut := hookctl(t, "", "inspect", "-table", table, "shop", "evt_none"); strings.Contains(errOut, "PENDING_SHARDS") {
			t.Errorf("PENDING_SHARDS=%q hookctl inspect, which reads no shard: %q", n, errOut)
		}
	}
}

// A local stack deployed with more shards than the default: hookctl reads its count from the
// stack file deploy-local writes, and lists an intent parked past the 16th shard.
func TestParkedOfALocalStackReadsItsOwnShardCount(t *testing.T) {
	client, table := testTable(t)
	t.Setenv("PENDING_SHARDS", "")
	store, err := dedup.New(client, dedup.Config{Table: table, PendingShards: 32, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	id := ""
	for i := 0; id == ""; i++ { // an event in a shard past the 16th
		if dedup.DueShard(dedup.ClaimKey("shop", fmt.Sprint("evt_", i)), 32) == "P20" {
			id = fmt.Sprint("evt_", i)
		}
	}
	if _, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.New(client, outbox.Config{Table: table, PendingShards: 32, Executors: map[string]outbox.Executor{
		"email": outbox.ExecutorFunc(func(context.Context, outbox.Task) error { return outbox.Permanent(errors.New("422 refused")) })}})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := dedup.GetClaim(context.Background(), client, table, "shop", id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Process(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	k := &construct{stack: "Local", pendingShards: "32", tableName: table}
	path := filepath.Join(t.TempDir(), "stack.env")
	if err := writeStack(path, "a test's", k.stackVars(os.Getenv("AWS_ENDPOINT_URL"), "us-east-1")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := hookctl(t, "", "parked", "-stack", path); code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "1 parked intents") {
		t.Fatalf("parked -stack (a 32-shard stack): %d\n%s%s", code, out, errOut)
	}
}

// TestInspectShowsEachIntentsHistoryNewestFirst: under the intents, each one's attempts (a
// retry, the park) and the operator's resolve with who, newest first.
func TestInspectShowsEachIntentsHistoryNewestFirst(t *testing.T) {
	client, table := testTable(t)
	t.Setenv("USER", "ada")
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_h", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	w, err := outbox.New(client, outbox.Config{Table: table, Backoff: func(int) time.Duration { return 0 }, Executors: map[string]outbox.Executor{
		"email": outbox.ExecutorFunc(func(context.Context, outbox.Task) error {
			if calls++; calls == 1 {
				return errors.New("mail server busy")
			}
			return outbox.Permanent(errors.New("422 address rejected"))
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		cl, err := dedup.GetClaim(context.Background(), client, table, "shop", "evt_h")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Process(context.Background(), cl); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := hookctl(t, "", "resolve", "-table", table, "shop", "evt_h", "email.send", "address", "fixed", "by", "hand"); code != 0 {
		t.Fatalf("resolve: %d %s", code, errOut)
	}
	code, out, errOut := hookctl(t, "", "inspect", "-table", table, "shop", "evt_h")
	history := regexp.MustCompile(`(?m)^  \S+Z  #(\d)  (\w+)\s+(-)  (.*)$`).FindAllStringSubmatch(out, -1)
	var got []string
	for _, h := range history {
		got = append(got, strings.Join(h[1:], " "))
	}
	want := []string{"2 resolved - by ada (hookctl resolve)", "2 parked - permanent: 422 address rejected", "1 retry - mail server busy"}
	if code != 0 || !strings.Contains(out, "email.send, newest first:") || strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("inspect: %d, history %q, want %q\n%s%s", code, got, want, out, errOut)
	}
}

func TestCheckRetention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	short := filepath.Join(dir, "short.json")
	os.WriteFile(good, []byte(`{"sources":{"stripe":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d"}}}`), 0o600)
	os.WriteFile(short, []byte(`{"sources":{"stripe":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d","keep":"7d"}}}`), 0o600)
	if code, out, _ := hookctl(t, "", "check-retention", "-sources", good); code != 0 || !strings.Contains(out, "stripe  3d") || !strings.Contains(out, "47d") {
		t.Fatalf("good: %d\n%s", code, out)
	}
	if code, _, errOut := hookctl(t, "", "check-retention", "-sources", short); code != 1 || !strings.Contains(errOut, `"stripe"`) {
		t.Fatalf("short: %d %s", code, errOut)
	}
	if _, _, errOut := hookctl(t, "", "check-retention", "-sources", good); strings.Contains(errOut, "warning") {
		t.Fatalf("good: warned %s", errOut)
	}
	unset := filepath.Join(dir, "unset.json")
	os.WriteFile(unset, []byte(`{"sources":{"stripe":{"scheme":"stripe","secrets":[{"env":"S"}]}}}`), 0o600)
	if code, _, errOut := hookctl(t, "", "check-retention", "-sources", unset); code != 0 || !strings.Contains(errOut, "warning: sources.stripe.redrive_window: not set, so claims are kept 17d") {
		t.Fatalf("unset: %d %s", code, errOut)
	}
}

// TestACommandThatTakesNoArgumentsRefusesThem: an argument a command would ignore (audit's
// prefix given without -prefix, a source named to check-retention) is refused before the
// command does anything, not read as asking for what it does without it.
func TestACommandThatTakesNoArgumentsRefusesThem(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"stripe":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d"}}}`), 0o600)
	for _, args := range [][]string{
		{"parked", "-table", "t", "stripe"},
		{"check-retention", "-sources", file, "stripe"},
		{"audit", "-table", "t", "-prefix", "ORDER#", "ORDER#1"},
	} {
		args = append([]string{args[0], "-stack", "none"}, args[1:]...)
		if code, out, errOut := hookctl(t, "", args...); code != 1 || !strings.Contains(errOut, "hookctl "+args[0]+": takes no arguments") || out != "" {
			t.Errorf("%v: %d %q %q, want 1, takes no arguments", args, code, out, errOut)
		}
	}
}

func TestSendSignsLikeTheProvider(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	scheme, _ := webhook.New("standard-webhooks", webhook.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		if err := scheme.Verify(r.Header, body.Bytes(), []string{secret}, time.Now()); err != nil || r.Header.Get("Webhook-Id") != "msg_42" {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"received":true,"duplicate":false}`))
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"HOOKCTL_TEST_SECRET"}],"retry_horizon":"1d"}}}`), 0o600)
	os.Setenv("HOOKCTL_TEST_SECRET", secret)
	code, out, errOut := hookctl(t, `{"type":"order.paid"}`, "send", "-sources", file, "-id", "msg_42", "shop", srv.URL)
	if code != 0 || !strings.Contains(out, "200 OK") {
		t.Fatalf("send: %d %s %s", code, out, errOut)
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	if code, _, errOut := hookctl(t, ""); code != 2 || !strings.Contains(errOut, "check-retention") {
		t.Fatalf("%d %s", code, errOut)
	}
	for _, h := range []string{"-h", "--help", "help"} {
		if code, out, _ := hookctl(t, "", h); code != 0 || !strings.Contains(out, "parked") {
			t.Fatalf("%s: %d %s; want the usage on stdout and exit 0", h, code, out)
		}
	}
	if code, _, errOut := hookctl(t, "", "frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Fatalf("%d %s", code, errOut)
	}
}

func TestStormRequiresASourceAndAURL(t *testing.T) {
	t.Parallel()
	if code, _, errOut := hookctl(t, "", "storm", "-events", "3"); code != 1 || !strings.Contains(errOut, "want [flags] <source> [url]") {
		t.Fatalf("%d %s", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"S"}],"retry_horizon":"1d"}}}`), 0o600)
	if code, _, errOut := hookctl(t, "", "storm", "-stack", "none", "-sources", file, "-events", "3", "shop"); code != 1 || !strings.Contains(errOut, "want <url>") {
		t.Fatalf("no url and no local stack: %d %s", code, errOut)
	}
}

func TestBackfillThenAuditThenReplay(t *testing.T) {
	client, table := testTable(t)
	dir := t.TempDir()
	sourcesFile := filepath.Join(dir, "sources.json")
	os.WriteFile(sourcesFile, []byte(`{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"HOOKCTL_REPLAY_SECRET"}],"retry_horizon":"3d","redrive_window":"30d"}}}`), 0o600)
	t.Setenv("HOOKCTL_REPLAY_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")

	ids := filepath.Join(dir, "ids.txt")
	os.WriteFile(ids, []byte("# processed before oncehook\nevt_a\nevt_b\t"+time.Now().Add(-48*time.Hour).UTC().Format(time.RFC3339)+"\nevt_old\t2020-01-01T00:00:00Z\n"), 0o600)
	code, out, errOut := hookctl(t, "", "backfill", "-sources", sourcesFile, "-table", table, "shop", ids)
	if code != 0 || !strings.Contains(out, "backfilled 2 claims; 1 already claimed or past their retention") {
		t.Fatalf("backfill: %d %s %s", code, out, errOut)
	}
	if code, out, _ := hookctl(t, "", "backfill", "-sources", sourcesFile, "-table", table, "shop", ids); code != 0 || !strings.Contains(out, "backfilled 0 claims") {
		t.Fatalf("second backfill: %d %s", code, out)
	}

	// An effect written through a claim, and one written behind oncehook's back.
	store, _ := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	_, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_c", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "ORDER#1"}, "sk": &types.AttributeValueMemberS{Value: "SHIPMENT"}})}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "ORDER#2"}, "sk": &types.AttributeValueMemberS{Value: "SHIPMENT"}}})
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ = hookctl(t, "", "audit", "-table", table, "-prefix", "ORDER#")
	if code != 1 || !strings.Contains(out, "LEAK  ORDER#2") || strings.Contains(out, "ORDER#1:") || !strings.Contains(out, "sampled 2 effect records: 1 without a claim") {
		t.Fatalf("audit: %d\n%s", code, out)
	}
	for _, n := range []string{"0", "-1", "many"} { // a sample of nothing is refused, not read as none or as all
		if code, out, errOut := hookctl(t, "", "audit", "-table", table, "-sample", n); code != 2 || !strings.Contains(errOut, "-sample") || out != "" {
			t.Errorf("audit -sample %s: %d %q %q, want 2 naming -sample", n, code, out, errOut)
		}
	}

	// Replay: a receiver stand-in that dedups on webhook-id; every line twice, shuffled.
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		dup := seen[r.Header.Get("Webhook-Id")]
		seen[r.Header.Get("Webhook-Id")] = true
		mu.Unlock()
		fmt.Fprintf(w, `{"received":true,"duplicate":%t}`, dup)
	}))
	defer srv.Close()
	lines := filepath.Join(dir, "redrive.jsonl")
	os.WriteFile(lines, []byte(`{"id":"msg_1","body":{"type":"order.paid"}}`+"\n"+`{"id":"msg_2","body":{"type":"order.paid"}}`+"\n"), 0o600)
	code, out, errOut = hookctl(t, "", "replay", "-sources", sourcesFile, "-rate", "200", "-copies", "2", "-shuffle", "shop", srv.URL, lines)
	if code != 0 || !strings.Contains(out, "sent 4: accepted 2, duplicate 2") {
		t.Fatalf("replay: %d %s %s", code, out, errOut)
	}
}

// TestACountFlagRefusesWhatItCannotCount: a count of nothing (a replay's rate, copies, a
// storm's events, copies or concurrency, a cold start's runs, an audit's sample), or a rate over
// one delivery a nanosecond (time.Duration's resolution, no interval to pace by), is refused as
// a usage error naming the flag, before anything runs: not read as 1, a panic, or a run that
// waits for ever on no workers.
func TestACountFlagRefusesWhatItCannotCount(t *testing.T) {
	t.Setenv("S", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	dir := t.TempDir()
	file := filepath.Join(dir, "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"S"}],"retry_horizon":"1d"}}}`), 0o600)
	lines := filepath.Join(dir, "redrive.jsonl")
	os.WriteFile(lines, []byte(`{"id":"msg_1","body":{"type":"order.paid"}}`+"\n"), 0o600)
	bootstrap := filepath.Join(dir, "bootstrap")
	os.WriteFile(bootstrap, []byte("#!/bin/sh\nexit 1\n"), 0o700)
	replay := func(flag, v string) []string {
		return []string{"replay", "-stack", "none", "-sources", file, flag, v, "shop", "http://127.0.0.1:1/hooks/shop", lines}
	}
	storm := func(flag, v string) []string {
		return []string{"storm", "-stack", "none", "-sources", file, flag, v, "shop", "http://127.0.0.1:1/hooks/shop"}
	}
	coldstart := func(flag, v string) []string { return []string{"coldstart", bootstrap, "-throughput", "1", flag, v} }
	audit := func(flag, v string) []string {
		return []string{"audit", "-stack", "none", "-table", "t", "-prefix", "ORDER#", flag, v}
	}
	for _, c := range []struct {
		args   func(flag, v string) []string
		flag   string
		values []string
	}{
		{replay, "-rate", []string{"0", "-1", "1000000001", "many"}},
		{replay, "-copies", []string{"0", "-1"}},
		{storm, "-events", []string{"0", "-1"}},
		{storm, "-copies", []string{"0"}},
		{storm, "-concurrency", []string{"0", "-3"}},
		{coldstart, "-runs", []string{"0"}},
		{coldstart, "-copies", []string{"0"}},
		{coldstart, "-concurrency", []string{"0"}},
		{audit, "-sample", []string{"0", "-1"}},
	} {
		for _, v := range c.values {
			args := c.args(c.flag, v)
			code, out, errOut := hookctl(t, "", args...)
			if code != 2 || !strings.Contains(errOut, c.flag) || out != "" {
				t.Errorf("%s %s %s: %d %q %q, want 2 naming %s", args[0], c.flag, v, code, out, errOut, c.flag)
			}
		}
	}
}

func TestStormRefusesBadFaults(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-faults", "dynamodb.throtle=0.1"}, `-faults: "dynamodb.throtle": unknown field`},
		{[]string{"-faults", "downstream.error=0.1"}, "downstream faults need -downstream"},
		{[]string{"-table", "", "-faults", "dynamodb.error=0.1"}, "need -table"},
	} {
		args := append(append([]string{"storm"}, c.args...), "shop", "http://127.0.0.1:1/hooks/shop")
		if code, _, errOut := hookctl(t, "", args...); code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %s, want %q", c.args, code, errOut, c.want)
		}
	}
	t.Setenv("AWS_ENDPOINT_URL", "")
	if code, _, errOut := hookctl(t, "", "storm", "-table", "t", "-faults", "dynamodb.error=0.1", "shop", "http://127.0.0.1:1/"); code != 1 || !strings.Contains(errOut, "only on an emulator") {
		t.Errorf("faults without an emulator: %d %s", code, errOut)
	}
}

// TestInspectShowsWhatWasSentAndTheTargetsKind: a done intent's recorded message id, and its
// target's type and delivery from the sources file.
func TestInspectShowsWhatWasSentAndTheTargetsKind(t *testing.T) {
	client, table := testTable(t)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_s", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "fulfil", Target: "orders", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dedup.ClaimKey("shop", "evt_s")}, "sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK}},
		UpdateExpression:          aws.String("SET intents.fulfil.#st = :done, intents.fulfil.sent = :sent"),
		ExpressionAttributeNames:  map[string]string{"#st": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":done": &types.AttributeValueMemberS{Value: "done"}, ":sent": &types.AttributeValueMemberS{Value: "message 5fea7756-0ea4-451a-a703-a558b933e274"}},
	}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"1d"}},
	  "targets":{"orders":{"type":"sqs","arn":"arn:aws:sqs:us-east-1:000000000000:orders.fifo","delivery":"at-most-once"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := hookctl(t, "", "inspect", "-table", table, "-sources", file, "shop", "evt_s")
	if code != 0 || !strings.Contains(out, "orders (sqs, at-most-once)") || !strings.Contains(out, "message 5fea7756-0ea4-451a-a703-a558b933e274") {
		t.Fatalf("inspect: %d\n%s%s", code, out, errOut)
	}
}

// TestInspectNamesTheTraceOfAClaim: a claim committed under a span shows its trace id, to look
// the event's trace up by; one committed without shows no trace line.
func TestInspectNamesTheTraceOfAClaim(t *testing.T) {
	client, table := testTable(t)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	for id, ctx := range map[string]context.Context{"evt_traced": traced, "evt_plain": context.Background()} {
		if _, err := store.Commit(ctx, dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
			dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errOut := hookctl(t, "", "inspect", "-table", table, "shop", "evt_traced"); code != 0 || !strings.Contains(out, "trace           4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Fatalf("inspect: %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := hookctl(t, "", "inspect", "-table", table, "shop", "evt_plain"); code != 0 || strings.Contains(out, "trace ") {
		t.Fatalf("inspect: %d\n%s%s", code, out, errOut)
	}
}

// commitAndRun commits one event of source with intents (name -> target) and runs the outbox
// worker once over its claim with executors.
func commitAndRun(t *testing.T, client *dynamodb.Client, table, source, id string, intents map[string]string, executors map[string]outbox.Executor) {
	t.Helper()
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{source: {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	var plan dedup.Plan
	for name, target := range intents {
		plan.Intents = append(plan.Intents, dedup.Intent{Name: name, Target: target, Payload: []byte(`{}`)})
	}
	if _, err := store.Commit(context.Background(), dedup.Event{Source: source, ID: id, Type: "order.paid", Payload: []byte(`{}`)}, plan); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.New(client, outbox.Config{Table: table, Backoff: func(int) time.Duration { return 0 }, Executors: executors})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := dedup.GetClaim(context.Background(), client, table, source, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Process(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
}

// TestInspectAndParkedHideATargetsSecretsInItsErrors: the outbox records a target's error with
// its URL as configured (userinfo and path token), and a downstream may quote its path back.
// inspect and parked print them as the console shows them: with the sources file, every form of
// the target's secrets redacted; without one, every URL cut to its scheme and host.
func TestInspectAndParkedHideATargetsSecretsInItsErrors(t *testing.T) {
	client, table := testTable(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Cannot POST "+r.URL.Path, http.StatusUnprocessableEntity)
	}))
	defer srv.Close()
	const password, token = "hunter2pass", "XoXbSeCrEtT0k3n9f8e7"
	host := strings.TrimPrefix(srv.URL, "http://")
	target := "http://svc:" + password + "@" + host + "/services/T0/B0/" + token
	file := filepath.Join(t.TempDir(), "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"1d"}},
	  "targets":{"slack":{"url":"`+target+`"}}}`), 0o600)
	commitAndRun(t, client, table, "shop", "evt_secret", map[string]string{"notify": "slack"}, map[string]outbox.Executor{"slack": &outbox.HTTPExecutor{URL: target}})
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	for _, cmd := range [][]string{{"inspect", "shop", "evt_secret"}, {"parked"}} {
		for _, c := range []struct {
			sources string
			hidden  []string
		}{
			{file, []string{password, token, "/services/T0/B0"}},
			{"", []string{password, "@" + host, "http://" + host + "/services"}}, // the URL cut: the quoted path is no URL
		} {
			args := append([]string{cmd[0], "-stack", "none", "-table", table, "-sources", c.sources}, cmd[1:]...)
			code, out, errOut := hookctl(t, "", args...)
			if code != 0 || !strings.Contains(out, "422") || !strings.Contains(out, "http://"+host) {
				t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
			}
			for _, h := range c.hidden {
				if strings.Contains(out, h) {
					t.Errorf("%v printed %q:\n%s", args, h, out)
				}
			}
		}
	}
}

// TestStoredTextIsPrintedEscaped: text hookctl reads from the table (a downstream's reason
// phrase in an intent's error and history, an effect record's key, its claimed_by) is printed
// with every unprintable rune escaped: no escape sequence (a window title, a screen clear, an
// OSC 52 clipboard write) or newline (a fake row) reaches the terminal.
func TestStoredTextIsPrintedEscaped(t *testing.T) {
	client, table := testTable(t)
	const evil = "\x1b]0;owned\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4K\x07\u202e\tLEAK  fake"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if req, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
					req.Body.Close()
					fmt.Fprintf(conn, "HTTP/1.1 422 Unprocessable %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno", evil)
				}
			}()
		}
	}()
	commitAndRun(t, client, table, "shop", "evt_esc", map[string]string{"notify": "crm"},
		map[string]outbox.Executor{"crm": &outbox.HTTPExecutor{URL: "http://" + ln.Addr().String() + "/hook"}})
	for _, item := range []map[string]types.AttributeValue{
		{"pk": &types.AttributeValueMemberS{Value: "ORDER#1" + evil + "\nLEAK  ORDER#2"}, "sk": &types.AttributeValueMemberS{Value: "SHIPMENT"}},
		{"pk": &types.AttributeValueMemberS{Value: "ORDER#3"}, "sk": &types.AttributeValueMemberS{Value: "SHIPMENT"},
			dedup.ClaimedByAttribute: &types.AttributeValueMemberS{Value: "EVT#shop#gone" + evil}},
	} {
		if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args  []string
		lines int // stdout's, as many as the rows printed
	}{
		{[]string{"inspect", "-stack", "none", "-table", table, "shop", "evt_esc"}, 12},
		{[]string{"parked", "-stack", "none", "-table", table}, 3},
		{[]string{"audit", "-stack", "none", "-table", table, "-prefix", "ORDER#"}, 3},
	} {
		_, out, errOut := hookctl(t, "", c.args...)
		if strings.ContainsFunc(out+errOut, func(r rune) bool { return !unicode.IsPrint(r) && r != '\n' }) || strings.Count(out, "\n") != c.lines ||
			!strings.Contains(out, `\x1b]52;c;cm0gLXJmIH4K\a\u202e\tLEAK  fake`) {
			t.Errorf("hookctl %s wrote stored text raw, or not at all: %q %q", c.args[0], out, errOut)
		}
	}
}

// TestAuditJudgesOnlyTheRecordsOfItsPrefix: only a put effect stamps claimed_by, so audit judges
// only the records a -prefix names as put effects', never the claims' (EVT#): without -prefix,
// or with one that overlaps the claims, it is refused and reports no leak. An update effect
// (no claimed_by, written through its claim) is never reported.
func TestAuditJudgesOnlyTheRecordsOfItsPrefix(t *testing.T) {
	client, table := testTable(t)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "A"}}
	}
	up := expression.Add(expression.Name("orders"), expression.Value(1))
	if _, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_up", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Effects: []dedup.Effect{dedup.UpdateEffect(key("CUSTOMER#7"), up), dedup.PutEffect(key("ORDER#1"))}}); err != nil {
		t.Fatal(err)
	}
	for _, pk := range []string{"ORDER#2", "EVT#shop#forged"} { // written behind oncehook's back
		if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: key(pk)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		prefix []string
		code   int
		want   string
	}{
		{nil, 1, "-prefix"},
		{[]string{"-prefix", "EVT#"}, 1, "-prefix"},
		{[]string{"-prefix", "EVT#shop"}, 1, "-prefix"},
		{[]string{"-prefix", "E"}, 1, "-prefix"},
		{[]string{"-prefix", "ORDER#"}, 1, "sampled 2 effect records: 1 without a claim"},
		{[]string{"-prefix", "ORDER#1"}, 0, "sampled 1 effect records: 0 without a claim"},
	} {
		code, out, errOut := hookctl(t, "", append([]string{"audit", "-stack", "none", "-table", table}, c.prefix...)...)
		leaks := regexp.MustCompile(`(?m)^LEAK  (\S+):`).FindAllStringSubmatch(out, -1)
		if code != c.code || !strings.Contains(out+errOut, c.want) || len(leaks) > 1 || (len(leaks) == 1 && leaks[0][1] != "ORDER#2") {
			t.Errorf("audit %v: exit %d, want %d and %q\n%s%s", c.prefix, code, c.code, c.want, out, errOut)
		}
	}
}

// TestRedriveOfAnEventLeavesAMaybeSentAtMostOnceIntentParked: redrive <source> <event_id>
// re-drives the event's parked intents but one the outbox parked because its at-most-once call
// may have been sent (as the console never re-drives it with others): that one stays parked,
// named on stderr with the command that re-drives it, which does. With the sources file or
// without: the outbox's mark says so.
func TestRedriveOfAnEventLeavesAMaybeSentAtMostOnceIntentParked(t *testing.T) {
	client, table := testTable(t)
	executors := map[string]outbox.Executor{
		"smtp": outbox.AtMostOnce(outbox.ExecutorFunc(func(context.Context, outbox.Task) error { return errors.New("read tcp: connection reset by peer") })),
		"crm":  outbox.ExecutorFunc(func(context.Context, outbox.Task) error { return outbox.Permanent(errors.New("422 missing field")) }),
	}
	file := filepath.Join(t.TempDir(), "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"1d"}},
	  "targets":{"smtp":{"url":"http://127.0.0.1:1/smtp","delivery":"at-most-once"},"crm":{"url":"http://127.0.0.1:1/crm"}}}`), 0o600)
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	for i, sourcesFile := range []string{file, ""} {
		id := fmt.Sprint("evt_amo", i)
		commitAndRun(t, client, table, "shop", id, map[string]string{"email": "smtp", "sync": "crm"}, executors)
		status := func(name string) string {
			cl, err := dedup.GetClaim(context.Background(), client, table, "shop", id)
			if err != nil {
				t.Fatal(err)
			}
			return cl.Intents[name].Status
		}
		if status("email") != dedup.IntentParked || status("sync") != dedup.IntentParked {
			t.Fatal("setup: want both intents parked")
		}
		explicit := "hookctl redrive shop " + id + " email"
		code, out, errOut := hookctl(t, "", "redrive", "-stack", "none", "-table", table, "-sources", sourcesFile, "shop", id)
		if code != 0 || !strings.Contains(out, "re-drove sync") || strings.Contains(out, "email") || !strings.Contains(errOut, "email") ||
			!strings.Contains(errOut, explicit) || status("email") != dedup.IntentParked || status("sync") != dedup.IntentPending {
			t.Fatalf("-sources %q: redrive of the event: exit %d\n%s%s", sourcesFile, code, out, errOut)
		}
		if code, out, errOut := hookctl(t, "", "redrive", "-stack", "none", "-table", table, "-sources", sourcesFile, "shop", id); code != 0 || strings.Contains(out, "nothing parked") || !strings.Contains(errOut, explicit) {
			t.Fatalf("-sources %q: redrive again, the maybe-sent intent still parked: exit %d\n%s%s", sourcesFile, code, out, errOut)
		}
		if code, out, errOut := hookctl(t, "", "redrive", "-stack", "none", "-table", table, "shop", id, "email"); code != 0 || !strings.Contains(out, "re-drove email") || status("email") != dedup.IntentPending {
			t.Fatalf("-sources %q: %s: exit %d\n%s%s", sourcesFile, explicit, code, out, errOut)
		}
	}
}
