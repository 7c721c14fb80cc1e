package launch

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
)

// boundSources is a sources file that names no physical table or queue: both are bound.
const boundSources = `{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"LAUNCH_SECRET"}],"retry_horizon":"3d","redrive_window":"30d"}},
  "tables":{"customers":{"bound":true,"partition_key":"email","actions":["update"],"audit":true}},
  "targets":{"audit":{"type":"sqs","bound":true},"mail":{"url":"https://mail.example/send"}}}`

// TestStartRefusesBindingsThatCannotWork: what only the deployment's resolved names show is
// refused at start, naming ONCEHOOK_BINDINGS and the field.
func TestStartRefusesBindingsThatCannotWork(t *testing.T) {
	awstest.Config(t)
	const queue = "arn:aws:sqs:us-east-1:000000000000:audit"
	for _, c := range []struct {
		name, file, bindings, want string
	}{
		{"a bound file without bindings", boundSources, ``, "ONCEHOOK_BINDINGS: tables.customers: is bound, and no binding names it"},
		{"a bound target without its binding", boundSources, `{"tables":{"customers":"Customers"}}`, "ONCEHOOK_BINDINGS: targets.audit: is bound, and no binding names it"},
		{"bindings that are not JSON", boundSources, `tables=customers`, "ONCEHOOK_BINDINGS: want {"},
		{"a misspelt section", boundSources, `{"table":{"customers":"Customers"}}`, `ONCEHOOK_BINDINGS: want {"tables"`},
		{"a binding for an entry the file does not have", boundSources, `{"tables":{"customers":"Customers","orders":"Orders"},"targets":{"audit":"` + queue + `"}}`, "ONCEHOOK_BINDINGS: tables.orders: is bound, and the sources file has no such table"},
		{"a binding for a literal target", boundSources, `{"tables":{"customers":"Customers"},"targets":{"audit":"` + queue + `","mail":"` + queue + `"}}`, "ONCEHOOK_BINDINGS: targets.mail: is bound, and the sources file names the target itself"},
		{"a binding of the wrong kind", boundSources, `{"tables":{"customers":"Customers"},"targets":{"audit":"arn:aws:sns:us-east-1:000000000000:audit"}}`, `ONCEHOOK_BINDINGS: targets.audit.arn: "arn:aws:sns:us-east-1:000000000000:audit" is not the ARN of a sqs resource`},
		{"a token the synth did not resolve", boundSources, `{"tables":{"customers":"${Token[TOKEN.42]}"},"targets":{"audit":"` + queue + `"}}`, "ONCEHOOK_BINDINGS: tables.customers: is bound to \"${Token[TOKEN.42]}\", an unresolved CDK token"},
		{"bindings for a file with nothing bound", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"LAUNCH_SECRET"}],"retry_horizon":"3d","redrive_window":"30d"}}}`,
			`{"tables":{"customers":"Customers"}}`, "ONCEHOOK_BINDINGS: tables.customers: is bound, and the sources file has no such table"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("TABLE_NAME", "t")
			t.Setenv("ONCEHOOK_SOURCES_FILE", "")
			t.Setenv("ONCEHOOK_SOURCES", c.file)
			t.Setenv("ONCEHOOK_BINDINGS", c.bindings)
			t.Setenv("LAUNCH_SECRET", "s")
			for _, needs := range []Needs{{Secrets: true}, {}} { // the receiver, the outbox and the sweeper
				if _, err := Load(context.Background(), needs); err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("got %v, want %q", err, c.want)
				}
			}
		})
	}
}

// TestTheFunctionsActOnTheBoundTableAndQueue: on the emulator, a table and a queue the sources
// file does not name, bound by ONCEHOOK_BINDINGS to the names the deployment has: the store
// writes the effect in the bound table, in the claim's write; the worker sends the intent to the
// bound queue, its URL derived from the bound ARN; the sweeper audits the bound table.
func TestTheFunctionsActOnTheBoundTableAndQueue(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	db := awstest.Client(t)
	table := awstest.Table(t, db)
	suffix := awstest.Name("") // the event's id and the queue's name, a test's own
	customers := awstest.CreateTable(t, db, "bound-customers-", &dynamodb.CreateTableInput{
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("email"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("email"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	sq := sqs.NewFromConfig(cfg)
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bound-audit-" + suffix)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sq.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	attrs, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	queueArn := attrs.Attributes["QueueArn"]

	t.Setenv("TABLE_NAME", table)
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	t.Setenv("ONCEHOOK_SOURCES", boundSources)
	t.Setenv("ONCEHOOK_TARGETS", "")
	t.Setenv("LAUNCH_SECRET", "s")
	t.Setenv("ONCEHOOK_BINDINGS", fmt.Sprintf(`{"tables":{"customers":%q},"targets":{"audit":%q}}`, customers, queueArn))
	env, err := Load(ctx, Needs{})
	if err != nil {
		t.Fatal(err)
	}

	update := expression.Add(expression.Name("orders"), expression.Value(1))
	plan := dedup.Plan{
		Effects: []dedup.Effect{dedup.UpdateEffect(map[string]types.AttributeValue{"email": &types.AttributeValueMemberS{Value: "ada@example.com"}}, update).In("customers")},
		Intents: []dedup.Intent{{Name: "audit.order", Target: "audit", Payload: []byte(`{"order":"o1"}`)}},
	}
	if _, err := env.Store.Commit(ctx, dedup.Event{Source: "shop", ID: "evt_bound_" + suffix, Type: "order.paid", Payload: []byte(`{}`)}, plan); err != nil {
		t.Fatal(err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(customers), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"email": &types.AttributeValueMemberS{Value: "ada@example.com"}}})
	if err != nil || out.Item == nil {
		t.Fatalf("the bound table has no customer: %v", err)
	}
	if n, _ := out.Item["orders"].(*types.AttributeValueMemberN); n == nil || n.Value != "1" {
		t.Fatalf("the customer in the bound table: %v", out.Item)
	}

	w, err := NewWorker(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	if x, ok := TargetExecutors(env.Sources, env.AWS)["audit"].(*targets.SQS); !ok || !strings.HasSuffix(x.QueueURL, "/bound-audit-"+suffix) {
		t.Fatalf("the bound queue's executor: %#v", TargetExecutors(env.Sources, env.AWS)["audit"])
	}
	if _, err := w.Process(ctx, readClaim(t, db, table, "evt_bound_"+suffix)); err != nil {
		t.Fatal(err)
	}
	if in := readClaim(t, db, table, "evt_bound_"+suffix).Intents["audit.order"]; in.Status != dedup.IntentDone {
		t.Fatalf("the intent to the bound queue: %+v", in)
	}
	msgs, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
	if err != nil || len(msgs.Messages) != 1 || !strings.Contains(aws.ToString(msgs.Messages[0].Body), `"order":"o1"`) {
		t.Fatalf("the bound queue got %+v, %v; want the intent's one message", msgs, err)
	}

	s, err := NewSweeper(env, nil)
	if err != nil || len(s.AuditTables) != 1 || s.AuditTables[0].Audited != customers {
		t.Fatalf("the sweeper's audits %+v, %v: want the bound table's", s, err)
	}
}

// TestEveryBoundTargetTypeGetsItsExecutorOnTheBoundResource: a bound target of every AWS type,
// bound at start, is served by its type's executor on exactly the ARN the deployment resolved,
// as a literal one is on the file's.
func TestEveryBoundTargetTypeGetsItsExecutorOnTheBoundResource(t *testing.T) {
	awstest.Config(t)
	const acct = "arn:aws:%s:us-east-1:111111111111:%s"
	t.Setenv("TABLE_NAME", "t")
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	t.Setenv("ONCEHOOK_TARGETS", "")
	t.Setenv("ONCEHOOK_SOURCES", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"ssm":"/s"}],"retry_horizon":"3d","redrive_window":"30d"}},
	  "targets":{"q":{"type":"sqs","bound":true,"group_id":"g"},"n":{"type":"sns","bound":true},"e":{"type":"eventbridge","bound":true,"detail_type":"Shipped"},
	             "s":{"type":"stepfunctions","bound":true},"l":{"type":"lambda","bound":true,"invocation":"request-response","delivery":"at-most-once"}}}`)
	b := map[string]string{"q": fmt.Sprintf(acct, "sqs", "orders.fifo"), "n": fmt.Sprintf(acct, "sns", "alerts"), "e": fmt.Sprintf(acct, "events", "event-bus/shop"),
		"s": fmt.Sprintf(acct, "states", "stateMachine:fulfil"), "l": fmt.Sprintf(acct, "lambda", "function:crm")}
	t.Setenv("ONCEHOOK_BINDINGS", fmt.Sprintf(`{"targets":{"q":%q,"n":%q,"e":%q,"s":%q,"l":%q}}`, b["q"], b["n"], b["e"], b["s"], b["l"]))
	env, err := Load(context.Background(), Needs{})
	if err != nil {
		t.Fatal(err)
	}
	m := TargetExecutors(env.Sources, env.AWS)
	if x, ok := m["q"].(*targets.SQS); !ok || x.QueueURL != "https://sqs.us-east-1.amazonaws.com/111111111111/orders.fifo" || x.GroupID != "g" {
		t.Errorf("q: %#v", m["q"])
	}
	if x, ok := m["n"].(*targets.SNS); !ok || x.TopicARN != b["n"] {
		t.Errorf("n: %#v", m["n"])
	}
	if x, ok := m["e"].(*targets.EventBridge); !ok || x.Bus != b["e"] || x.DetailType != "Shipped" {
		t.Errorf("e: %#v", m["e"])
	}
	if x, ok := m["s"].(*targets.StepFunctions); !ok || x.StateMachineARN != b["s"] {
		t.Errorf("s: %#v", m["s"])
	}
	if !outbox.IsAtMostOnce(m["l"]) {
		t.Errorf("l: %#v, want the file's at-most-once kept", m["l"])
	}
	if got := strings.Join(KnownTargets(env.Sources, env.Settings.Targets), ","); got != "e,l,n,q,s" {
		t.Errorf("the receiver's targets %s", got)
	}
}
