package infra

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// inApp runs New in stack S of an app in which build may define other stacks (a stateful
// stack the props refer to), and returns S's template and the construct, or the refusal.
func inApp(env *awscdk.Environment, build func(app awscdk.App, s awscdk.Stack) *Props) (tpl assertions.Template, o *Oncehook, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	app := awscdk.NewApp(nil)
	s := awscdk.NewStack(app, jsii.String("S"), &awscdk.StackProps{Env: env})
	o = New(s, "Oncehook", build(app, s))
	return assertions.Template_FromStack(s, nil), o, nil
}

// claimsTable is a table with what oncehook needs, as a team defines it in its own stack;
// edit changes its props, and pending (nil: the right one) its pending index.
func claimsTable(scope constructs.Construct, id string, edit func(*awsdynamodb.TableProps), pending *awsdynamodb.GlobalSecondaryIndexProps) awsdynamodb.Table {
	p := &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String("expires_at"),
		Stream:              awsdynamodb.StreamViewType_NEW_IMAGE,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	}
	if edit != nil {
		edit(p)
	}
	t := awsdynamodb.NewTable(scope, jsii.String(id), p)
	if pending == nil {
		pending = &awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String("pending"),
			PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String("pending_shard"), Type: awsdynamodb.AttributeType_STRING},
			SortKey:        &awsdynamodb.Attribute{Name: jsii.String("pending_since"), Type: awsdynamodb.AttributeType_NUMBER},
			ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
		}
	}
	if pending.IndexName != nil {
		t.AddGlobalSecondaryIndex(pending)
	}
	return t
}

// everyTableReference is every place of the template that names oncehook's table: each
// function's TABLE_NAME, each policy resource on a table, its stream or its index, the stream
// mapping's source, the table alarms' dimension and the TableName output, rendered.
func everyTableReference(t *testing.T, tpl assertions.Template) []string {
	t.Helper()
	var refs []string
	j := *tpl.ToJSON()
	for _, res := range j["Resources"].(map[string]any) {
		res := res.(map[string]any)
		p, _ := res["Properties"].(map[string]any)
		switch res["Type"] {
		case "AWS::Lambda::Function":
			refs = append(refs, "env "+render(p["Environment"].(map[string]any)["Variables"].(map[string]any)["TABLE_NAME"]))
		case "AWS::IAM::Policy":
			for _, st := range asSlice(p["PolicyDocument"].(map[string]any)["Statement"]) {
				for _, r := range listOf(st.(map[string]any)["Resource"]) {
					if s := render(r); strings.Contains(s, "dynamodb") || strings.Contains(s, "Table") || strings.Contains(s, "Claims") || strings.Contains(s, "claims") {
						refs = append(refs, "policy "+s)
					}
				}
			}
		case "AWS::Lambda::EventSourceMapping":
			if s := render(p["EventSourceArn"]); !strings.Contains(s, "OutboxRetries") {
				refs = append(refs, "stream "+s)
			}
		case "AWS::CloudWatch::Alarm":
			for _, d := range asSlice(p["Dimensions"]) {
				if d.(map[string]any)["Name"] == "TableName" {
					refs = append(refs, "alarm "+render(d.(map[string]any)["Value"]))
				}
			}
		}
	}
	for id, out := range j["Outputs"].(map[string]any) {
		if strings.Contains(id, "TableName") {
			refs = append(refs, "output "+render(out.(map[string]any)["Value"]))
		}
	}
	return refs
}

// TestAnAdoptedTableIsTheOneEverythingUses: with Props.Table.Existing, the construct creates no
// table, and every reference (the functions' TABLE_NAME, every grant, the stream mapping, the
// alarms, the output) is to the adopted table, whether it is defined beside the construct, in
// another stack (a cross-stack reference), or imported by its attributes.
func TestAnAdoptedTableIsTheOneEverythingUses(t *testing.T) {
	for _, c := range []struct {
		name   string
		adopt  func(app awscdk.App, s awscdk.Stack) awsdynamodb.ITable
		tables float64 // in S's template
		want   string  // in every reference
	}{
		{"a table beside the construct", func(_ awscdk.App, s awscdk.Stack) awsdynamodb.ITable { return claimsTable(s, "Claims", nil, nil) }, 1, "Claims"},
		{"a table of another stack", func(app awscdk.App, _ awscdk.Stack) awsdynamodb.ITable {
			return claimsTable(awscdk.NewStack(app, jsii.String("State"), nil), "Claims", nil, nil)
		}, 0, "import:State:ExportsOutput"},
		{"a table of another stack, under a customer-managed key", func(app awscdk.App, _ awscdk.Stack) awsdynamodb.ITable {
			return claimsTable(awscdk.NewStack(app, jsii.String("State"), nil), "Claims", func(t *awsdynamodb.TableProps) {
				t.Encryption = awsdynamodb.TableEncryption_CUSTOMER_MANAGED
			}, nil)
		}, 0, "import:State:ExportsOutput"},
		{"a TableV2 of another stack", func(app awscdk.App, _ awscdk.Stack) awsdynamodb.ITable {
			return awsdynamodb.NewTableV2(awscdk.NewStack(app, jsii.String("State"), nil), jsii.String("Claims"), &awsdynamodb.TablePropsV2{
				PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
				SortKey:             &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
				TimeToLiveAttribute: jsii.String("expires_at"),
				DynamoStream:        awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
				GlobalSecondaryIndexes: &[]*awsdynamodb.GlobalSecondaryIndexPropsV2{{
					IndexName:    jsii.String("pending"),
					PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pending_shard"), Type: awsdynamodb.AttributeType_STRING},
					SortKey:      &awsdynamodb.Attribute{Name: jsii.String("pending_since"), Type: awsdynamodb.AttributeType_NUMBER},
				}},
			})
		}, 0, "import:State:ExportsOutput"},
		{"a table imported by its attributes", func(_ awscdk.App, s awscdk.Stack) awsdynamodb.ITable {
			return awsdynamodb.Table_FromTableAttributes(s, jsii.String("Claims"), &awsdynamodb.TableAttributes{
				TableName:      jsii.String("claims-prod"),
				TableStreamArn: jsii.String("arn:aws:dynamodb:us-east-1:111111111111:table/claims-prod/stream/2026-01-01T00:00:00.000"),
			})
		}, 0, "claims-prod"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var adopted awsdynamodb.ITable
			tpl, o, err := inApp(nil, func(app awscdk.App, s awscdk.Stack) *Props {
				p := prebuilt("arm64")
				adopted = c.adopt(app, s)
				p.Table.Existing = adopted
				p.Sweeper.AuditPrefixes = []string{"ORDER#"} // the sweeper's Scan too
				return p
			})
			if err != nil {
				t.Fatal(err)
			}
			tpl.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(c.tables))
			tpl.ResourceCountIs(jsii.String("AWS::DynamoDB::GlobalTable"), jsii.Number(0))
			refs := everyTableReference(t, tpl)
			kinds := map[string]int{}
			for _, r := range refs {
				kinds[strings.Fields(r)[0]]++
				if !strings.Contains(r, c.want) || strings.Contains(r, "OncehookTable") {
					t.Errorf("%s: not the adopted table", r)
				}
			}
			// Three functions; the receiver's, the outbox's, the sweeper's table and index
			// grants and the stream's; two table alarms; one output.
			if kinds["env"] != 3 || kinds["policy"] < 5 || kinds["stream"] != 1 || kinds["alarm"] != 2 || kinds["output"] != 1 {
				t.Errorf("references %v:\n%s", kinds, strings.Join(refs, "\n"))
			}
			if o.Table != adopted {
				t.Error("Oncehook.Table is not the adopted table")
			}
		})
	}
}

// TestAnImportedTableIsSaidToBeUnchecked: the synth cannot read an imported table's settings,
// and says so (cdk synth's info), naming what it must have; a table of the app is not.
func TestAnImportedTableIsSaidToBeUnchecked(t *testing.T) {
	info := func(adopt func(awscdk.Stack) awsdynamodb.ITable) bool {
		app := awscdk.NewApp(nil)
		s := awscdk.NewStack(app, jsii.String("S"), nil)
		p := prebuilt("arm64")
		p.Table.Existing = adopt(s)
		New(s, "Oncehook", p)
		msgs := assertions.Annotations_FromStack(s).FindInfo(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("Props.Table.Existing is imported.*pending index.*Adopting a table")))
		return len(*msgs) > 0
	}
	if !info(func(s awscdk.Stack) awsdynamodb.ITable {
		return awsdynamodb.Table_FromTableAttributes(s, jsii.String("T"), &awsdynamodb.TableAttributes{TableName: jsii.String("claims"),
			TableStreamArn: jsii.String("arn:aws:dynamodb:us-east-1:111111111111:table/claims/stream/x")})
	}) {
		t.Error("an imported table synthesizes without saying what it must have")
	}
	if info(func(s awscdk.Stack) awsdynamodb.ITable { return claimsTable(s, "T", nil, nil) }) {
		t.Error("a table the synth checked is said to be unchecked")
	}
}

// TestAnAdoptedTableThatCannotWorkFailsTheSynth: a table without what the code needs, checked
// where the synth can read it, and props that configure a table the construct no longer
// creates, each refused naming the prop.
func TestAnAdoptedTableThatCannotWorkFailsTheSynth(t *testing.T) {
	env := &awscdk.Environment{Account: jsii.String("111111111111"), Region: jsii.String("us-east-1")}
	noIndex := &awsdynamodb.GlobalSecondaryIndexProps{}
	for _, c := range []struct {
		name  string
		set   func(s awscdk.Stack, p *Props)
		wants []string
	}{
		{"a table without a stream", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = awsdynamodb.Table_FromTableName(s, jsii.String("T"), jsii.String("claims"))
		}, []string{"Props.Table.Existing: has no stream", "TableStreamArn"}},
		{"a stream of keys only", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", func(t *awsdynamodb.TableProps) { t.Stream = awsdynamodb.StreamViewType_KEYS_ONLY }, nil)
		}, []string{"Props.Table.Existing S/T", "its stream is KEYS_ONLY"}},
		{"a stream of old images", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", func(t *awsdynamodb.TableProps) { t.Stream = awsdynamodb.StreamViewType_OLD_IMAGE }, nil)
		}, []string{"its stream is OLD_IMAGE"}},
		{"another key", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", func(t *awsdynamodb.TableProps) {
				t.PartitionKey = &awsdynamodb.Attribute{Name: jsii.String("id"), Type: awsdynamodb.AttributeType_STRING}
			}, nil)
		}, []string{"its key is not pk (string) and sk (string)"}},
		{"a sort key of numbers", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", func(t *awsdynamodb.TableProps) {
				t.SortKey = &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_NUMBER}
			}, nil)
		}, []string{"its key is not pk (string) and sk (string)"}},
		{"no sort key", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", func(t *awsdynamodb.TableProps) { t.SortKey = nil }, nil)
		}, []string{"its key is not pk"}},
		{"no TTL", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", func(t *awsdynamodb.TableProps) { t.TimeToLiveAttribute = nil }, nil)
		}, []string{"its TTL is not on expires_at"}},
		{"TTL on another attribute", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", func(t *awsdynamodb.TableProps) { t.TimeToLiveAttribute = jsii.String("ttl") }, nil)
		}, []string{"its TTL is not on expires_at"}},
		{"no pending index", func(s awscdk.Stack, p *Props) { p.Table.Existing = claimsTable(s, "T", nil, noIndex) },
			[]string{"it has no pending index"}},
		{"a pending index of other keys", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", nil, &awsdynamodb.GlobalSecondaryIndexProps{IndexName: jsii.String("pending"),
				PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pending_shard"), Type: awsdynamodb.AttributeType_STRING},
				SortKey:      &awsdynamodb.Attribute{Name: jsii.String("pending_since"), Type: awsdynamodb.AttributeType_STRING}})
		}, []string{"its pending index is not keyed pending_shard (string) and pending_since (number)"}},
		{"everything wrong at once, each said", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", func(t *awsdynamodb.TableProps) {
				t.PartitionKey, t.Stream, t.TimeToLiveAttribute = &awsdynamodb.Attribute{Name: jsii.String("id"), Type: awsdynamodb.AttributeType_STRING}, awsdynamodb.StreamViewType_KEYS_ONLY, nil
			}, noIndex)
		}, []string{"its key", "its stream is KEYS_ONLY", "its TTL", "no pending index"}},
		{"a TableV2 without TTL", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = awsdynamodb.NewTableV2(s, jsii.String("T"), &awsdynamodb.TablePropsV2{
				PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
				SortKey:      &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
				DynamoStream: awsdynamodb.StreamViewType_NEW_IMAGE,
			})
		}, []string{"its TTL is not on expires_at", "no pending index"}},
		{"a TableV2 with a stream of keys only", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = awsdynamodb.NewTableV2(s, jsii.String("T"), &awsdynamodb.TablePropsV2{
				PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
				SortKey:             &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
				TimeToLiveAttribute: jsii.String("expires_at"),
				DynamoStream:        awsdynamodb.StreamViewType_KEYS_ONLY,
			})
		}, []string{"its stream is KEYS_ONLY", "no pending index"}},
		{"a table of another Region", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = awsdynamodb.Table_FromTableAttributes(s, jsii.String("T"), &awsdynamodb.TableAttributes{
				TableArn:       jsii.String("arn:aws:dynamodb:eu-west-1:111111111111:table/claims"),
				TableStreamArn: jsii.String("arn:aws:dynamodb:eu-west-1:111111111111:table/claims/stream/x"),
			})
		}, []string{"Props.Table.Existing: is in account 111111111111, Region eu-west-1", "the stack's account and Region"}},
		{"a table of another account", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = awsdynamodb.Table_FromTableAttributes(s, jsii.String("T"), &awsdynamodb.TableAttributes{
				TableArn:       jsii.String("arn:aws:dynamodb:us-east-1:222222222222:table/claims"),
				TableStreamArn: jsii.String("arn:aws:dynamodb:us-east-1:222222222222:table/claims/stream/x"),
			})
		}, []string{"Props.Table.Existing: is in account 222222222222"}},
		{"a logical id for a table the construct does not create", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", nil, nil)
			p.Table.LogicalID = "OncehookTable897AE32D"
		}, []string{"Props.Table.LogicalID", "Props.Table.Existing it creates none"}},
		{"an encryption for a table the construct does not create", func(s awscdk.Stack, p *Props) {
			p.Table.Existing = claimsTable(s, "T", nil, nil)
			p.Table.Encryption = awsdynamodb.TableEncryption_CUSTOMER_MANAGED
			p.Table.Key = awskms.NewKey(s, jsii.String("K"), nil)
		}, []string{"Props.Table.Encryption and Props.Table.Key", "EncryptionKey"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := inApp(env, func(_ awscdk.App, s awscdk.Stack) *Props {
				p := prebuilt("arm64")
				c.set(s, p)
				return p
			})
			for _, want := range c.wants {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %v, want %q", err, want)
				}
			}
		})
	}
}

// TestAnAdoptedTableSurvivesRenamingTheConstruct: the table of a stateful stack, adopted, is
// untouched when the construct is renamed or moved: the stateful stack's template is the same,
// and so is the table's dedup history.
func TestAnAdoptedTableSurvivesRenamingTheConstruct(t *testing.T) {
	state := func(name string) map[string]any {
		app := awscdk.NewApp(nil)
		st := awscdk.NewStack(app, jsii.String("State"), nil)
		table := claimsTable(st, "Claims", nil, nil)
		s := awscdk.NewStack(app, jsii.String("S"), nil)
		p := prebuilt("arm64")
		p.Table.Existing = table
		New(s, name, p)
		return *assertions.Template_FromStack(st, nil).ToJSON()
	}
	if was, now := state("Oncehook"), state("Webhooks"); !reflect.DeepEqual(was, now) {
		t.Errorf("renaming the construct changed the stateful stack:\n was %v\n now %v", was, now)
	}
}

// TestAnAdoptedTableUnderACustomerManagedKeyIsUsableThroughDynamoDBOnly: the key of an adopted
// table is granted to each function as the construct's own table's is: through DynamoDB only
// (the stream event source's own read of the stream aside).
func TestAnAdoptedTableUnderACustomerManagedKeyIsUsableThroughDynamoDBOnly(t *testing.T) {
	const keyArn = "arn:aws:kms:us-east-1:111111111111:key/claims"
	tpl, _, err := inApp(nil, func(_ awscdk.App, s awscdk.Stack) *Props {
		p := prebuilt("arm64")
		key := awskms.Key_FromKeyArn(s, jsii.String("K"), jsii.String(keyArn))
		p.Table.Existing = awsdynamodb.Table_FromTableAttributes(s, jsii.String("T"), &awsdynamodb.TableAttributes{TableName: jsii.String("claims"),
			TableStreamArn: jsii.String("arn:aws:dynamodb:us-east-1:111111111111:table/claims/stream/x"), EncryptionKey: key})
		return p
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"Receiver", "Outbox", "Sweeper"} {
		granted := false
		for _, res := range *tpl.FindResources(jsii.String("AWS::IAM::Policy"), nil) {
			p := (*res)["Properties"].(map[string]any)
			if !strings.HasPrefix(render(p["Roles"].([]any)[0]), "Oncehook"+fn+"Role") {
				continue
			}
			for _, st := range asSlice(p["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				actions := fmt.Sprint(st["Action"])
				if !strings.Contains(actions, "kms:") || render(st["Resource"]) != keyArn {
					continue
				}
				if fn == "Outbox" && actions == "[kms:Decrypt kms:DescribeKey]" {
					continue // the stream event source's own grant: Lambda reads the stream with the role
				}
				if !strings.Contains(fmt.Sprint(st["Condition"]), "dynamodb.") {
					t.Errorf("%s: %s on the adopted table's key without kms:ViaService dynamodb: %v", fn, actions, st["Condition"])
				}
				granted = granted || strings.Contains(actions, "kms:Decrypt")
			}
		}
		if !granted {
			t.Errorf("%s may not use the adopted table's key", fn)
		}
	}
}
