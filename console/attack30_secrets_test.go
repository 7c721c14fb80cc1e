package console_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/smithy-go"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
	"github.com/oncehook/oncehook/sources"
)

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
