package console_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/ops/console"
)

// scanCounter counts the index items the console's queries read (ScannedCount: what
// DynamoDB evaluates and bills, before a filter).
type scanCounter struct {
	*dynamodb.Client
	mu      sync.Mutex
	scanned int
	queries int
	keys    int // asked of BatchGetItem
}

func (s *scanCounter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	s.mu.Lock()
	for _, ka := range in.RequestItems {
		s.keys += len(ka.Keys)
	}
	s.mu.Unlock()
	return s.Client.BatchGetItem(ctx, in, optFns...)
}

func (s *scanCounter) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := s.Client.Query(ctx, in, optFns...)
	if err == nil {
		s.mu.Lock()
		s.scanned += int(out.ScannedCount)
		s.queries++
		s.mu.Unlock()
	}
	return out, err
}

// "At most -max-reads claims per page": the recent events of a source read the pending index
// with a filter on the source, and count only the keys that pass it, so a source with little in
// the index reads all of it, every shard to its end, whatever MaxIndexReads says. In an outage
// (a target down, the index holding every claim of the last hours) that is the page the
// operator opens, and it reads the whole index.
func TestTheRecentEventsOfASourceReadAtMostMaxIndexReadsOfTheIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const claims, maxReads = 120, 10
	for i := range claims {
		e.commit("shop", fmt.Sprintf("evt_busy_%03d", i), false) // all due: all in the index
	}
	counter := &scanCounter{Client: e.client}
	cfg := console.Config{DynamoDB: counter, Table: e.table, Sources: e.file, MaxIndexReads: maxReads, Token: testToken}
	h, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := signedIn(t, h)
	if r := b.get("/backlog"); r.Status != http.StatusOK {
		t.Fatalf("backlog: %d", r.Status)
	}
	counter.mu.Lock()
	backlog := counter.scanned
	counter.scanned, counter.queries = 0, 0
	counter.mu.Unlock()
	if backlog == 0 {
		t.Fatal("the emulator reports no ScannedCount: this test cannot measure")
	}

	r := b.get("/events?source=gh") // gh has nothing in the index
	if r.Status != http.StatusOK {
		t.Fatalf("recent events of gh: %d\n%s", r.Status, r.Body)
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if counter.scanned > 2*maxReads {
		t.Fatalf("the recent events of a source read %d index items in %d queries with MaxIndexReads %d (the backlog page read %d): the whole index, not a bounded page",
			counter.scanned, counter.queries, maxReads, backlog)
	}
}

// "A source alone lists its most recent claims": the recent events read the shards in order,
// newest first within each, and stop at MaxIndexReads, so the newest claims of a later shard
// are never read once an earlier shard holds MaxIndexReads of the source's claims.
func TestTheRecentEventsOfASourceIncludeItsNewestClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const maxReads = 10
	idIn := func(shard string, from int) (string, int) {
		for i := from; ; i++ {
			id := fmt.Sprintf("evt_recent_%d", i)
			if dedup.PendingShard(dedup.ClaimKey("shop", id)) == shard {
				return id, i + 1
			}
		}
	}
	next := 0
	for range 2 * maxReads {
		var id string
		id, next = idIn("P0", next)
		e.commit("shop", id, false)
	}
	newest, _ := idIn("P15", next)
	e.commit("shop", newest, false) // the newest claim of shop, in the last due shard
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, MaxIndexReads: maxReads, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	r := signedIn(t, h).get("/events?source=shop")
	if r.Status != http.StatusOK {
		t.Fatalf("%d\n%s", r.Status, r.Body)
	}
	if !strings.Contains(r.Body, ">"+newest+"<") {
		t.Fatalf("the most recent events of shop lack its newest claim %s", newest)
	}
}

// Every page that reads the pending index reads at most MaxIndexReads of its entries
// (ScannedCount: what DynamoDB evaluates and bills) and at most as many claims, however many
// the index holds: a query reads a shard's whole first page (up to 1 MB of keys) unless it is
// given a Limit.
func TestEveryIndexPageReadsAtMostMaxIndexReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const claims, maxReads = 120, 10
	for i := range claims {
		e.commit("shop", fmt.Sprintf("evt_many_%03d", i), false)
	}
	counter := &scanCounter{Client: e.client}
	h, err := console.New(console.Config{DynamoDB: counter, Table: e.table, Sources: e.file, MaxIndexReads: maxReads, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	b := signedIn(t, h)
	b.get("/audit") // the table check, once
	for _, p := range []string{"/", "/backlog", "/parked", "/parked?source=gh", "/parked?since=1h&error=x", "/events?source=shop", "/events?source=gh&since=1h"} {
		counter.mu.Lock()
		counter.scanned, counter.queries, counter.keys = 0, 0, 0
		counter.mu.Unlock()
		if r := b.get(p); r.Status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", p, r.Status, r.Body)
		}
		counter.mu.Lock()
		scanned, keys := counter.scanned, counter.keys
		counter.mu.Unlock()
		if scanned > maxReads || keys > maxReads {
			t.Errorf("%s read %d index entries and %d claims, with MaxIndexReads %d", p, scanned, keys, maxReads)
		}
	}
}

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
	h, err := console.New(console.Config{DynamoDB: api, Table: e.table, Sources: e.file, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api.cancel = cancel
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:8030/backlog", nil)
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("Authorization", "Bearer "+testToken)
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
		h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, MaxIndexReads: n, Token: testToken})
		if err != nil {
			continue // refused: what must hold
		}
		b := signedIn(t, h)
		if r := b.get("/backlog"); r.Status != http.StatusOK {
			t.Errorf("MaxIndexReads %d taken, and the backlog answers %d", n, r.Status)
		}
	}
}

// No unbounded read, the recent events: over random spreads of claims across the shards and sources
// and random bounds, the page reads at most MaxIndexReads entries, lists only the source's
// claims, newest first, and every claim of the source newer than what it says it is complete
// from (all of them, or the 50 newest, when it does not say it stopped).
func TestTheRecentEventsAreTheNewestWhateverTheShardsAndTheBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(26, 3))
	base := time.Now().Add(-48 * time.Hour)
	var at time.Time
	store, err := dedup.New(e.client, dedup.Config{Table: e.table, Now: func() time.Time { return at },
		Sources: map[string]dedup.Retention{"s0": {RetryHorizon: time.Hour}, "s1": {RetryHorizon: time.Hour}, "s2": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	var since map[string]time.Time // pk: when it entered the index, as the index says
	n := 0
	for trial := range 10 {
		// More claims, spread over the last two days, unevenly across the sources.
		for range rng.IntN(120) {
			src := fmt.Sprintf("s%d", min(rng.IntN(4), 2))
			at = base.Add(time.Duration(rng.Int64N(int64(48 * time.Hour))))
			id := fmt.Sprintf("evt_r_%05d", n)
			n++
			e.commit(src, id, false)
		}
		since = map[string]time.Time{}
		for _, item := range scanIndex(t, e.client, e.table) {
			ms, _ := strconv.ParseInt(item[dedup.IndexSortKey].(*types.AttributeValueMemberN).Value, 10, 64)
			since[item[dedup.PartitionKey].(*types.AttributeValueMemberS).Value] = time.UnixMilli(ms)
		}
		maxReads := 5 + rng.IntN(300)
		counter := &scanCounter{Client: e.client}
		h, err := console.New(console.Config{DynamoDB: counter, Table: e.table, MaxIndexReads: maxReads, Token: testToken})
		if err != nil {
			t.Fatal(err)
		}
		b := signedIn(t, h)
		b.get("/audit") // the table check
		src := fmt.Sprintf("s%d", rng.IntN(3))
		counter.mu.Lock()
		counter.scanned = 0
		counter.mu.Unlock()
		page := b.get("/events?source=" + src)
		counter.mu.Lock()
		scanned := counter.scanned
		counter.mu.Unlock()
		where := fmt.Sprintf("trial %d (%d claims, MaxIndexReads %d, %s)", trial, len(since), maxReads, src)
		if page.Status != http.StatusOK {
			t.Fatalf("%s: %d", where, page.Status)
		}
		if scanned > maxReads {
			t.Fatalf("%s: read %d index entries", where, scanned)
		}
		var listed []string
		for _, m := range regexp.MustCompile(`href="/events/(s\d)/([^"]+)"`).FindAllStringSubmatch(page.Body, -1) {
			if m[1] != src {
				t.Fatalf("%s: lists %s/%s", where, m[1], m[2])
			}
			listed = append(listed, dedup.ClaimKey(src, m[2]))
		}
		for i := 1; i < len(listed); i++ {
			if since[listed[i]].After(since[listed[i-1]]) {
				t.Fatalf("%s: %s listed after the older %s", where, listed[i], listed[i-1])
			}
		}
		from := time.Time{} // complete for the claims newer than this
		if m := regexp.MustCompile(`id="partial" data-cutoff="(\d*)"`).FindStringSubmatch(page.Body); m != nil {
			if m[1] == "" {
				continue // a shard not read at all: the page claims nothing
			}
			ms, _ := strconv.ParseInt(m[1], 10, 64)
			from = time.UnixMilli(ms)
		}
		if len(listed) == 50 {
			if oldest := since[listed[49]]; oldest.After(from) {
				from = oldest
			}
		}
		for pk, t0 := range since {
			if strings.HasPrefix(pk, dedup.ClaimKey(src, "")) && t0.After(from) && !slices.Contains(listed, pk) {
				t.Fatalf("%s: %s (entered %s) is newer than %s and not listed", where, pk, t0, from)
			}
		}
	}
}

// scanIndex is every entry of the pending index, read whole (the tests' ground truth).
func scanIndex(t *testing.T, client *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var out []map[string]types.AttributeValue
	due, parked := dedup.ShardNames(dedup.PendingShards)
	for _, shard := range append(due, parked...) {
		p := dynamodb.NewQueryPaginator(client, &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String(dedup.PendingIndex),
			KeyConditionExpression:    aws.String(dedup.IndexPartitionKey + " = :s"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: shard}}})
		for p.HasMorePages() {
			page, err := p.NextPage(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page.Items...)
		}
	}
	return out
}

// "Redrive what parked during the outage": the Parked page and a source's recent events take
// a time window (since=, or from= and to= in RFC 3339) and list newest first across the shards,
// and a filter is applied to what is read newest first, so old parked intents, however many,
// never hide a new one matching it under the read bound.
func TestTheParkedViewAndTheRecentEventsListTheNewestWithinAWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	for i := range 60 {
		e.park("shop", fmt.Sprintf("evt_old_%02d", i), "crm", "permanent: 422 unknown order", now.Add(-3*time.Hour+time.Duration(i)*time.Second))
	}
	for i := range 3 {
		e.park("shop", fmt.Sprintf("evt_outage_%d", i), "email", "permanent: 503 the mail relay is down", now.Add(-30*time.Minute+time.Duration(i)*time.Second))
	}
	e.park("gh", "evt_newest", "crm", "permanent: 422 unknown order", now.Add(-10*time.Minute))
	h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, MaxIndexReads: 40, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	b := signedIn(t, h)
	listed := func(p string) []string {
		t.Helper()
		r := b.get(p)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", p, r.Status, r.Body)
		}
		var ids []string
		for _, m := range regexp.MustCompile(`href="/events/[a-z]+/(evt_[a-z_0-9]+)"`).FindAllStringSubmatch(r.Body, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	outage := []string{"evt_outage_2", "evt_outage_1", "evt_outage_0"}
	if got := listed("/parked?error=503"); !slices.Equal(got, outage) {
		t.Errorf("/parked?error=503 lists %v, want the outage's %v, newest first", got, outage)
	}
	want := append([]string{"evt_newest"}, outage...)
	if got := listed("/parked?since=2h"); !slices.Equal(got, want) {
		t.Errorf("/parked?since=2h lists %v, want %v", got, want)
	}
	if got := listed("/parked?from=" + url.QueryEscape(now.Add(-time.Hour).Format(time.RFC3339)) + "&to=" + url.QueryEscape(now.Add(-15*time.Minute).Format(time.RFC3339))); !slices.Equal(got, outage) {
		t.Errorf("/parked from an hour ago to 15 minutes ago lists %v, want %v", got, outage)
	}
	if got := listed("/parked"); len(got) == 0 || got[0] != "evt_newest" {
		t.Errorf("/parked lists %v first, want the newest, evt_newest", got[:min(len(got), 3)])
	}
	if got := listed("/events?source=shop&since=2h"); !slices.Equal(got, outage) {
		t.Errorf("the recent events of shop since 2h: %v, want %v", got, outage)
	}
	for _, p := range []string{"/parked?since=yesterday", "/parked?from=2026-13-01T00:00:00Z", "/events?source=shop&since=-1h"} {
		if r := b.get(p); r.Status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", p, r.Status)
		}
	}
}

// "703 parked drawn as 498": every count the console shows is exact, or written "≥ N" when the
// read bound cut it: the Parked page's total, the overview's per-target counts and its charts.
func TestEveryCountIsExactOrSaysItIsALowerBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	for i := range 60 {
		e.park("shop", fmt.Sprintf("evt_p_%02d", i), "crm", "permanent: 422", now.Add(-time.Duration(i)*time.Minute))
	}
	total := regexp.MustCompile(`id="total">([^<]*)<`)
	for _, maxReads := range []int{40, 500} {
		h, err := console.New(console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, MaxIndexReads: maxReads, Token: testToken})
		if err != nil {
			t.Fatal(err)
		}
		b := signedIn(t, h)
		parked := b.get("/parked")
		m := total.FindStringSubmatch(parked.Body)
		overview := b.get("/")
		crm := regexp.MustCompile(`data-label="crm">.*?class="value"[^>]*>([^<]*)<`).FindStringSubmatch(overview.Body)
		if m == nil || crm == nil {
			t.Fatalf("MaxIndexReads %d: no total on the Parked page (%v) or no crm row in the overview (%v)\n%s", maxReads, m, crm, parked.Body)
		}
		if maxReads == 500 {
			if m[1] != "60" || crm[1] != "0 / 0 / 0 / 60" {
				t.Errorf("everything read: total %q, crm %q, want 60 and 0 / 0 / 0 / 60", m[1], crm[1])
			}
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(m[1], "≥ "))
		if !strings.HasPrefix(m[1], "≥ ") || err != nil || n > 60 || n < strings.Count(parked.Body, `class="parked-row`) {
			t.Errorf("MaxIndexReads 40 of 60 parked: the total reads %q, want ≥ N", m[1])
		}
		if !strings.Contains(crm[1], "≥") {
			t.Errorf("MaxIndexReads 40 of 60 parked: the overview draws crm as %q, want its counts marked at least", crm[1])
		}
	}
}
