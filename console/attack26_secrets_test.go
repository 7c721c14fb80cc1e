package console_test

// Findings of a security review of the console (attack26): each test names what must never
// happen, and fails while it does.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/console"
	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
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

// fakeTable is an oncehook-shaped table whose reads fail with an AWS error naming the
// operator's identity, as AccessDeniedException does.
type fakeTable struct{ console.API }

var errDenied = errors.New("operation error DynamoDB: GetItem, https response error StatusCode: 400, RequestID: R1, " +
	"api error AccessDeniedException: User: arn:aws:iam::123456789012:user/SECRET-IAM-USER is not authorized to perform: dynamodb:GetItem")

func (fakeTable) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(dedup.AttrPK), KeyType: types.KeyTypeHash}, {AttributeName: aws.String(dedup.AttrSK), KeyType: types.KeyTypeRange}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndexDescription{{IndexName: aws.String(dedup.PendingIndex),
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(dedup.AttrPendingShard), KeyType: types.KeyTypeHash}}}},
	}}, nil
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
	h, err := console.New(console.Config{DynamoDB: fakeTable{}, Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveHandler(t, h))
	for _, p := range []string{"/events/shop/evt_x", "/parked", "/backlog"} {
		r := b.get(p)
		if r.Status != http.StatusBadGateway {
			t.Fatalf("%s: %d, want 502", p, r.Status)
		}
		mustNotContain(t, r, "SECRET-IAM-USER", "123456789012")
	}
}

// A visitor without the token gets the sign-in page and nothing of the deployment: the
// layout around it names the table (the stack's name) and the console's modes.
func TestTheSignInPageShowsNothingOfTheDeployment(t *testing.T) {
	t.Parallel()
	h, err := console.New(console.Config{DynamoDB: fakeTable{}, Table: "Oncehook-OncehookTable-SECRET-STACK", Token: "a-long-enough-token-0123456789", ShowPayloads: true})
	if err != nil {
		t.Fatal(err)
	}
	r := newBrowser(t, serveHandler(t, h)).get("/")
	if r.Status != http.StatusUnauthorized {
		t.Fatalf("%d, want 401", r.Status)
	}
	mustNotContain(t, r, "SECRET-STACK", "payloads shown")
}

// "A DNS-rebinding page cannot reach a console on a laptop": it cannot act, but it reads the
// 421 answer (the page's own origin, rebound to 127.0.0.1, made the request), and that page's
// layout names the table (the stack's name) and the console's modes.
func TestTheAnswerToAForeignHostShowsNothingOfTheDeployment(t *testing.T) {
	t.Parallel()
	h, err := console.New(console.Config{DynamoDB: fakeTable{}, Table: "Oncehook-OncehookTable-SECRET-STACK", ShowPayloads: true})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveHandler(t, h))
	req, err := http.NewRequest(http.MethodGet, b.base+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebound.attacker.example:8030"
	r := b.do(req)
	if r.Status != http.StatusMisdirectedRequest {
		t.Fatalf("%d, want 421", r.Status)
	}
	mustNotContain(t, r, "SECRET-STACK", "payloads shown")
}
