package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"maps"
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
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/smithy-go"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/ops/console"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
	"github.com/oncehook/oncehook/sources"
)

// A target's token is often in its URL's path (a Slack or Discord webhook URL). The console
// shows a URL in an error by its scheme and host only, but a downstream that answers with the
// path it was called on (Express's "Cannot POST /path", many frameworks' 404s) puts the
// path, token and all, in last_error without a scheme, and the event and parked pages show it.
func TestAnErrorEchoingTheTargetsPathDoesNotShowIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Cannot POST "+r.URL.RequestURI(), http.StatusNotFound)
	}))
	t.Cleanup(echo.Close)
	target := echo.URL + "/hooks/SECRET-URL-PATH?token=SECRET-URL-QUERY"
	// The sources file names the URL the executor calls, as a deployment's does: a console
	// that knows it has all it needs to hide it.
	f, err := sources.Parse([]byte(strings.ReplaceAll(testSources, "http://127.0.0.1:1/SECRET-URL-PATH", target)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	exec := &outbox.HTTPExecutor{URL: target, Timeout: 5 * time.Second}
	w, err := outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }})
	if err != nil {
		t.Fatal(err)
	}
	e.worker = w
	e.commit("shop", "evt_echo", false)
	e.drain()
	if in := e.claim("shop", "evt_echo").Intents["email.send"]; in.Status != dedup.IntentParked || !strings.Contains(in.LastError, "SECRET-URL") {
		t.Fatalf("setup: %+v, want parked with the echoed path in last_error", in)
	}
	b := e.serve(nil)
	for _, p := range []string{"/events/shop/evt_echo", "/parked"} {
		r := b.get(p)
		mustContain(t, r, "evt_echo")
		mustNotContain(t, r, "SECRET-URL")
	}
}

// fakeTable is an oncehook table (described as dedup.CreateTableInput defines it) whose reads
// fail with an AWS error naming the operator's identity, as AccessDeniedException does.
type fakeTable struct{ console.API }

var errDenied = errors.New("operation error DynamoDB: GetItem, https response error StatusCode: 400, RequestID: R1, " +
	"api error AccessDeniedException: User: arn:aws:iam::123456789012:user/SECRET-IAM-USER is not authorized to perform: dynamodb:GetItem")

func (fakeTable) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	def := dedup.CreateTableInput(aws.ToString(in.TableName))
	var indexes []types.GlobalSecondaryIndexDescription
	for _, g := range def.GlobalSecondaryIndexes {
		indexes = append(indexes, types.GlobalSecondaryIndexDescription{IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection})
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableName: def.TableName,
		AttributeDefinitions: def.AttributeDefinitions, KeySchema: def.KeySchema, GlobalSecondaryIndexes: indexes}}, nil
}

func (fakeTable) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, errDenied
}

func (fakeTable) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return nil, errDenied
}

// docs/console.md: "an AWS error (502, the details in the log)", and awsFail's comment: "the
// operator sees what failed, the log the error itself". The page shows the error itself: the
// account, the IAM identity and the request id reach whoever can load a page.
func TestAnAWSErrorsDetailsGoToTheLogNotThePage(t *testing.T) {
	t.Parallel()
	h, err := console.New(console.Config{DynamoDB: fakeTable{}, Table: "t", Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	b := signedIn(t, h)
	for _, p := range []string{"/events/shop/evt_x", "/parked", "/backlog"} {
		r := b.get(p)
		if r.Status != http.StatusBadGateway {
			t.Fatalf("%s: %d, want 502", p, r.Status)
		}
		mustNotContain(t, r, "SECRET-IAM-USER", "123456789012")
	}
}

// secretTarget is a target URL whose every secret part (userinfo, path segments, query
// values) and header value holds the marker qz7: no page may show any of them, in any
// encoding a downstream's error might quote them in.
const secretTarget = "https://ops:pw-Qz7Pass9@hooks.example.test/services/T0Qz7SECRa/B0Qz7SECRb/Qz7tokenValue9x?token=Qz7Query1&sig=Qz7Sig%2Fa%3D%3D"

// decodings are the ways a reader could undo an encoding of the page's text: as served,
// HTML-unescaped, then percent-decoded (leniently, every valid %XX) and JSON-unescaped.
func decodings(s string) []string {
	h := html.UnescapeString(s)
	pct := regexp.MustCompile(`%[0-9a-fA-F]{2}`).ReplaceAllStringFunc(h, func(m string) string {
		b, _ := strconv.ParseUint(m[1:], 16, 8)
		return string(rune(b))
	})
	js := strings.NewReplacer(`\/`, "/", `\u0026`, "&", `\u003c`, "<", `\u003e`, ">", `\u003d`, "=").Replace(pct)
	return []string{s, h, pct, js, strings.ReplaceAll(pct, "+", " ")}
}

// The space around a downstream's error quoting a target's secrets: each secret part of the
// target's URL and headers, in every encoding (as configured, decoded, path- and
// query-escaped, every byte escaped, JSON, HTML, lower-case hex), inside the shapes errors
// take (Express's "Cannot POST", a JSON body, an HTML page, a bare token), and cut by the
// worker's 512-byte truncation at every length, is shown on no page.
func TestNoEncodingOfATargetsSecretShowsInAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f, err := sources.Parse([]byte(strings.Replace(strings.Replace(testSources, "http://127.0.0.1:1/SECRET-URL-PATH", secretTarget, 1),
		`"X-Api-Key": "SECRET-HEADER-VALUE"`, `"X-Api-Key": "Qz7HeaderKey42"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	u, _ := url.Parse(secretTarget)
	pw, _ := u.User.Password()
	var pieces []string
	pieces = append(pieces, u.EscapedPath(), u.Path, u.RawQuery, u.EscapedPath()+"?"+u.RawQuery, u.Path+"?"+u.RawQuery, pw, "Qz7HeaderKey42")
	for _, seg := range strings.Split(u.Path, "/") {
		if strings.Contains(seg, "Qz7") {
			pieces = append(pieces, seg)
		}
	}
	for k, vs := range u.Query() {
		pieces = append(pieces, vs[0], k+"="+vs[0], k+"="+url.QueryEscape(vs[0]))
	}
	escapeAll := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, "%%%02X", s[i])
		}
		return b.String()
	}
	jsonOf := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	encoders := map[string]func(string) string{
		"as is": func(s string) string { return s }, "path-escaped": url.PathEscape, "query-escaped": url.QueryEscape,
		"every byte escaped": escapeAll, "lower-case hex": func(s string) string { return strings.ToLower(escapeAll(s)) },
		"json": jsonOf, "json, slashes escaped": func(s string) string { return strings.ReplaceAll(jsonOf(s), "/", `\/`) },
		"html": html.EscapeString, "upper-case": strings.ToUpper,
	}
	shapes := []func(string) string{
		func(p string) string { return "Cannot POST " + p },
		func(p string) string { return `404: {"error":"no route","path":"` + p + `"}` },
		func(p string) string { return "<html><body><h1>Not Found</h1><p>" + p + "</p></body></html>" },
		func(p string) string { return "invalid token " + p + ", check your configuration" },
		func(p string) string { return p },
	}
	var msgs []string
	for _, p := range pieces {
		for _, enc := range slices.Sorted(maps.Keys(encoders)) {
			for _, shape := range shapes {
				msgs = append(msgs, shape(encoders[enc](p)))
			}
		}
		// Cut by the worker's truncation (the stored error, "permanent: " and the message, is
		// cut at 512 bytes, then "…") keeping every length of the piece from 4 bytes (fewer
		// tell nothing of a secret, and are shown).
		for keep := 4; keep < len(p); keep++ {
			msgs = append(msgs, strings.Repeat("x", 512-len("permanent: ")-keep)+p)
		}
	}
	byKey := map[string]string{}
	exec := outbox.ExecutorFunc(func(_ context.Context, task outbox.Task) error {
		if m, ok := byKey[task.IdempotencyKey]; ok {
			return outbox.Permanent(errors.New(m))
		}
		return nil
	})
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		id := fmt.Sprintf("evt_enc_%04d", i)
		byKey[key("shop", id, "email.send")] = m
		e.commit("shop", id, false)
	}
	e.drain()
	b := e.serve(func(c *console.Config) { c.MaxIndexReads = len(msgs) + 10 })
	check := func(where string, r response) {
		t.Helper()
		for _, d := range decodings(r.Body) {
			if i := strings.Index(strings.ToLower(d), "qz7"); i >= 0 {
				t.Fatalf("%s shows a secret of the target: …%s…", where, d[max(0, i-80):min(len(d), i+40)])
			}
		}
	}
	for i := range msgs {
		r := b.get(fmt.Sprintf("/events/shop/evt_enc_%04d", i))
		if r.Status != http.StatusOK || !strings.Contains(r.Body, `class="last-error"`) {
			t.Fatalf("evt_enc_%04d: %d, no last error shown", i, r.Status)
		}
		check(fmt.Sprintf("the event page of %q", msgs[i]), r)
	}
	check("the parked page", b.get("/parked"))
}

// deniedAt is the env's table with the named operations failing as AccessDeniedException does.
type deniedAt struct {
	*dynamodb.Client
	ops *sync.Map // operation name: true
}

func (d deniedAt) denied(op string) bool {
	_, ok := d.ops.Load(op)
	return ok
}

func (d deniedAt) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if d.denied("DescribeTable") {
		return nil, errDenied
	}
	return d.Client.DescribeTable(ctx, in, o...)
}

func (d deniedAt) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.denied("UpdateItem") {
		return nil, errDenied
	}
	return d.Client.UpdateItem(ctx, in, o...)
}

func (d deniedAt) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if d.denied("BatchGetItem") {
		return nil, errDenied
	}
	return d.Client.BatchGetItem(ctx, in, o...)
}

type deniedMetrics struct{}

func (deniedMetrics) Sums(context.Context, time.Time, time.Time, []console.MetricQuery) ([]float64, error) {
	return nil, errDenied
}

// Every place an AWS call can fail shows what failed and where to look, never the error's
// details (the account, the identity, the request id), which go to the log: the table check,
// the overview's metrics, a confirmation's read, a redrive's write.
func TestNoPageShowsAnAWSErrorsDetails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_denied", false)
	e.down.setRefuse(key("shop", "evt_denied", "email.send"), true)
	e.drain()
	var log strings.Builder
	var mu sync.Mutex
	var ops *sync.Map // what fails, from now on
	serve := func(failing ...string) *browser {
		ops = &sync.Map{}
		for _, op := range failing {
			ops.Store(op, true)
		}
		d := deniedAt{Client: e.client, ops: ops}
		return e.serve(func(c *console.Config) {
			c.DynamoDB = d
			c.Metrics = deniedMetrics{}
			c.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &log}, nil))
		})
	}
	check := func(where string, r response, status int) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d, want %d\n%s", where, r.Status, status, r.Body)
		}
		mustNotContain(t, r, "SECRET-IAM-USER", "123456789012", "RequestID")
	}
	check("the table check", serve("DescribeTable").get("/parked"), http.StatusBadGateway)
	check("the overview's metrics", serve().get("/"), http.StatusOK)
	b := serve()
	list := b.get("/parked")
	ops.Store("BatchGetItem", true)
	check("a confirmation's read", b.post("/redrive", url.Values{"ref": refs(list)[:1], "csrf": {csrf(t, list)}}), http.StatusBadGateway)
	b = serve("UpdateItem")
	list = b.get("/parked")
	confirm := b.post("/redrive", url.Values{"ref": refs(list)[:1], "csrf": {csrf(t, list)}})
	done := b.post("/redrive", url.Values{"ref": refs(confirm), "csrf": {csrf(t, confirm)}, "confirm": {"yes"}})
	check("a redrive's write", done, http.StatusOK)
	mustContain(t, done, "failed")
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(log.String(), "SECRET-IAM-USER"); n < 4 {
		t.Fatalf("the log has %d of the 4 errors' details:\n%s", n, log.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// deniedSNS answers Publish as SNS does when the outbox's role lacks sns:Publish on the topic:
// the error names the account and the IAM identity (role and session).
type deniedSNS struct{}

func (deniedSNS) Publish(context.Context, *sns.PublishInput, ...func(*sns.Options)) (*sns.PublishOutput, error) {
	return nil, &smithy.OperationError{ServiceID: "SNS", OperationName: "Publish", Err: &smithy.GenericAPIError{Code: "AuthorizationError",
		Message: "User: arn:aws:sts::123456789012:assumed-role/Oncehook-OutboxRole-SECRETROLE/Oncehook-Outbox-SECRETSESSION " +
			"is not authorized to perform: SNS:Publish on resource: arn:aws:sns:us-east-1:123456789012:orders", Fault: smithy.FaultClient}}
}

// docs/console.md keeps an AWS error's text off the page ("the error itself, which names the
// account, the IAM identity and the request id, only in the log") and the sources file's ARNs
// too (a target is shown by its name, type and delivery). An intent whose AWS target failed
// has the service's error as its last error, and the event, Parked and confirmation pages
// show it as it is: the target's ARN from the sources file, the account, the outbox's role
// and session. Here, a topic that does not exist (the emulator's own answer) and a role
// without sns:Publish.
func TestAnAWSTargetsErrorShowsNeitherTheAccountNorTheIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const missingTopic = "arn:aws:sns:us-east-1:123456789012:SECRET-TOPIC-missing"
	f, err := sources.Parse([]byte(strings.Replace(strings.Replace(testSources,
		`"email": {"url": "http://127.0.0.1:1/SECRET-URL-PATH", "headers": {"X-Api-Key": "SECRET-HEADER-VALUE"}}`,
		`"email": {"type": "sns", "arn": "`+missingTopic+`"}`, 1),
		`"crm": {"url": "http://127.0.0.1:1/crm"}`, `"crm": {"type": "sns", "arn": "arn:aws:sns:us-east-1:123456789012:orders"}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	emulator := &targets.SNS{Client: sns.NewFromConfig(awstest.Config(t)), TopicARN: missingTopic, Timeout: 5 * time.Second}
	denied := &targets.SNS{Client: deniedSNS{}, TopicARN: "arn:aws:sns:us-east-1:123456789012:orders"}
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": emulator, "crm": denied},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	e.commit("shop", "evt_aws", false)
	e.drain()
	cl := e.claim("shop", "evt_aws")
	for _, name := range []string{"email.send", "crm.update"} {
		if in := cl.Intents[name]; in.Status != dedup.IntentParked || !strings.Contains(in.LastError, "123456789012") {
			t.Fatalf("setup: %s %+v, want parked with the service's error", name, in)
		}
	}
	t.Logf("last errors: %q, %q", cl.Intents["email.send"].LastError, cl.Intents["crm.update"].LastError)
	b := e.serve(nil)
	confirm := b.post("/redrive", map[string][]string{"csrf": {csrf(t, b.get("/parked"))}, "ref": refs(b.get("/parked"))})
	for where, r := range map[string]response{"event page": b.get("/events/shop/evt_aws"), "parked page": b.get("/parked"), "confirmation": confirm} {
		mustContain(t, r, "evt_aws")
		for _, s := range []string{"123456789012", "SECRET-TOPIC", "SECRETROLE", "SECRETSESSION"} {
			if strings.Contains(r.Body, s) {
				t.Errorf("the %s shows %q", where, s)
			}
		}
	}
}

// A target URL's userinfo is a secret the redactor knows, as configured and in every
// escaping. Go's HTTP client does not send it as written: it sends it as the Authorization
// header, "Basic " and the base64 of user:password. A downstream that quotes the header it
// refused (many a 401 does) puts that in last_error, and the pages show it: the password,
// one base64 decoding away.
func TestATargetsPasswordIsNotShownAsTheBasicCredentialSentForIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unsupported authorization: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	t.Cleanup(refuse.Close)
	target := strings.Replace(refuse.URL, "http://", "http://ops:pw-Qz7Pass9@", 1) + "/hooks/in"
	f, err := sources.Parse([]byte(strings.ReplaceAll(testSources, "http://127.0.0.1:1/SECRET-URL-PATH", target)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	exec := &outbox.HTTPExecutor{URL: target, Timeout: 5 * time.Second}
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	credential := base64.StdEncoding.EncodeToString([]byte("ops:pw-Qz7Pass9"))
	e.commit("shop", "evt_basic", false)
	e.drain()
	if in := e.claim("shop", "evt_basic").Intents["email.send"]; in.Status != dedup.IntentParked || !strings.Contains(in.LastError, credential) {
		t.Fatalf("setup: %+v, want parked with the credential the downstream quoted", in)
	}
	b := e.serve(nil)
	for _, p := range []string{"/events/shop/evt_basic", "/parked"} {
		r := b.get(p)
		mustContain(t, r, "evt_basic", "unsupported authorization")
		mustNotContain(t, r, credential, "Qz7Pass9")
	}
}

// Without ShowPayloads an intent's payload is shown by its size only. A downstream that
// refuses a request quotes it back as often as not (a validation error naming the field and
// its value, a body echoed whole), and the outbox keeps the answer's first bytes as
// last_error: the event page, the Parked page and the confirmation show the payload there.
// The console holds the payload it hides, so it can hide it there too.
func TestAPayloadQuotedBackInAnErrorIsNotShownWithoutShowPayloads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		http.Error(w, `{"error":"invalid recipient","request":`+string(body)+`}`, http.StatusUnprocessableEntity)
	}))
	t.Cleanup(echo.Close)
	exec := &outbox.HTTPExecutor{URL: echo.URL + "/hooks/in", Timeout: 5 * time.Second}
	var err error
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	e.commit("shop", "evt_echoed", false)
	e.drain()
	if in := e.claim("shop", "evt_echoed").Intents["email.send"]; in.Status != dedup.IntentParked || !strings.Contains(in.LastError, "PAYLOAD-VALUE") {
		t.Fatalf("setup: %+v, want parked with the payload the downstream quoted", in)
	}
	b := e.serve(nil)
	parked := b.get("/parked")
	confirm := b.post("/redrive", map[string][]string{"csrf": {csrf(t, parked)}, "ref": refs(parked)})
	for where, r := range map[string]response{"event page": b.get("/events/shop/evt_echoed"), "parked page": parked, "confirmation": confirm} {
		mustContain(t, r, "evt_echoed", "invalid recipient")
		if strings.Contains(r.Body, "PAYLOAD-VALUE") {
			t.Errorf("the %s shows the payload without ShowPayloads", where)
		}
	}
}

// The outbox keeps the first 256 bytes of a downstream's answer in its error, quoted
// (outbox.StatusError), and cuts there without a mark. The redactor reads a cut-off secret
// only at the end of a message the worker truncated ("…"), so a target's token that the
// answer's 256th byte cuts is shown up to that byte: here all but its last characters, inside
// the quotes, wherever the downstream's framework puts the path (a JSON error's "path" after
// a long message).
func TestATokenCutByTheAnswersSnippetIsNotShownInPart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const token = "Qz7tokenValue9xLongEnoughToCut"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		head := `{"status":404,"error":"Not Found","message":"No handler for this route` // then padding, then the path
		tail := `","path":"` + r.URL.Path + `"}`
		// Place the answer's 256th byte 8 bytes before the token's end.
		pad := 256 - len(head) - (len(tail) - len(`"}`) - 8)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, head+strings.Repeat(".", pad)+tail)
	}))
	t.Cleanup(echo.Close)
	target := echo.URL + "/hooks/T0Qz7SECRa/" + token
	f, err := sources.Parse([]byte(strings.ReplaceAll(testSources, "http://127.0.0.1:1/SECRET-URL-PATH", target)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	exec := &outbox.HTTPExecutor{URL: target, Timeout: 5 * time.Second}
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	e.commit("shop", "evt_snippet", false)
	e.drain()
	cut := token[:len(token)-8]
	in := e.claim("shop", "evt_snippet").Intents["email.send"]
	if _, quoted, _ := strings.Cut(in.LastError, "404 Not Found: "); in.Status != dedup.IntentParked || !strings.HasSuffix(quoted, cut+`"`) {
		t.Fatalf("setup: %q, want parked with the answer's snippet ending in the token cut", in.LastError)
	}
	b := e.serve(nil)
	for _, p := range []string{"/events/shop/evt_snippet", "/parked"} {
		r := b.get(p)
		mustContain(t, r, "evt_snippet", "No handler for this route")
		mustNotContain(t, r, token[:4+len(token)/2])
	}
}

// The redaction hides a target's secrets and nothing a person needs: an error that quotes
// none of them is shown as it was, whatever words it shares with the target's URL's plain
// parts ("hooks", "services", "json").
func TestTheRedactionKeepsAnErrorWithoutSecretsAsItIs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f, err := sources.Parse([]byte(strings.Replace(strings.Replace(testSources, "http://127.0.0.1:1/SECRET-URL-PATH",
		"https://hooks.example.test/services/T0Qz7SECRa?format=json", 1), `"X-Api-Key": "SECRET-HEADER-VALUE"`, `"Accept": "application/json", "X-Env": "prod"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	plain := "http 422: product unknown to the services team (hooks disabled; send json)"
	e.commit("shop", "evt_plain", false)
	exec := outbox.ExecutorFunc(func(context.Context, outbox.Task) error { return outbox.Permanent(errors.New(plain)) })
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	e.drain()
	mustContain(t, e.serve(nil).get("/events/shop/evt_plain"), html.EscapeString(plain))
}

// A URL in an error is shown by its scheme, host and port alone: an IPv6 host keeps its
// brackets, without which its last group reads as the port.
func TestAURLInAnErrorShowsItsHostAsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_v6", false)
	exec := outbox.ExecutorFunc(func(context.Context, outbox.Task) error {
		return outbox.Permanent(errors.New(`Post "http://[::1]:8031/send?key=abc": connection refused; Post "http://[fd00::7]/send": refused`))
	})
	var err error
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	e.drain()
	page := e.serve(nil).get("/events/shop/evt_v6")
	mustContain(t, page, html.EscapeString(`Post "http://[::1]:8031/…": connection refused; Post "http://[fd00::7]/…": refused`))
}

// pythonEcho is what a Python downstream answers when it refuses pythonPayload and quotes it
// back with json.dumps, which escapes every non-ASCII character as \uXXXX (ensure_ascii, its
// default; a surrogate pair past U+FFFF). Made once with
//
//	python3 -c 'import json; print(json.dumps({"error": "invalid recipient", "request": {"to": "Zoë Ålander <zoë.ålander@exämple.com>", "note": "née 😀 Ørsted"}}))'
const (
	pythonPayload = `{"to":"Zoë Ålander <zoë.ålander@exämple.com>","note":"née 😀 Ørsted"}`
	pythonEcho    = `{"error": "invalid recipient", "request": {"to": "Zo\u00eb \u00c5lander <zo\u00eb.\u00e5lander@ex\u00e4mple.com>", "note": "n\u00e9e \ud83d\ude00 \u00d8rsted"}}`
)

// A payload quoted back JSON-escaped is the payload all the same: Python's json.dumps escapes
// every non-ASCII character, Go's encoder <, > and &, and an encoder may escape any character
// as \uXXXX. Without ShowPayloads none of those echoes shows the payload's values.
func TestAPayloadQuotedBackJSONEscapedIsNotShownWithoutShowPayloads(t *testing.T) {
	t.Parallel()
	var to, note string
	{
		var p struct{ To, Note string }
		if err := json.Unmarshal([]byte(pythonPayload), &p); err != nil {
			t.Fatal(err)
		}
		to, note = p.To, p.Note
	}
	goEcho, _ := json.Marshal(map[string]any{"error": "invalid recipient", "request": map[string]string{"to": to, "note": note}})
	var every strings.Builder // each character escaped, "\u0040"-style
	for _, r := range to {
		fmt.Fprintf(&every, `\u%04X`, r)
	}
	for name, echo := range map[string]string{"python": pythonEcho, "go": string(goEcho),
		"every character": `{"invalid recipient":1,"to":"` + every.String() + `"}`, // 254 bytes
		// The answer's 256th byte, where the outbox cuts it, 3 bytes into the 37th escape.
		"every character, cut inside an escape": ` {"detail":"invalid recipient","to":"` + every.String() + `"}`} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if in := e.parkEchoed(t, "evt_escaped", pythonPayload, echo); !strings.Contains(in.LastError, `\u`) {
				t.Fatalf("setup: %+v, want parked with the escaped echo", in)
			}
			b := e.serve(nil)
			parked := b.get("/parked")
			confirm := b.post("/redrive", map[string][]string{"csrf": {csrf(t, parked)}, "ref": refs(parked)})
			for where, r := range map[string]response{"event page": b.get("/events/shop/evt_escaped"), "parked page": parked, "confirmation": confirm} {
				mustContain(t, r, "evt_escaped", "invalid recipient")
				for _, s := range []string{"lander", "mple.com", "rsted", `\u00e5`, `\u00C5`, `\ud83d`} {
					if strings.Contains(r.Body, s) {
						t.Errorf("the %s shows %q of the payload without ShowPayloads", where, s)
					}
				}
			}
		})
	}
}

// A downstream quotes a refused payload back in the shapes its framework writes, and the
// console, which hides the payload without ShowPayloads, must hide it there in each: a number
// named in a validation message (a phone or an account number is PII as a JSON number as much
// as a string), and a value HTML-escaped as Python's html.escape and Django write it (&#x27;
// and &quot;, where Go's html.EscapeString writes &#39; and &#34;).
func TestAPayloadQuotedBackInAnyShapeIsNotShownWithoutShowPayloads(t *testing.T) {
	t.Parallel()
	const payload = `{"to":"Sean O'Brien <sean.obrien@example.com>","phone":14155550123,"note":"say \"hi\" to Jo"}`
	for name, c := range map[string]struct{ echo, hidden string }{
		"a number in a validation message": {`{"error":"phone 14155550123 is not a mobile number"}`, "14155550123"},
		"a value escaped by Python's html.escape": {
			`<p>Invalid recipient: Sean O&#x27;Brien &lt;sean.obrien@example.com&gt;</p>`, "sean.obrien@example.com"},
		"a value escaped by Django (&quot;)": {`<p>Note too long: say &quot;hi&quot; to Jo</p>`, "say &quot;hi&quot; to Jo"},
		// The outbox keeps the answer's first 256 bytes: here they end inside &#x27;.
		"a value escaped by Python's html.escape, cut inside a reference": {
			`<p>Invalid recipient ` + strings.Repeat(".", 256-len(`<p>Invalid recipient `)-len(`Sean O&#x2`)) +
				`Sean O&#x27;Brien &lt;sean.obrien@example.com&gt;</p>`, "Sean O"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if in := e.parkEchoed(t, "evt_shaped", payload, c.echo); !strings.Contains(in.LastError, c.hidden) {
				t.Fatalf("setup: %+v, want parked with the echo", in)
			}
			b := e.serve(nil)
			parked := b.get("/parked")
			for where, r := range map[string]response{"event page": b.get("/events/shop/evt_shaped"), "parked page": parked} {
				mustContain(t, r, "evt_shaped")
				// The page escapes what it shows once more: & as &amp;.
				if strings.Contains(r.Body, c.hidden) || strings.Contains(r.Body, html.EscapeString(c.hidden)) {
					t.Errorf("the %s shows %q of the payload without ShowPayloads", where, c.hidden)
				}
			}
		})
	}
}

// parkEchoed commits event id of shop with one intent, email.send carrying payload, to a
// downstream that refuses it with 422 and echo as its answer, and runs the worker: the intent
// parks with the echo in its last error. It returns the intent as parked.
func (e *env) parkEchoed(t *testing.T, id, payload, echo string) dedup.ClaimIntent {
	t.Helper()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, echo, http.StatusUnprocessableEntity)
	}))
	t.Cleanup(down.Close)
	exec := &outbox.HTTPExecutor{URL: down.URL + "/hooks/in", Timeout: 5 * time.Second}
	var err error
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(payload)}}}); err != nil {
		t.Fatal(err)
	}
	e.drain()
	in := e.claim("shop", id).Intents["email.send"]
	if in.Status != dedup.IntentParked {
		t.Fatalf("setup: %+v, want parked", in)
	}
	return in
}

// startedExecution is a Step Functions target as the worker sees it: it reports the execution
// ARN it started (outbox.Reporter), which the intent records as what was sent.
type startedExecution struct{ arn string }

func (x startedExecution) Execute(ctx context.Context, t outbox.Task) error { return nil }
func (x startedExecution) ExecuteReport(ctx context.Context, t outbox.Task) (string, error) {
	return "execution " + x.arn, nil
}

// docs/console.md: "an IAM identity or a target's ARN never reaches a page", the account id
// neither. What a Step Functions target reports as sent is its execution's ARN, which is the
// state machine's ARN (the target's, from the sources file) with the account, and the event
// page shows it as it is.
func TestWhatATargetSentShowsNeitherTheAccountNorTheTargetsARN(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const machine = "arn:aws:states:us-east-1:123456789012:stateMachine:SECRET-MACHINE-orders"
	f, err := sources.Parse([]byte(strings.Replace(testSources,
		`"email": {"url": "http://127.0.0.1:1/SECRET-URL-PATH", "headers": {"X-Api-Key": "SECRET-HEADER-VALUE"}}`,
		`"email": {"type": "stepfunctions", "arn": "`+machine+`"}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	exec := startedExecution{arn: "arn:aws:states:us-east-1:123456789012:execution:SECRET-MACHINE-orders:shop-evt_sent-email"}
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": e.exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	e.commit("shop", "evt_sent", false)
	e.drain()
	if in := e.claim("shop", "evt_sent").Intents["email.send"]; in.Status != dedup.IntentDone || !strings.Contains(in.Sent, "123456789012") {
		t.Fatalf("setup: %+v, want done with the execution's ARN as sent", in)
	}
	r := e.serve(nil).get("/events/shop/evt_sent")
	// The execution's name stays: the operator finds the execution by it.
	mustContain(t, r, "evt_sent", "email.send", "arn:aws:states:[redacted]:execution:[redacted]:shop-evt_sent-email")
	for _, s := range []string{"123456789012", "SECRET-MACHINE"} {
		if strings.Contains(r.Body, s) {
			t.Errorf("the event page shows %q in what was sent", s)
		}
	}
}
