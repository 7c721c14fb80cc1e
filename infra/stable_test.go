package infra

import (
	"sort"
	"strings"
	"testing"
)

// TestTheLogicalIDsOfWhatHoldsStateAreStable pins the logical ids of the resources whose
// replacement loses something: the table (its dedup history: a redrive after a replacement
// runs every event again), the queues (wake-ups and given-up records), the alarm topic (its
// subscriptions), the log groups, the API (the URL every provider is configured with) and the
// stream mapping (a new one starts again at TRIM_HORIZON). A refactor of the construct that
// changes one of these ids replaces that resource on the next deploy; the ids follow the
// construct's path, so renaming the construct does too (Props.ExistingTable adopts the old
// table then: docs/stack.md).
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
