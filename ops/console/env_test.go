package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/ops/console"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// testSources names a secret reference, a target URL and a header that must never appear on
// a page.
const testSources = `{
  "sources": {
    "shop": {"scheme": "standard-webhooks", "secrets": [{"secretsmanager": "console-test/SECRET-REF-shop"}], "retry_horizon": "72h", "redrive_window": "30d"},
    "gh": {"scheme": "github", "secrets": [{"env": "SECRET_ENV_GH"}], "retry_horizon": "72h", "redrive_window": "30d"}
  },
  "targets": {
    "email": {"url": "http://127.0.0.1:1/SECRET-URL-PATH", "headers": {"X-Api-Key": "SECRET-HEADER-VALUE"}},
    "crm": {"url": "http://127.0.0.1:1/crm"}
  }
}`

// neverRendered are the values of testSources no page may show.
var neverRendered = []string{"SECRET-REF", "SECRET_ENV", "SECRET-URL", "SECRET-HEADER"}

// downstream is a real HTTP server the outbox calls: it applies each Idempotency-Key once,
// refuses (422) the keys refuse names, until told otherwise, and answers 503 to the next
// unavailable[key] calls of a key.
type downstream struct {
	*httptest.Server
	mu          sync.Mutex
	applied     map[string]int
	calls       map[string]int
	refuse      map[string]bool
	unavailable map[string]int
}

func newDownstream(t *testing.T) *downstream {
	d := &downstream{applied: map[string]int{}, calls: map[string]int{}, refuse: map[string]bool{}, unavailable: map[string]int{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		d.mu.Lock()
		defer d.mu.Unlock()
		d.calls[key]++
		if d.unavailable[key] > 0 {
			d.unavailable[key]--
			http.Error(w, "warehouse busy", http.StatusServiceUnavailable)
			return
		}
		if d.refuse[key] {
			http.Error(w, "order unknown to the warehouse", http.StatusUnprocessableEntity)
			return
		}
		d.applied[key]++
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *downstream) setRefuse(key string, on bool) {
	d.mu.Lock()
	d.refuse[key] = on
	d.mu.Unlock()
}

func (d *downstream) setUnavailable(key string, calls int) {
	d.mu.Lock()
	d.unavailable[key] = calls
	d.mu.Unlock()
}

func (d *downstream) appliedCount(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applied[key]
}

type env struct {
	t      *testing.T
	client *dynamodb.Client
	table  string
	store  *dedup.Store
	file   *sources.File
	down   *downstream
	exec   outbox.Executor
	worker *outbox.Worker
}

func newEnv(t *testing.T) *env {
	t.Helper()
	client := awstest.Client(t)
	e := &env{t: t, client: client, table: awstest.Table(t, client), down: newDownstream(t)}
	f, err := sources.Parse([]byte(testSources))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	if e.store, err = dedup.New(client, dedup.Config{Table: e.table, Sources: f.Retentions()}); err != nil {
		t.Fatal(err)
	}
	// The executor's URL carries a path and a query as a webhook URL's secret would: errors
	// quote it, and no page may show more than its host.
	e.exec = &outbox.HTTPExecutor{URL: e.down.URL + "/hooks/SECRET-URL-PATH?token=SECRET-URL-QUERY", Timeout: 5 * time.Second}
	if e.worker, err = outbox.New(client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": e.exec, "crm": e.exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	return e
}

// at sets the env's store's clock to *now (e.commit commits then) and returns a turn of a
// worker on that clock, whose retries are due at once: histories written at chosen times.
func (e *env) at(now *time.Time) func(source, id string) {
	e.t.Helper()
	clock := func() time.Time { return *now }
	var err error
	if e.store, err = dedup.New(e.client, dedup.Config{Table: e.table, Sources: e.file.Retentions(), Now: clock}); err != nil {
		e.t.Fatal(err)
	}
	w, err := outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": e.exec, "crm": e.exec},
		Backoff: func(int) time.Duration { return 0 }, Now: clock})
	if err != nil {
		e.t.Fatal(err)
	}
	return func(source, id string) { // one turn of the claim's due intents, a minute later
		e.t.Helper()
		if _, err := w.Process(context.Background(), e.claim(source, id)); err != nil {
			e.t.Fatal(err)
		}
		*now = now.Add(time.Minute)
	}
}

// commit claims one event with a put effect and two intents (email, crm).
func (e *env) commit(source, id string, guard bool) {
	e.t.Helper()
	_, err := e.store.Commit(context.Background(), dedup.Event{Source: source, ID: id, Type: "order.paid", Payload: []byte(`{"order":"` + id + `"}`), GuardBody: guard},
		dedup.Plan{
			Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "ORDER#" + id}, "sk": &types.AttributeValueMemberS{Value: "PAID"},
				"total": &types.AttributeValueMemberS{Value: "PAYLOAD-VALUE-total-4200"}})},
			Intents: []dedup.Intent{
				{Name: "email.send", Target: "email", Payload: []byte(`{"to":"PAYLOAD-VALUE-ada@example.com"}`)},
				{Name: "crm.update", Target: "crm", Payload: []byte(`{"order":"PAYLOAD-VALUE-crm"}`)},
			},
		})
	if err != nil {
		e.t.Fatal(err)
	}
}

// drain runs the worker over the table's stream, as Lambda would.
func (e *env) drain() {
	e.t.Helper()
	if resp, err := e.worker.HandleStream(context.Background(), events.DynamoDBEvent{Records: awstest.StreamRecords(e.t, e.client, e.table)}); err != nil || len(resp.BatchItemFailures) != 0 {
		e.t.Fatalf("worker: %v %v", resp.BatchItemFailures, err)
	}
}

func (e *env) claim(source, id string) *dedup.Claim {
	e.t.Helper()
	c, err := dedup.GetClaim(context.Background(), e.client, e.table, source, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// testToken is the token of the consoles the tests sign in to.
const testToken = "9b2e6c1f0a7d4e8b3c5f9a1d2e7b6c04"

// serve starts the console over the env's table on a real loopback server: with testToken
// (unless configure sets another), and a browser signed in with it.
func (e *env) serve(configure func(*console.Config)) *browser {
	e.t.Helper()
	cfg := console.Config{DynamoDB: e.client, Table: e.table, Sources: e.file, Operator: "ada (test)", Token: testToken}
	if configure != nil {
		configure(&cfg)
	}
	h, err := console.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if cfg.Token != testToken {
		return newBrowser(e.t, serveHandler(e.t, h))
	}
	return signedIn(e.t, h)
}

// signedIn serves h (a console with testToken) and returns a browser signed in to it.
func signedIn(t *testing.T, h http.Handler) *browser {
	return newBrowser(t, serveHandler(t, h)).signIn()
}

// signIn signs b in with testToken by the sign-in link.
func (b *browser) signIn() *browser {
	b.t.Helper()
	if r := b.get("/login?token=" + testToken); r.Status != http.StatusSeeOther {
		b.t.Fatalf("signing in: %d", r.Status)
	}
	return b
}

// browser is an HTTP client that keeps cookies and does not follow redirects, like a person's
// browser seen one request at a time.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type response struct {
	Status int
	Header http.Header
	Body   string
}

func (b *browser) do(req *http.Request) response {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: string(body)}
}

func (b *browser) get(path string) response {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

func (b *browser) post(path string, form url.Values, header ...string) response {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf is the token of a page's forms.
func csrf(t *testing.T, page response) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page.Body)
	}
	return m[1]
}

var refField = regexp.MustCompile(`name="ref" value="([^"]+)"`)

// refs are the intent references of a page's redrive forms, unescaped as a browser would send
// them.
func refs(page response) []string {
	var out []string
	for _, m := range refField.FindAllStringSubmatch(page.Body, -1) {
		out = append(out, htmlUnescape(m[1]))
	}
	return out
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&#43;", "+", "&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">").Replace(s)
}

func mustContain(t *testing.T, r response, what ...string) {
	t.Helper()
	for _, w := range what {
		if !strings.Contains(r.Body, w) {
			t.Fatalf("page (%d) lacks %q:\n%s", r.Status, w, r.Body)
		}
	}
}

func mustNotContain(t *testing.T, r response, what ...string) {
	t.Helper()
	for _, w := range what {
		if strings.Contains(r.Body, w) {
			t.Fatalf("page (%d) shows %q:\n%s", r.Status, w, r.Body)
		}
	}
}

func key(source, id, intent string) string { return dedup.IdempotencyKey(source, id, intent) }

func serveHandler(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// park writes a claim of source whose one intent (email.send, to target) is parked with
// lastErr, as the outbox leaves it, entered in the parked index at at: many parked intents at
// chosen times without running the outbox for each.
func (e *env) park(source, id, target, lastErr string, at time.Time) {
	e.t.Helper()
	pk := dedup.ClaimKey(source, id)
	item, err := attributevalue.MarshalMap(dedup.Claim{PK: pk, SK: dedup.ClaimSK, Source: source, EventID: id, EventType: "order.paid",
		ReceivedAt: at.Add(-time.Minute), PayloadSHA256: "00", PayloadBytes: 2, ExpiresAt: time.Now().Add(24 * time.Hour).Unix(), CommitToken: "t-" + id,
		Outcome: "accepted", Intents: map[string]dedup.ClaimIntent{"email.send": {Target: target, Payload: []byte(`{}`), Status: dedup.IntentParked,
			Attempts: 1, LastError: lastErr, FinishedAt: at.UTC().Format(time.RFC3339Nano)}},
		PendingShard: dedup.ParkedShardFor(dedup.PendingShard(pk)), PendingSince: at.UnixMilli()})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item}); err != nil {
		e.t.Fatal(err)
	}
}
