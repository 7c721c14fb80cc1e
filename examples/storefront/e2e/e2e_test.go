// Package e2e drives the storefront deployed to an emulator: signed Stripe and GitHub
// deliveries in (each twice, at once, and a GitHub replay under a forged delivery id), the
// records in oncehook's table and in the storefront's own customers table (bound: found by the
// name the deployed functions were handed, as CloudFormation gave it), and the calls of the
// three downstreams (fulfilment, CI, and the CRM behind the storefront's own executor)
// checked; and the commands the deploy printed, run as printed in a new shell. Run by the
// repository's `make test`, which deploys the stack first with hookctl deploy-local (which
// puts the secrets its sources file names) and sets STOREFRONT_URL, STOREFRONT_TABLE and
// STOREFRONT_DEPLOY_OUTPUT.
package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"

	"example.com/storefront/planners"
)

// downstream counts the calls it gets per idempotency key (the header the caller names).
type downstream struct {
	mu    sync.Mutex
	calls map[string]int
}

func serve(t *testing.T, addr, keyHeader string) *downstream {
	t.Helper()
	d := &downstream{calls: map[string]int{}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		d.mu.Lock()
		d.calls[r.Header.Get(keyHeader)]++
		d.mu.Unlock()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return d
}

func (d *downstream) snapshot() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, v := range d.calls {
		out[k] = v
	}
	return out
}

func TestTheStorefrontEndToEnd(t *testing.T) {
	url, table := os.Getenv("STOREFRONT_URL"), os.Getenv("STOREFRONT_TABLE")
	if url == "" || table == "" {
		if os.Getenv("STOREFRONT_E2E") == "required" {
			t.Fatal("STOREFRONT_URL and STOREFRONT_TABLE are not set: the storefront was not deployed")
		}
		t.Skip("the storefront is not deployed (make test deploys it to the emulator)")
	}
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../sources.local.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := sources.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	// The secrets the sources file names, as the deploy put them in the emulator (and as the
	// receiver reads them).
	resolver := &sources.Resolver{SecretsManager: secretsmanager.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg)}
	secrets := map[string]string{}
	for _, name := range f.Names() {
		s, err := resolver.Resolve(ctx, f.Sources[name].Secrets[:1])
		if err != nil {
			t.Fatalf("source %s's secret (hookctl deploy-local puts it): %v", name, err)
		}
		secrets[name] = s[0]
	}
	fulfilment := serve(t, "127.0.0.1:8031", "Idempotency-Key")
	ci := serve(t, "127.0.0.1:8032", "Idempotency-Key")
	crm := serve(t, "127.0.0.1:8033", "X-Request-Key")

	run := fmt.Sprint(time.Now().UnixNano())
	session := "cs_e2e_" + run
	sha := fmt.Sprintf("%040s", run)
	deliveries := []struct {
		source string
		body   string
		opts   []receivertest.Option
	}{
		{"stripe", fmt.Sprintf(`{"id":"evt_e2e_%s","object":"event","type":"checkout.session.completed","created":%d,"data":{"object":{"id":"%s","amount_total":4200,"customer_details":{"email":"ada@example.com"}}}}`,
			run, time.Now().Unix(), session), nil},
		{"github", fmt.Sprintf(`{"ref":"refs/heads/main","after":"%s","repository":{"full_name":"octo-org/storefront"}}`, sha),
			[]receivertest.Option{receivertest.WithEventType("push"), receivertest.WithEventID("guid-" + run)}},
	}
	post := func(source, body string, opts ...receivertest.Option) (string, error) {
		req, err := receivertest.HTTPRequest(f, source, secrets[source], strings.TrimSuffix(url, "{source}")+source, []byte(body), opts...)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("%s: %d %s", source, resp.StatusCode, b)
		}
		return string(b), nil
	}
	db := dynamodb.NewFromConfig(cfg)
	customers := customersTable(t, ctx, cfg, table)
	ordersOf := func() int { // the customer's order count in the storefront's own table
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(customers), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"email": &types.AttributeValueMemberS{Value: "ada@example.com"}}})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := out.Item["orders"].(*types.AttributeValueMemberN)
		if n == nil {
			return 0
		}
		v, _ := strconv.Atoi(n.Value)
		return v
	}
	ordersBefore := ordersOf()
	for _, d := range deliveries {
		// Each delivered twice at once, with the same (signed or header) id: a concurrent double.
		type answer struct {
			body string
			err  error
		}
		answers := make(chan answer, 2)
		opts := d.opts
		if d.source == "stripe" {
			opts = []receivertest.Option{receivertest.WithEventID("evt_e2e_" + run)}
		}
		for range 2 {
			go func() {
				b, err := post(d.source, d.body, opts...)
				answers <- answer{b, err}
			}()
		}
		x, y := <-answers, <-answers
		if x.err != nil || y.err != nil {
			t.Fatal(x.err, y.err)
		}
		a, b := x.body, y.body
		if strings.Count(a+b, `"duplicate":false`) != 1 || strings.Count(a+b, `"duplicate":true`) != 1 {
			t.Fatalf("%s: answers %s and %s, want one accepted and one duplicate", d.source, a, b)
		}
	}
	// The captured GitHub delivery replayed under a forged delivery GUID: a duplicate's answer.
	if got, err := post("github", deliveries[1].body, receivertest.WithEventType("push"), receivertest.WithEventID("forged-"+run)); err != nil || got != `{"received":true,"duplicate":true}` {
		t.Fatalf("a replay under a forged id: %s %v", got, err)
	}

	if got := ordersOf() - ordersBefore; got != 1 {
		t.Fatalf("the customer's order count moved by %d, want 1: one checkout, delivered twice at once", got)
	}
	for _, key := range [][2]string{{"ORDER#" + session, "CHECKOUT"}, {"PUSH#octo-org/storefront#" + sha, "PUSH"}} {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key[0]}, "sk": &types.AttributeValueMemberS{Value: key[1]}}})
		if err != nil || out.Item == nil {
			t.Fatalf("record %v: %v, %v", key, out, err)
		}
	}
	want := map[*downstream]string{
		fulfilment: "stripe:evt_e2e_" + run + ":fulfilment.ship",
		crm:        "stripe:evt_e2e_" + run + ":crm.customer",
		ci:         "github:1:guid-" + run + ":ci.build",
	}
	// The outbox runs from the stream: wait until both claims have every intent done.
	for _, pk := range []string{"EVT#stripe#evt_e2e_" + run, "EVT#github#1:guid-" + run} {
		for i := 0; ; i++ {
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "CLAIM"}}})
			if err != nil {
				t.Fatal(err)
			}
			if done(out.Item) {
				break
			}
			if i == 360 {
				t.Fatalf("claim %s: intents not done after 90 s: %v", pk, out.Item)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	for d, key := range want {
		calls := d.snapshot()
		if calls[key] != 1 || len(calls) != 1 {
			t.Errorf("calls %v, want %s exactly once", calls, key)
		}
	}
}

// customersTable is the storefront's customers table as the deployed functions were handed it:
// the sources file names no table (tables.customers is "bound"), the CDK app binds it to the
// table it defines, and CloudFormation named that. Each of the three functions of the stack
// (those on its oncehook table) is handed the same name in ONCEHOOK_BINDINGS, and the table is
// there.
func customersTable(t *testing.T, ctx context.Context, cfg aws.Config, table string) string {
	t.Helper()
	names := map[string]int{}
	p := lambda.NewListFunctionsPaginator(lambda.NewFromConfig(cfg), &lambda.ListFunctionsInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, fn := range page.Functions {
			if fn.Environment == nil || fn.Environment.Variables["TABLE_NAME"] != table {
				continue
			}
			b, err := sources.ParseBindings([]byte(fn.Environment.Variables["ONCEHOOK_BINDINGS"]))
			if err != nil {
				t.Fatalf("%s's ONCEHOOK_BINDINGS: %v", aws.ToString(fn.FunctionName), err)
			}
			names[b.Tables[planners.Customers]]++
		}
	}
	if len(names) != 1 {
		t.Fatalf("the functions on %s were handed the customers tables %v: want one name, the same for the three", table, names)
	}
	for name, n := range names {
		if n != 3 || name == "" || name == planners.Customers {
			t.Fatalf("the customers table %q, handed to %d functions: want the name CloudFormation gave it, for all three", name, n)
		}
		if _, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}); err != nil {
			t.Fatalf("the bound customers table %s: %v", name, err)
		}
		return name
	}
	return ""
}

// done reports whether a claim item has intents and every one is done.
func done(item map[string]types.AttributeValue) bool {
	c, err := dedup.UnmarshalClaim(item)
	if err != nil || len(c.Intents) == 0 {
		return false
	}
	for _, in := range c.Intents {
		if in.Status != dedup.IntentDone {
			return false
		}
	}
	return true
}
