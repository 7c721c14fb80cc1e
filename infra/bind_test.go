package infra

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// boundSourcesFile has, for the application's tables and for every AWS target type, one entry
// named in the file and one bound: the same kind of resource, either way.
const boundSourcesFile = `{"sources":{"shop":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/shop"}],"redrive_window":"30d"}},
  "tables":{"customers":{"bound":true,"partition_key":"email","actions":["update","check"],"audit":true},
            "customers-lit":{"name":"Customers-prod","partition_key":"email","actions":["update","check"],"audit":true}},
  "targets":{"q":{"type":"sqs","bound":true},"q-lit":{"type":"sqs","arn":"arn:aws:sqs:us-east-1:222222222222:q-lit"},
             "n":{"type":"sns","bound":true},"n-lit":{"type":"sns","arn":"arn:aws:sns:us-east-1:222222222222:n-lit"},
             "e":{"type":"eventbridge","bound":true},"e-lit":{"type":"eventbridge","arn":"arn:aws:events:us-east-1:222222222222:event-bus/e-lit"},
             "sf":{"type":"stepfunctions","bound":true},"sf-lit":{"type":"stepfunctions","arn":"arn:aws:states:us-east-1:222222222222:stateMachine:sf-lit"},
             "l":{"type":"lambda","bound":true},"l-lit":{"type":"lambda","arn":"arn:aws:lambda:us-east-1:222222222222:function:l-lit"},
             "mail":{"url":"https://mail.example.com/send"}}}`

// appResources defines, in scope, a resource of every kind a binding takes, named after its
// kind: the team's own, in its CDK app.
type appResources struct {
	table   awsdynamodb.Table
	queue   awssqs.Queue
	topic   awssns.Topic
	bus     awsevents.EventBus
	machine awsstepfunctions.StateMachine
	fn      awslambda.Function
}

func defineResources(scope constructs.Construct) appResources {
	r := appResources{}
	r.table = awsdynamodb.NewTable(scope, jsii.String("Customers"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("email"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
	})
	r.queue = awssqs.NewQueue(scope, jsii.String("Audit"), &awssqs.QueueProps{EnforceSSL: jsii.Bool(true)})
	r.topic = awssns.NewTopic(scope, jsii.String("Alerts"), &awssns.TopicProps{EnforceSSL: jsii.Bool(true)})
	r.bus = awsevents.NewEventBus(scope, jsii.String("Orders"), nil)
	r.machine = awsstepfunctions.NewStateMachine(scope, jsii.String("Fulfil"), &awsstepfunctions.StateMachineProps{
		DefinitionBody: awsstepfunctions.DefinitionBody_FromChainable(awsstepfunctions.NewPass(scope, jsii.String("Ship"), nil)),
	})
	r.fn = awslambda.NewFunction(scope, jsii.String("Crm"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PROVIDED_AL2023(), Handler: jsii.String("bootstrap"), Architecture: awslambda.Architecture_ARM_64(),
		Code: awslambda.Code_FromAsset(jsii.String(synth.bootstraps["arm64"]), nil),
	})
	return r
}

func (r appResources) bind(p *Props) {
	p.TableBindings = map[string]awsdynamodb.ITable{"customers": r.table}
	p.QueueBindings = map[string]awssqs.IQueue{"q": r.queue}
	p.TopicBindings = map[string]awssns.ITopic{"n": r.topic}
	p.EventBusBindings = map[string]awsevents.IEventBus{"e": r.bus}
	p.StateMachineBindings = map[string]awsstepfunctions.IStateMachine{"sf": r.machine}
	p.FunctionBindings = map[string]awslambda.IFunction{"l": r.fn}
}

// grantsOn is, per role, the actions granted on resources whose rendering matches, sorted,
// with the matched part of the resource replaced by "*", so that a literal and a bound
// resource's grants can be compared.
func grantsOn(tpl assertions.Template, role string, resource *regexp.Regexp) []string {
	pairs, _ := policyPairs(tpl, role)
	var out []string
	for _, pair := range pairs {
		action, res, _ := strings.Cut(pair, " ")
		if resource.MatchString(res) {
			out = append(out, action+" "+resource.ReplaceAllString(res, "*"))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// bindingsEnv is each function's ONCEHOOK_BINDINGS, rendered.
func bindingsEnv(t *testing.T, tpl assertions.Template) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, fn := range *tpl.FindResources(jsii.String("AWS::Lambda::Function"), nil) {
		p := (*fn)["Properties"].(map[string]any)
		if d, _ := p["Description"].(string); strings.HasPrefix(d, "oncehook ") {
			out[d] = render(p["Environment"].(map[string]any)["Variables"].(map[string]any)["ONCEHOOK_BINDINGS"])
		}
	}
	return out
}

// TestEveryResourceKindLiteralOrBoundIsGrantedTheSameCalls: for the application's tables and
// every AWS target type, a bound entry's role grants are exactly a literal one's, on the bound
// resource (the receiver's on tables, the outbox's and the sweeper's on targets); every
// function is handed the bound names as CloudFormation resolves them.
func TestEveryResourceKindLiteralOrBoundIsGrantedTheSameCalls(t *testing.T) {
	tpl, _, err := inApp(nil, func(_ awscdk.App, s awscdk.Stack) *Props {
		p := prebuilt("arm64")
		p.SourcesFile = sourcesFile(t, boundSourcesFile)
		defineResources(s).bind(p)
		return p
	})
	if err != nil {
		t.Fatal(err)
	}
	// Per kind, the literal resources' and the bound resources' renderings, in pairs.
	const sfBound = `arn:select\(1,split\(:,Fulfil\)\):states:select\(3,split\(:,Fulfil\)\):select\(4,split\(:,Fulfil\)\):execution:select\(6,split\(:,Fulfil\)\):\*`
	for _, c := range []struct {
		roles          []string
		literal, bound []string
	}{
		{[]string{"OncehookReceiverRole", "OncehookSweeperRole"}, []string{`arn:\$\{AWS::Partition\}:dynamodb:\$\{AWS::Region\}:\$\{AWS::AccountId\}:table/Customers-prod`}, []string{`Customers\.Arn`}},
		{[]string{"OncehookOutboxRole", "OncehookSweeperRole"}, []string{`arn:aws:sqs:us-east-1:222222222222:q-lit`}, []string{`Audit\.Arn`}},
		{[]string{"OncehookOutboxRole", "OncehookSweeperRole"}, []string{`arn:aws:sns:us-east-1:222222222222:n-lit`}, []string{`Alerts`}},
		{[]string{"OncehookOutboxRole", "OncehookSweeperRole"}, []string{`arn:aws:events:us-east-1:222222222222:event-bus/e-lit`}, []string{`Orders\.Arn`}},
		{[]string{"OncehookOutboxRole", "OncehookSweeperRole"}, []string{`arn:aws:states:us-east-1:222222222222:stateMachine:sf-lit`, `arn:aws:states:us-east-1:222222222222:execution:sf-lit:\*`},
			[]string{`Fulfil`, sfBound}},
		{[]string{"OncehookOutboxRole", "OncehookSweeperRole"}, []string{`arn:aws:lambda:us-east-1:222222222222:function:l-lit`}, []string{`Crm\.Arn`}},
	} {
		for _, role := range []string{"OncehookReceiverRole", "OncehookOutboxRole", "OncehookSweeperRole"} {
			var lit, bound []string
			for i := range c.literal {
				lit = append(lit, grantsOn(tpl, role, regexp.MustCompile("^"+c.literal[i]+"$"))...)
				bound = append(bound, grantsOn(tpl, role, regexp.MustCompile("^"+c.bound[i]+"$"))...)
			}
			slices.Sort(lit)
			slices.Sort(bound)
			if !slices.Contains(c.roles, role) {
				if len(lit)+len(bound) > 0 {
					t.Errorf("%s is granted %v %v", role, lit, bound)
				}
				continue
			}
			if len(lit) == 0 || strings.Join(lit, "\n") != strings.Join(bound, "\n") {
				t.Errorf("%s: literal %s is granted\n  %s\nbound %s\n  %s", role, c.literal, strings.Join(lit, "\n  "), c.bound, strings.Join(bound, "\n  "))
			}
		}
	}
	want := `{"tables":{"customers":"Customers"},"targets":{"e":"Orders.Arn","l":"Crm.Arn","n":"Alerts","q":"Audit.Arn","sf":"Fulfil"}}`
	for fn, got := range bindingsEnv(t, tpl) {
		if got != want {
			t.Errorf("%s's ONCEHOOK_BINDINGS %s, want %s", fn, got, want)
		}
	}
	if n := len(bindingsEnv(t, tpl)); n != 3 {
		t.Errorf("%d functions have ONCEHOOK_BINDINGS, want 3", n)
	}
	// Nothing the synth could not resolve reaches the template as a token's text.
	b, _ := json.Marshal(tpl.ToJSON())
	if strings.Contains(string(b), "Token[") {
		t.Error("the template holds an unresolved token's text")
	}
}

// TestAStackWithoutBindingsHandsTheFunctionsNone: no ONCEHOOK_BINDINGS where nothing is bound.
func TestAStackWithoutBindingsHandsTheFunctionsNone(t *testing.T) {
	for fn, got := range bindingsEnv(t, synth.tpl) {
		if got != "<nil>" {
			t.Errorf("%s: ONCEHOOK_BINDINGS %s", fn, got)
		}
	}
}

// TestABindingToAnotherStacksResourceIsACrossStackReference: resources of a stateful stack,
// bound: the grants and ONCEHOOK_BINDINGS import what that stack exports.
func TestABindingToAnotherStacksResourceIsACrossStackReference(t *testing.T) {
	var state awscdk.Stack
	tpl, _, err := inApp(nil, func(app awscdk.App, _ awscdk.Stack) *Props {
		state = awscdk.NewStack(app, jsii.String("State"), nil)
		p := prebuilt("arm64")
		p.SourcesFile = sourcesFile(t, boundSourcesFile)
		defineResources(state).bind(p)
		return p
	})
	if err != nil {
		t.Fatal(err)
	}
	env := bindingsEnv(t, tpl)["oncehook receiver"]
	for _, name := range []string{"customers", "q", "n", "e", "sf", "l"} {
		if !regexp.MustCompile(`"` + name + `":"import:State:ExportsOutput`).MatchString(env) {
			t.Errorf("ONCEHOOK_BINDINGS %s: %s is not imported from the stateful stack", env, name)
		}
	}
	for _, role := range []string{"OncehookReceiverRole", "OncehookOutboxRole"} {
		if got := grantsOn(tpl, role, regexp.MustCompile(`import:State:`)); len(got) < 2 {
			t.Errorf("%s's grants on the stateful stack's resources: %v", role, got)
		}
	}
	exports := assertions.Template_FromStack(state, nil).FindOutputs(jsii.String("*"), nil)
	if len(*exports) < 6 {
		t.Errorf("the stateful stack exports %d values", len(*exports))
	}
}

// TestAnImportedResourceIsBoundByItsNameOrArn: a table imported by name and targets imported
// by ARN are known at synth: ONCEHOOK_BINDINGS holds them as they are, the grants are on them.
func TestAnImportedResourceIsBoundByItsNameOrArn(t *testing.T) {
	const acct = "arn:aws:%s:us-east-1:333333333333:%s"
	tpl, _, err := inApp(nil, func(_ awscdk.App, s awscdk.Stack) *Props {
		p := prebuilt("arm64")
		p.SourcesFile = sourcesFile(t, boundSourcesFile)
		p.TableBindings = map[string]awsdynamodb.ITable{"customers": awsdynamodb.Table_FromTableName(s, jsii.String("T"), jsii.String("customers-prod"))}
		p.QueueBindings = map[string]awssqs.IQueue{"q": awssqs.Queue_FromQueueArn(s, jsii.String("Q"), jsii.String(fmt.Sprintf(acct, "sqs", "audit")))}
		p.TopicBindings = map[string]awssns.ITopic{"n": awssns.Topic_FromTopicArn(s, jsii.String("N"), jsii.String(fmt.Sprintf(acct, "sns", "alerts")))}
		p.EventBusBindings = map[string]awsevents.IEventBus{"e": awsevents.EventBus_FromEventBusArn(s, jsii.String("E"), jsii.String(fmt.Sprintf(acct, "events", "event-bus/orders")))}
		p.StateMachineBindings = map[string]awsstepfunctions.IStateMachine{"sf": awsstepfunctions.StateMachine_FromStateMachineArn(s, jsii.String("S"), jsii.String(fmt.Sprintf(acct, "states", "stateMachine:fulfil")))}
		p.FunctionBindings = map[string]awslambda.IFunction{"l": awslambda.Function_FromFunctionArn(s, jsii.String("L"), jsii.String(fmt.Sprintf(acct, "lambda", "function:crm")))}
		return p
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tables":{"customers":"customers-prod"},"targets":{"e":"arn:aws:events:us-east-1:333333333333:event-bus/orders","l":"arn:aws:lambda:us-east-1:333333333333:function:crm",` +
		`"n":"arn:aws:sns:us-east-1:333333333333:alerts","q":"arn:aws:sqs:us-east-1:333333333333:audit","sf":"arn:aws:states:us-east-1:333333333333:stateMachine:fulfil"}}`
	if got := bindingsEnv(t, tpl)["oncehook outbox"]; got != want {
		t.Errorf("ONCEHOOK_BINDINGS %s, want %s", got, want)
	}
	got := grantsOn(tpl, "OncehookOutboxRole", regexp.MustCompile(`333333333333`))
	wantGrants := []string{"events:PutEvents arn:aws:events:us-east-1:*:event-bus/orders", "lambda:InvokeFunction arn:aws:lambda:us-east-1:*:function:crm",
		"sns:Publish arn:aws:sns:us-east-1:*:alerts", "sqs:SendMessage arn:aws:sqs:us-east-1:*:audit",
		"states:DescribeExecution arn:aws:states:us-east-1:*:execution:fulfil:*", "states:DescribeStateMachine arn:aws:states:us-east-1:*:stateMachine:fulfil",
		"states:StartExecution arn:aws:states:us-east-1:*:stateMachine:fulfil"}
	if strings.Join(got, "\n") != strings.Join(wantGrants, "\n") {
		t.Errorf("the outbox's grants on the imported targets:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantGrants, "\n  "))
	}
	if got := grantsOn(tpl, "OncehookReceiverRole", regexp.MustCompile(`table/customers-prod$`)); len(got) != 2 {
		t.Errorf("the receiver's grants on the imported table: %v", got)
	}
}

// TestATokenTheSynthCannotResolveIsLeftToCloudFormationAndTheStart: a binding whose ARN is a
// parameter's value: the grant and ONCEHOOK_BINDINGS carry the parameter's Ref, and what only
// its value shows (the kind of ARN) is refused at start (launch's tests). A group id needs a
// FIFO queue: an imported one says so in its attributes, or the synth refuses it.
func TestATokenTheSynthCannotResolveIsLeftToCloudFormationAndTheStart(t *testing.T) {
	file := strings.Replace(boundSourcesFile, `"q":{"type":"sqs","bound":true}`, `"q":{"type":"sqs","bound":true,"group_id":"orders"}`, 1)
	build := func(fifo *bool) func(awscdk.App, awscdk.Stack) *Props {
		return func(_ awscdk.App, s awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.SourcesFile = sourcesFile(t, file)
			defineResources(s).bind(p)
			arn := awscdk.NewCfnParameter(s, jsii.String("AuditQueueArn"), &awscdk.CfnParameterProps{Type: jsii.String("String")}).ValueAsString()
			p.QueueBindings["q"] = awssqs.Queue_FromQueueAttributes(s, jsii.String("Q"), &awssqs.QueueAttributes{QueueArn: arn, Fifo: fifo})
			return p
		}
	}
	tpl, _, err := inApp(nil, build(jsii.Bool(true)))
	if err != nil {
		t.Fatal(err)
	}
	if got := bindingsEnv(t, tpl)["oncehook outbox"]; !strings.Contains(got, `"q":"AuditQueueArn"`) {
		t.Errorf("ONCEHOOK_BINDINGS %s: want the parameter's Ref", got)
	}
	if got := grantsOn(tpl, "OncehookOutboxRole", regexp.MustCompile(`^AuditQueueArn$`)); strings.Join(got, ",") != "sqs:SendMessage *" {
		t.Errorf("the outbox's grants on the parameter's queue: %v", got)
	}
	if _, _, err := inApp(nil, build(nil)); err == nil || !strings.Contains(err.Error(), `Props.QueueBindings["q"]: targets.q.group_id is for a FIFO queue`) {
		t.Errorf("a group id for a queue not said to be FIFO: %v", err)
	}
}

// TestBoundQueuesTopicsAndTablesUnderCustomerManagedKeysAreUsableThroughTheirServiceOnly:
// sending to a queue or topic under a key encrypts with it, a table's effects and the audit's
// sample use its key: each granted through that service only.
func TestBoundQueuesTopicsAndTablesUnderCustomerManagedKeysAreUsableThroughTheirServiceOnly(t *testing.T) {
	tpl, _, err := inApp(nil, func(_ awscdk.App, s awscdk.Stack) *Props {
		p := prebuilt("arm64")
		p.SourcesFile = sourcesFile(t, boundSourcesFile)
		r := defineResources(s)
		r.bind(p)
		key := func(id string) awskms.IKey {
			return awskms.NewKey(s, jsii.String(id), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
		}
		p.QueueBindings["q"] = awssqs.NewQueue(s, jsii.String("Secret"), &awssqs.QueueProps{EncryptionMasterKey: key("QueueKey"), Encryption: awssqs.QueueEncryption_KMS})
		p.TopicBindings["n"] = awssns.NewTopic(s, jsii.String("SecretTopic"), &awssns.TopicProps{MasterKey: key("TopicKey")})
		p.TableBindings["customers"] = awsdynamodb.Table_FromTableAttributes(s, jsii.String("SecretTable"), &awsdynamodb.TableAttributes{
			TableName: jsii.String("customers-prod"), EncryptionKey: key("TableKey")})
		return p
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ role, key, via, action string }{
		{"OncehookOutboxRole", "QueueKey.Arn", "sqs.", "kms:GenerateDataKey"}, {"OncehookSweeperRole", "QueueKey.Arn", "sqs.", "kms:GenerateDataKey"},
		{"OncehookOutboxRole", "TopicKey.Arn", "sns.", "kms:GenerateDataKey"}, {"OncehookSweeperRole", "TopicKey.Arn", "sns.", "kms:GenerateDataKey"},
		{"OncehookReceiverRole", "TableKey.Arn", "dynamodb.", "kms:Encrypt"}, {"OncehookSweeperRole", "TableKey.Arn", "dynamodb.", "kms:Decrypt"},
	} {
		found := false
		for _, res := range *tpl.FindResources(jsii.String("AWS::IAM::Policy"), nil) {
			p := (*res)["Properties"].(map[string]any)
			if !strings.HasPrefix(render(p["Roles"].([]any)[0]), c.role) {
				continue
			}
			for _, st := range asSlice(p["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				if render(st["Resource"]) != c.key {
					continue
				}
				if !strings.Contains(fmt.Sprint(st["Condition"]), c.via) {
					t.Errorf("%s: %v on %s without kms:ViaService %s", c.role, st["Action"], c.key, c.via)
				}
				found = found || slices.Contains(listOf(st["Action"]), any(c.action))
			}
		}
		if !found {
			t.Errorf("%s may not %s with %s", c.role, c.action, c.key)
		}
	}
	// The receiver sends nothing: no queue or topic key for it.
	for _, k := range []string{"QueueKey", "TopicKey"} {
		if got := grantsOn(tpl, "OncehookReceiverRole", regexp.MustCompile("^"+k+`\.Arn$`)); len(got) > 0 {
			t.Errorf("the receiver may %v", got)
		}
	}
}

// TestBindingsThatCannotWorkFailTheSynthNamingThePropAndTheField: every refusal of a binding,
// at synth, naming the prop and the sources file's field.
func TestBindingsThatCannotWorkFailTheSynthNamingThePropAndTheField(t *testing.T) {
	env := &awscdk.Environment{Account: jsii.String("111111111111"), Region: jsii.String("us-east-1")}
	for _, c := range []struct {
		name string
		file string // "" for boundSourcesFile
		set  func(s awscdk.Stack, r appResources, p *Props)
		want string
	}{
		{"a table binding for a name the file does not have", "", func(_ awscdk.Stack, r appResources, p *Props) { p.TableBindings["orders"] = r.table },
			`Props.TableBindings["orders"]: the sources file has no table "orders" (tables.orders)`},
		{"a target binding for a name the file does not have", "", func(_ awscdk.Stack, r appResources, p *Props) { p.QueueBindings["crm"] = r.queue },
			`Props.QueueBindings["crm"]: the sources file has no target "crm" (targets.crm)`},
		{"a literal table and a binding", "", func(_ awscdk.Stack, r appResources, p *Props) { p.TableBindings["customers-lit"] = r.table },
			`Props.TableBindings["customers-lit"]: tables.customers-lit names its table itself ("Customers-prod")`},
		{"a literal target and a binding", "", func(_ awscdk.Stack, r appResources, p *Props) { p.QueueBindings["q-lit"] = r.queue },
			`Props.QueueBindings["q-lit"]: targets.q-lit names its resource itself ("arn:aws:sqs:us-east-1:222222222222:q-lit")`},
		{"a queue for an sns target", "", func(_ awscdk.Stack, r appResources, p *Props) {
			delete(p.TopicBindings, "n")
			p.QueueBindings["n"] = r.queue
		},
			`Props.QueueBindings["n"]: targets.n is a sns target: bind it in Props.TopicBindings`},
		{"a function for a state machine target", "", func(_ awscdk.Stack, r appResources, p *Props) { p.FunctionBindings["sf"] = r.fn },
			`Props.FunctionBindings["sf"]: targets.sf is a stepfunctions target: bind it in Props.StateMachineBindings`},
		{"a topic for an http target", "", func(_ awscdk.Stack, r appResources, p *Props) { p.TopicBindings["mail"] = r.topic },
			`Props.TopicBindings["mail"]: targets.mail is an http target, which names its url`},
		{"a bound table without a binding", "", func(_ awscdk.Stack, _ appResources, p *Props) { delete(p.TableBindings, "customers") },
			`tables.customers: is "bound", and no Props.TableBindings entry binds it`},
		{"a bound target without a binding", "", func(_ awscdk.Stack, _ appResources, p *Props) { delete(p.EventBusBindings, "e") },
			`targets.e: is "bound", and no Props.EventBusBindings entry binds it`},
		{"a nil binding", "", func(_ awscdk.Stack, _ appResources, p *Props) { p.QueueBindings["q"] = nil }, `Props.QueueBindings["q"]: is nil`},
		{"a nil table binding", "", func(_ awscdk.Stack, _ appResources, p *Props) { p.TableBindings["customers"] = nil }, `Props.TableBindings["customers"]: is nil`},
		{"a standard queue for a group id", strings.Replace(boundSourcesFile, `"q":{"type":"sqs","bound":true}`, `"q":{"type":"sqs","bound":true,"group_id":"g"}`, 1),
			func(awscdk.Stack, appResources, *Props) {}, `Props.QueueBindings["q"]: targets.q.group_id is for a FIFO queue or topic`},
		{"an imported queue whose ARN is a topic's", "", func(s awscdk.Stack, _ appResources, p *Props) {
			p.QueueBindings["q"] = awssqs.Queue_FromQueueArn(s, jsii.String("X"), jsii.String("arn:aws:sns:us-east-1:111111111111:alerts"))
		}, `Props.QueueBindings["q"]: targets.q.arn: "arn:aws:sns:us-east-1:111111111111:alerts" is not the ARN of a sqs resource`},
		{"an imported function whose ARN is a queue's", "", func(s awscdk.Stack, _ appResources, p *Props) {
			p.FunctionBindings["l"] = awslambda.Function_FromFunctionArn(s, jsii.String("X"), jsii.String("arn:aws:sqs:us-east-1:111111111111:crm"))
		}, `Props.FunctionBindings["l"]: targets.l.arn`},
		{"an imported table of another account", "", func(s awscdk.Stack, _ appResources, p *Props) {
			p.TableBindings["customers"] = awsdynamodb.Table_FromTableArn(s, jsii.String("X"), jsii.String("arn:aws:dynamodb:us-east-1:222222222222:table/customers"))
		}, `Props.TableBindings["customers"]: is in account 222222222222, Region us-east-1, and the stack in 111111111111, us-east-1: effects are written in the claim's transaction`},
		{"an imported table of another Region", "", func(s awscdk.Stack, _ appResources, p *Props) {
			p.TableBindings["customers"] = awsdynamodb.Table_FromTableArn(s, jsii.String("X"), jsii.String("arn:aws:dynamodb:eu-west-1:111111111111:table/customers"))
		}, `Region eu-west-1`},
		{"an imported queue of another Region", "", func(s awscdk.Stack, _ appResources, p *Props) {
			p.QueueBindings["q"] = awssqs.Queue_FromQueueArn(s, jsii.String("X"), jsii.String("arn:aws:sqs:eu-west-1:111111111111:audit"))
		}, `Props.QueueBindings["q"]: is in account 111111111111, Region eu-west-1, and the stack in 111111111111, us-east-1: the outbox calls its targets in its own Region`},
		{"an imported table whose name DynamoDB refuses", "", func(s awscdk.Stack, _ appResources, p *Props) {
			p.TableBindings["customers"] = awsdynamodb.Table_FromTableName(s, jsii.String("X"), jsii.String("cu"))
		}, `Props.TableBindings["customers"]: tables.customers: is bound to "cu", which is not a DynamoDB table name`},
		{"oncehook's own table as an application table", "", func(s awscdk.Stack, _ appResources, p *Props) {
			p.Table.Existing = claimsTable(s, "Claims", nil, nil)
			p.TableBindings["customers"] = p.Table.Existing
		}, `Props.TableBindings["customers"]: is Props.Table.Existing, oncehook's own table`},
		{"a file entry neither literal nor bound", strings.Replace(boundSourcesFile, `"q":{"type":"sqs","bound":true}`, `"q":{"type":"sqs"}`, 1),
			func(awscdk.Stack, appResources, *Props) {}, `targets.q.arn: is required: the ARN of the sqs resource, or "bound": true`},
		{"a file entry both literal and bound", strings.Replace(boundSourcesFile, `"q":{"type":"sqs","bound":true}`, `"q":{"type":"sqs","bound":true,"arn":"arn:aws:sqs:us-east-1:1:q"}`, 1),
			func(awscdk.Stack, appResources, *Props) {}, `targets.q.arn: is set, and the target is bound`},
		{"a bound table of another partition key", "", func(s awscdk.Stack, _ appResources, p *Props) {
			p.TableBindings["customers"] = awsdynamodb.NewTable(s, jsii.String("X"), &awsdynamodb.TableProps{
				PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("id"), Type: awsdynamodb.AttributeType_STRING}})
		}, `Props.TableBindings["customers"]: tables.customers.partition_key is "email", and the bound table's partition key is "id"`},
		{"a bound table with a sort key the file does not name", "", func(s awscdk.Stack, _ appResources, p *Props) {
			p.TableBindings["customers"] = awsdynamodb.NewTableV2(s, jsii.String("X"), &awsdynamodb.TablePropsV2{
				PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("email"), Type: awsdynamodb.AttributeType_STRING},
				SortKey:      &awsdynamodb.Attribute{Name: jsii.String("since"), Type: awsdynamodb.AttributeType_NUMBER}})
		}, `Props.TableBindings["customers"]: tables.customers.sort_key is "", and the bound table's sort key is "since"`},
		{"the bindings' variable set by hand", "", func(_ awscdk.Stack, _ appResources, p *Props) {
			p.Environment = map[string]string{"ONCEHOOK_BINDINGS": "{}"}
		}, `Props.Environment: ONCEHOOK_BINDINGS is set by the construct`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := inApp(env, func(_ awscdk.App, s awscdk.Stack) *Props {
				p := prebuilt("arm64")
				p.SourcesFile = sourcesFile(t, boundSourcesFile)
				if c.file != "" {
					p.SourcesFile = sourcesFile(t, c.file)
				}
				r := defineResources(s)
				r.bind(p)
				c.set(s, r, p)
				return p
			})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// TestAResourceTheSynthCannotPlaceIsWarnedOf: in a stack with no account and Region of its own,
// a bound or adopted resource imported by an ARN that names an account or Region cannot be
// checked against the stack's: the synth warns, naming the prop (a table must be in the
// stack's account and Region, a target in its Region).
func TestAResourceTheSynthCannotPlaceIsWarnedOf(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(s awscdk.Stack, p *Props)
		want string // "" for no warning
	}{
		{"a bound table imported by an ARN", func(s awscdk.Stack, p *Props) {
			p.TableBindings["customers"] = awsdynamodb.Table_FromTableArn(s, jsii.String("X"), jsii.String("arn:aws:dynamodb:us-east-1:222222222222:table/customers"))
		}, `Props.TableBindings["customers"]: is in account 222222222222, Region us-east-1`},
		{"a bound queue imported by an ARN", func(s awscdk.Stack, p *Props) {
			p.QueueBindings["q"] = awssqs.Queue_FromQueueArn(s, jsii.String("X"), jsii.String("arn:aws:sqs:eu-west-1:222222222222:audit"))
		}, `Props.QueueBindings["q"]: is in account 222222222222, Region eu-west-1`},
		{"an adopted table imported by an ARN", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = awsdynamodb.Table_FromTableAttributes(s, jsii.String("Claims"), &awsdynamodb.TableAttributes{
				TableArn:       jsii.String("arn:aws:dynamodb:us-east-1:222222222222:table/claims"),
				TableStreamArn: jsii.String("arn:aws:dynamodb:us-east-1:222222222222:table/claims/stream/x"),
			})
		}, `Props.Table.Existing: is in account 222222222222, Region us-east-1`},
		{"a bound table imported by name", func(s awscdk.Stack, p *Props) {
			p.TableBindings["customers"] = awsdynamodb.Table_FromTableName(s, jsii.String("X"), jsii.String("customers"))
		}, ""},
		{"the app's own resources", func(awscdk.Stack, *Props) {}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := awscdk.NewApp(nil)
			s := awscdk.NewStack(app, jsii.String("S"), nil)
			p := prebuilt("arm64")
			p.SourcesFile = sourcesFile(t, boundSourcesFile)
			p.Alarms.Emails = []string{"oncall@example.com"}
			defineResources(s).bind(p)
			c.set(s, p)
			New(s, "Oncehook", p)
			msgs := assertions.Annotations_FromStack(s).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("not known at synth")))
			var got []string
			for _, m := range *msgs {
				got = append(got, fmt.Sprint(m.Entry.Data))
			}
			if c.want == "" && len(got) > 0 || c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)) {
				t.Fatalf("warnings %q, want %q", got, c.want)
			}
		})
	}
}

// literalBytes is how many bytes of a template value are literal: the whole of a string, the
// literal parts of an Fn::Join, none of a Ref or an attribute (known only at deploy).
func literalBytes(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case []any:
		n := 0
		for _, e := range v {
			n += literalBytes(e)
		}
		return n
	case map[string]any:
		if j, ok := v["Fn::Join"].([]any); ok && len(j) == 2 {
			parts, _ := j[1].([]any)
			return literalBytes(parts) + len(fmt.Sprint(j[0]))*max(len(parts)-1, 0)
		}
	}
	return 0
}

// TestBindingsThatOverflowTheFunctionsEnvironmentFailTheSynth: ONCEHOOK_BINDINGS is JSON whose
// values (the bound tables' names) CloudFormation completes at deploy, and whose keys (the
// sources file's table names) are literal. Lambda's 4 KB limit holds for the final
// environment: an environment whose literal bytes alone are over it is refused at synth,
// naming its size, as a literal value would be; it is not counted as one value known only at
// deploy and passed without even a warning.
func TestBindingsThatOverflowTheFunctionsEnvironmentFailTheSynth(t *testing.T) {
	var file strings.Builder
	file.WriteString(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/shop"}],"redrive_window":"30d"}},"tables":{`)
	var names []string
	for i := range 36 {
		name := fmt.Sprintf("customers-%02d-%s", i, strings.Repeat("x", 100))
		names = append(names, name)
		if i > 0 {
			file.WriteString(",")
		}
		fmt.Fprintf(&file, `%q:{"bound":true,"partition_key":"email","actions":["update","check"]}`, name)
	}
	file.WriteString(`}}`)
	path := sourcesFile(t, file.String())
	tpl, err := synthesizeWith(func(stack awscdk.Stack) *Props {
		table := defineResources(stack).table
		p := prebuilt("arm64")
		p.SourcesFile = path
		p.TableBindings = map[string]awsdynamodb.ITable{}
		for _, n := range names {
			p.TableBindings[n] = table
		}
		return p
	}, nil)
	if err != nil {
		if !strings.Contains(err.Error(), "4 KB") {
			t.Fatalf("refused without naming the limit: %v", err)
		}
		return
	}
	for name, fn := range functionsByTag(t, tpl) {
		size := 0
		for k, v := range envOf(fn) {
			size += len(k) + literalBytes(v)
		}
		if size > 4096 {
			t.Errorf("%s: the synth passed an environment of at least %d literal bytes, over Lambda's 4 KB: the deployment fails at CreateFunction", name, size)
		}
	}
}
