package infra

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestTheLogicalIDsOfWhatHoldsStateAreStable pins the logical ids of the resources whose
// replacement loses something: the table (its dedup history: a redrive after a replacement
// runs every event again), the queues (wake-ups and given-up records), the alarm topic (its
// subscriptions), the log groups, the API (the URL every provider is configured with) and the
// stream mapping (a new one starts again at TRIM_HORIZON). A refactor of the construct that
// changes one of these ids replaces that resource on the next deploy; the ids follow the
// construct's path, so renaming the construct does too (Props.Table.LogicalID keeps the old
// table's then: docs/stack.md).
func TestTheLogicalIDsOfWhatHoldsStateAreStable(t *testing.T) {
	pinned := map[string]string{
		"OncehookTable897AE32D":                                             "AWS::DynamoDB::Table",
		"OncehookOutboxFailures84F799F2":                                    "AWS::SQS::Queue",
		"OncehookOutboxRetriesE0A72DF9":                                     "AWS::SQS::Queue",
		"OncehookAlarms5C515302":                                            "AWS::SNS::Topic",
		"OncehookApiCA52FEF3":                                               "AWS::ApiGatewayV2::Api",
		"OncehookApiDefaultStageD3708719":                                   "AWS::ApiGatewayV2::Stage",
		"OncehookApiAccessLogsA06EF0CD":                                     "AWS::Logs::LogGroup",
		"OncehookReceiverLogs27BF39B6":                                      "AWS::Logs::LogGroup",
		"OncehookOutboxLogs0435D49C":                                        "AWS::Logs::LogGroup",
		"OncehookSweeperLogsFAB55B76":                                       "AWS::Logs::LogGroup",
		"OncehookOutboxDynamoDBEventSourceOncehookTable190881232C18B345":    "AWS::Lambda::EventSourceMapping",
		"OncehookOutboxSqsEventSourceOncehookOutboxRetriesDD530176AC56016F": "AWS::Lambda::EventSourceMapping",
	}
	resources := (*synth.tpl.ToJSON())["Resources"].(map[string]any)
	var missing []string
	for id, typ := range pinned {
		res, ok := resources[id].(map[string]any)
		if !ok || res["Type"] != typ {
			missing = append(missing, id+" ("+typ+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		var have []string
		for id, res := range resources {
			if typ := res.(map[string]any)["Type"].(string); strings.Contains(strings.Join(uniqueTypes(pinned), " "), typ) {
				have = append(have, id+" ("+typ+")")
			}
		}
		sort.Strings(have)
		t.Errorf("these resources would be replaced on the next deploy:\n  %s\nthe template has\n  %s", strings.Join(missing, "\n  "), strings.Join(have, "\n  "))
	}
}

func uniqueTypes(m map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, typ := range m {
		if !seen[typ] {
			seen[typ] = true
			out = append(out, typ)
		}
	}
	return out
}

// TestARenamedConstructKeepsItsTable: renamed, the construct's table would get a new logical
// id, which CloudFormation replaces (a new, empty table: every redrive runs again). With
// Props.Table.LogicalID the old id is kept, and nothing else of the table changes; an id
// CloudFormation would refuse fails the synth naming the prop.
func TestARenamedConstructKeepsItsTable(t *testing.T) {
	tableID := func(tpl map[string]any) []string {
		var ids []string
		for id, res := range tpl["Resources"].(map[string]any) {
			if res.(map[string]any)["Type"] == "AWS::DynamoDB::Table" {
				ids = append(ids, id)
			}
		}
		return ids
	}
	before := tableID(*synth.tpl.ToJSON())
	if len(before) != 1 {
		t.Fatalf("tables %v", before)
	}
	p := prebuilt("arm64")
	renamed := func(p *Props) assertions.Template {
		stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), nil)
		New(stack, "Webhooks", p) // was "Oncehook"
		return assertions.Template_FromStack(stack, nil)
	}
	tpl := renamed(p)
	if got := tableID(*tpl.ToJSON()); got[0] == before[0] {
		t.Fatalf("the renamed construct's table kept %s without the prop: the test shows nothing", got[0])
	}
	p.Table.LogicalID = before[0]
	tpl = renamed(p)
	if got := tableID(*tpl.ToJSON()); len(got) != 1 || got[0] != before[0] {
		t.Errorf("with TableLogicalID %s the table is %v", before[0], got)
	}
	was := (*synth.tpl.ToJSON())["Resources"].(map[string]any)[before[0]].(map[string]any)["Properties"].(map[string]any)
	now := (*tpl.ToJSON())["Resources"].(map[string]any)[before[0]].(map[string]any)["Properties"].(map[string]any)
	if !reflect.DeepEqual(was, now) {
		t.Errorf("the adopted table's properties changed:\n was %v\n now %v", was, now)
	}
	for _, bad := range []string{"Old-Table", "has space", strings.Repeat("A", 256)} {
		p := prebuilt("arm64")
		p.Table.LogicalID = bad
		if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), "Props.Table.LogicalID") {
			t.Errorf("TableLogicalID %q: got %v", bad, err)
		}
	}
}
