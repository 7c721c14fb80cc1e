package infra

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// dashboardWidgets is the dashboard's widgets as CloudWatch reads them, each token the body
// refers to (an ARN, a function name) written "TOKEN".
func dashboardWidgets(t *testing.T, tpl assertions.Template) []map[string]any {
	t.Helper()
	for _, res := range *tpl.FindResources(jsii.String("AWS::CloudWatch::Dashboard"), nil) {
		body := (*res)["Properties"].(map[string]any)["DashboardBody"]
		var text strings.Builder
		if j, ok := body.(map[string]any)["Fn::Join"].([]any); ok {
			for _, part := range asSlice(j[1]) {
				if s, ok := part.(string); ok {
					text.WriteString(s)
				} else {
					text.WriteString("TOKEN")
				}
			}
		} else {
			text.WriteString(body.(string))
		}
		var d struct {
			Widgets []map[string]any `json:"widgets"`
		}
		if err := json.Unmarshal([]byte(text.String()), &d); err != nil {
			t.Fatalf("dashboard body: %v", err)
		}
		return d.Widgets
	}
	t.Fatal("no dashboard")
	return nil
}

// charted counts the dashboard's metrics as "namespace name dim1,dim2".
func charted(widgets []map[string]any) map[string]int {
	out := map[string]int{}
	for _, w := range widgets {
		props, _ := w["properties"].(map[string]any)
		for _, m := range asSlice(props["metrics"]) {
			m := asSlice(m)
			var dims []string
			for i := 2; i+1 < len(m); i += 2 {
				if n, ok := m[i].(string); ok {
					dims = append(dims, n)
				}
			}
			out[fmt.Sprintf("%v %v %s", m[0], m[1], strings.Join(dims, ","))]++
		}
	}
	return out
}

// TestTheDashboardShowsWhatAnOperatorLooksAtFirst: every alarm's state, each function's
// errors, throttles and duration, the API's 4xx, 5xx and latency, the failure queue's depth
// and each source's unknown types; the leak audit only where there is one.
func TestTheDashboardShowsWhatAnOperatorLooksAtFirst(t *testing.T) {
	widgets := dashboardWidgets(t, synth.tpl)
	inStatus := 0
	for _, w := range widgets {
		if w["type"] == "alarm" {
			inStatus += len(asSlice(w["properties"].(map[string]any)["alarms"]))
		}
	}
	if inStatus != len(synth.o.Alarms) {
		t.Errorf("the alarm status widgets show %d alarms, the construct has %d", inStatus, len(synth.o.Alarms))
	}
	got := charted(widgets)
	ns := synth.o.MetricsNamespace
	for metric, n := range map[string]int{
		"AWS/Lambda Errors FunctionName":                       3,
		"AWS/Lambda Throttles FunctionName":                    3,
		"AWS/Lambda Duration FunctionName":                     3,
		"AWS/ApiGateway 4xx ApiId":                             1,
		"AWS/ApiGateway 5xx ApiId":                             1,
		"AWS/ApiGateway Latency ApiId":                         1,
		"AWS/SQS ApproximateNumberOfMessagesVisible QueueName": 1,
		ns + " UnknownType source":                             len(synth.o.Sources.Names()),
		ns + " Probed source":                                  len(synth.o.Sources.Names()),
		ns + " IntentsPaused target":                           1,
	} {
		if got[metric] < n {
			t.Errorf("the dashboard charts %q %d times, want %d", metric, got[metric], n)
		}
	}
	if got[ns+" EffectsAudited "]+got[ns+" EffectsWithoutClaim "] != 0 {
		t.Error("the dashboard charts the leak audit of a deployment without one")
	}
	p := prebuilt("arm64")
	p.Sweeper.AuditPrefixes = []string{"ORDER#"}
	p.Telemetry.MetricsNamespace = ns
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := charted(dashboardWidgets(t, tpl)); got[ns+" EffectsAudited "] == 0 || got[ns+" EffectsWithoutClaim "] == 0 {
		t.Errorf("with the audit on the dashboard has no audit graph: %v", got)
	}
}
