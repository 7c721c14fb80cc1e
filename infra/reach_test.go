package infra

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/sources"
)

// TestTheAlarmTopicLetsThisAccountsCloudWatchPublish: a topic policy replaces SNS's default
// one, so without an Allow for CloudWatch every alarm fires into a topic that drops it.
func TestTheAlarmTopicLetsThisAccountsCloudWatchPublish(t *testing.T) {
	found := false
	for _, res := range *synth.tpl.FindResources(jsii.String("AWS::SNS::TopicPolicy"), nil) {
		for _, st := range asSlice((*res)["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			if st["Effect"] != "Allow" || fmt.Sprint(st["Principal"]) != "map[Service:cloudwatch.amazonaws.com]" || st["Action"] != "sns:Publish" {
				continue
			}
			cond := render(st["Condition"])
			if !strings.Contains(cond, "aws:SourceArn") || !strings.Contains(cond, ":cloudwatch:") || !strings.Contains(cond, "aws:SourceAccount") {
				t.Errorf("CloudWatch's Allow is not held to this account's alarms: %s", cond)
			}
			found = true
		}
	}
	if !found {
		t.Error("the alarm topic's policy does not allow cloudwatch.amazonaws.com to publish: alarms would fire and send nothing")
	}
}

// TestEveryFailureSignalAlarmsAtAnyVolume: for every source, its 500s and 503s, and for the
// API its 5xx, are alarmed by a count that no volume gate holds back: every metric FILLed
// (neither is written as 0), no IF(), firing on one failure in each of two periods, within an
// hour (a provider's first retries). For every target, its retries page before its intents
// park (about 30 minutes).
func TestEveryFailureSignalAlarmsAtAnyVolume(t *testing.T) {
	all := alarmsByID(t)
	counts := func(metric, dimValue string) (gated, ungated []string) {
		for id, p := range all {
			ids := map[string]bool{}
			expr := ""
			for _, m := range asSlice(p["Metrics"]) {
				m := m.(map[string]any)
				if e, ok := m["Expression"].(string); ok {
					expr = e
					continue
				}
				metricDef := m["MetricStat"].(map[string]any)["Metric"].(map[string]any)
				if metricDef["MetricName"] == metric && (dimValue == "" || strings.Contains(render(metricDef["Dimensions"]), dimValue)) {
					ids[m["Id"].(string)] = true
				}
			}
			if len(ids) == 0 {
				continue
			}
			ok := !strings.Contains(expr, "IF(") && p["ComparisonOperator"] == "GreaterThanThreshold" && p["Threshold"] == 0.0
			for mid := range ids {
				ok = ok && regexp.MustCompile(`FILL\(`+mid+`, 0\)`).MatchString(expr)
			}
			window := p["DatapointsToAlarm"].(float64) * period(p)
			ok = ok && p["DatapointsToAlarm"].(float64) <= 2 && p["EvaluationPeriods"].(float64)*period(p) <= 3600 && window <= 3600
			if ok {
				ungated = append(ungated, id)
			} else {
				gated = append(gated, id)
			}
		}
		return
	}
	for _, name := range synth.o.Sources.Names() {
		for _, metric := range []string{"Failed", "Unavailable"} {
			if _, ungated := counts(metric, name); len(ungated) == 0 {
				t.Errorf("source %s: no alarm counts %s at any volume", name, metric)
			}
		}
	}
	if _, ungated := counts("5xx", ""); len(ungated) == 0 {
		t.Error("the API's 5xx: no alarm at any volume")
	}
	targets := append(sortedKeys(synth.o.Sources.Targets), sortedKeys(Props{}.Outbox.Executors)...)
	if len(targets) == 0 {
		t.Fatal("the example has no targets: the retry alarms are untested")
	}
	for _, tgt := range targets {
		found := false
		for id, p := range all {
			if m := fmt.Sprint(p["Metrics"]); !strings.Contains(m, "IntentsRetried") || !strings.Contains(m, "Name:target Value:"+tgt+"]") {
				continue
			}
			if w := p["DatapointsToAlarm"].(float64) * period(p); w >= 30*60 {
				t.Errorf("%s: pages after %v s, when the intents have parked", id, w)
			}
			found = true
		}
		if !found {
			t.Errorf("target %s: no alarm on its retries: an outage pages nobody until its intents park", tgt)
		}
	}
}

func period(p map[string]any) float64 {
	if v, ok := p["Period"].(float64); ok {
		return v
	}
	for _, m := range asSlice(p["Metrics"]) {
		if stat, ok := m.(map[string]any)["MetricStat"].(map[string]any); ok {
			return stat["Period"].(float64)
		}
		if v, ok := m.(map[string]any)["Period"].(float64); ok {
			return v
		}
	}
	return 0
}

// TestTheReceiverMayWriteEveryEffectKindOnTheTable walks the API's effect kinds (the
// sources file's table actions: put, update, delete, check) against the receiver's policy.
func TestTheReceiverMayWriteEveryEffectKindOnTheTable(t *testing.T) {
	pairs, _ := policyPairs(synth.tpl, "OncehookReceiverRole")
	if len(sources.TableActions) < 4 {
		t.Fatalf("%d effect kinds", len(sources.TableActions))
	}
	for kind, action := range sources.TableActions {
		if !slices.Contains(pairs, action+" OncehookTable.Arn") {
			t.Errorf("a %s effect on oncehook's table needs %s, which the receiver is not granted: %v", kind, action, pairs)
		}
	}
}

// TestEachDeploymentHasItsOwnNamespace: two deployments in one account never share a
// namespace by default, and the functions write in the one the alarms read.
func TestEachDeploymentHasItsOwnNamespace(t *testing.T) {
	seen := map[string]string{}
	for _, stack := range []string{"Staging", "Production"} {
		app := awscdk.NewApp(nil)
		s := awscdk.NewStack(app, jsii.String(stack), nil)
		o := New(s, "Webhooks", prebuilt("arm64"))
		if prev, dup := seen[o.MetricsNamespace]; dup {
			t.Errorf("%s and %s share the namespace %s", prev, stack, o.MetricsNamespace)
		}
		seen[o.MetricsNamespace] = stack
		if !validNamespace(o.MetricsNamespace) {
			t.Errorf("%s: namespace %q is not one CloudWatch takes", stack, o.MetricsNamespace)
		}
		tpl := assertions.Template_FromStack(s, nil)
		for _, res := range *tpl.FindResources(jsii.String("AWS::Lambda::Function"), nil) {
			vars := (*res)["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
			if vars["METRICS_NAMESPACE"] != o.MetricsNamespace {
				t.Errorf("%s: a function writes in %v, the alarms read %s", stack, vars["METRICS_NAMESPACE"], o.MetricsNamespace)
			}
		}
	}
	if got := defaultNamespace("a b/é" + strings.Repeat("x", 300)); !validNamespace(got) {
		t.Errorf("defaultNamespace made %q", got)
	}
}

// TestTheSweeperIsNeitherRetriedNorQueued: Lambda's async defaults (2 retries, 6 hours) queue
// throttled runs behind its reserved concurrency of 1.
func TestTheSweeperIsNeitherRetriedNorQueued(t *testing.T) {
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), props(map[string]any{
			"FunctionName":             map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^OncehookSweeper"))},
			"MaximumRetryAttempts":     0,
			"MaximumEventAgeInSeconds": 60,
		}))
	})
}

// TestTheRetryQueueCannotTakeTheReceiversConcurrency: the wake-up mapping is capped, 5 by
// default, and a cap Lambda refuses fails the synth naming the prop.
func TestTheRetryQueueCannotTakeTheReceiversConcurrency(t *testing.T) {
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), props(map[string]any{
			"EventSourceArn": map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^OncehookOutboxRetries")), "Arn"}},
			"ScalingConfig":  map[string]any{"MaximumConcurrency": 5},
		}))
	})
	for _, bad := range []float64{1, -3, 1001} {
		p := prebuilt("arm64")
		p.Outbox.RetryConcurrency = bad
		if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), "Props.Outbox.RetryConcurrency") {
			t.Errorf("RetryConcurrency %v: got %v", bad, err)
		}
	}
}

// TestTheTableKeyIsUsableOnlyThroughDynamoDB: each function's grant on a customer-managed
// table key carries kms:ViaService dynamodb, as the secrets' keys carry theirs.
func TestTheTableKeyIsUsableOnlyThroughDynamoDB(t *testing.T) {
	tpl, err := synthesize(func() *Props {
		p := prebuilt("arm64")
		p.Table.Encryption = awsdynamodb.TableEncryption_CUSTOMER_MANAGED
		return p
	}())
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"Receiver", "Outbox", "Sweeper"} {
		for _, res := range *tpl.FindResources(jsii.String("AWS::IAM::Policy"), nil) {
			p := (*res)["Properties"].(map[string]any)
			if !strings.HasPrefix(render(p["Roles"].([]any)[0]), "Oncehook"+fn+"Role") {
				continue
			}
			for _, st := range asSlice(p["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				actions := fmt.Sprint(st["Action"])
				if fn == "Outbox" && actions == "[kms:Decrypt kms:DescribeKey]" {
					continue // the stream event source's own grant: Lambda reads the stream with the role
				}
				if strings.Contains(actions, "kms:") && !strings.Contains(fmt.Sprint(st["Condition"]), "dynamodb.") {
					t.Errorf("%s: %s on the table key without kms:ViaService dynamodb: %v", fn, actions, st["Condition"])
				}
			}
		}
	}
}

// TestTheAlarmsReachSomeone: subscriptions from the props, a warning when there are none, the
// outputs an operator looks up, and addresses that cannot work refused at synth.
func TestTheAlarmsReachSomeone(t *testing.T) {
	var o *Oncehook
	tpl, err := synthesizeWith(func(s awscdk.Stack) *Props {
		p := prebuilt("arm64")
		p.Alarms.Emails = []string{"oncall@example.com"}
		p.Alarms.HttpsEndpoints = []string{"https://events.pagerduty.com/integration/x/enqueue"}
		return p
	}, &o)
	if err != nil {
		t.Fatal(err)
	}
	tpl.ResourceCountIs(jsii.String("AWS::SNS::Subscription"), jsii.Number(2))
	for _, proto := range []string{"email", "https"} {
		must(t, func() {
			tpl.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), props(map[string]any{"Protocol": proto,
				"TopicArn": map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^OncehookAlarms"))}}))
		})
	}
	outputs := render(*tpl.FindOutputs(jsii.String("*"), nil))
	for _, want := range []string{"TableName", "AlarmTopicArn", "FailureQueueUrl", "DashboardUrl"} {
		if !strings.Contains(outputs, want) {
			t.Errorf("no output %s: %s", want, outputs)
		}
	}
	warned := func(p *Props) bool {
		app := awscdk.NewApp(nil)
		s := awscdk.NewStack(app, jsii.String("W"), nil)
		New(s, "Oncehook", p)
		msgs := assertions.Annotations_FromStack(s).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("nothing is subscribed")))
		return len(*msgs) > 0
	}
	if !warned(prebuilt("arm64")) {
		t.Error("a stack whose alarms reach nobody synthesizes without a warning")
	}
	p := prebuilt("arm64")
	p.Alarms.Emails = []string{"oncall@example.com"}
	if warned(p) {
		t.Error("a subscribed stack is warned")
	}
	for _, bad := range []*Props{{Alarms: AlarmProps{Emails: []string{"oncall"}}}, {Alarms: AlarmProps{Emails: []string{"a@b.c, d@e.f"}}}, {Alarms: AlarmProps{HttpsEndpoints: []string{"http://pager.example.com/x"}}}, {Alarms: AlarmProps{HttpsEndpoints: []string{"pager"}}}} {
		p := prebuilt("arm64")
		p.Alarms.Emails, p.Alarms.HttpsEndpoints = bad.Alarms.Emails, bad.Alarms.HttpsEndpoints
		if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), "Props.Alarm") {
			t.Errorf("%v %v: got %v", bad.Alarms.Emails, bad.Alarms.HttpsEndpoints, err)
		}
	}
}

// TestARefusedAlarmEndpointShowsOnlyItsSchemeAndHost: an integration's URL often carries its key
// in its path, query or userinfo (PagerDuty's, a chat webhook's), and the synth's error is
// kept by CI logs and build output. A Props.Alarms.HttpsEndpoints entry SNS would refuse is
// refused naming the entry by its scheme and host alone, as is an OpenTelemetry endpoint.
//
// The space: entries the synth refuses (no scheme, http, a misspelt scheme, a bad escape, a
// space in the host), each with the key in its path, its query or its userinfo.
func TestARefusedAlarmEndpointShowsOnlyItsSchemeAndHost(t *testing.T) {
	const key = "R0f9c1d2e3SECRETKEY"
	var cases []string
	for _, prefix := range []string{"", "http://", "htps://", "https:/"} {
		for _, rest := range []string{
			"events.pagerduty.com/integration/" + key + "/enqueue",
			"hooks.chat.example/alert?token=" + key,
			"user:" + key + "@hooks.chat.example/alert",
		} {
			cases = append(cases, prefix+rest)
		}
	}
	cases = append(cases, "https://hooks.chat.example/"+key+"/%zz", "https://hooks chat.example/alert?token="+key)
	for _, endpoint := range cases {
		_, _, _, err := configure(&Props{SourcesFile: "../examples/sources.json", Alarms: AlarmProps{HttpsEndpoints: []string{"https://ok.example/x", endpoint}}})
		if err == nil {
			t.Errorf("%q accepted", endpoint)
			continue
		}
		if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "Props.Alarms.HttpsEndpoints[1]") {
			t.Errorf("%q refused as %v: want it named by its index, its key not shown", endpoint, err)
		}
	}
	_, _, _, err := configure(&Props{SourcesFile: "../examples/sources.json", Alarms: AlarmProps{HttpsEndpoints: []string{"http://events.pagerduty.com/integration/" + key + "/enqueue"}}})
	if err == nil || !strings.Contains(err.Error(), "http://events.pagerduty.com/…") {
		t.Errorf("got %v, want the entry shown by its scheme and host", err)
	}
}
