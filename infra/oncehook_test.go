package infra

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// One synth serves every test: starting the jsii runtime and synthesizing take seconds.
var synth = struct {
	stack awscdk.Stack
	o     *Oncehook
	tpl   assertions.Template
	// bootstraps are tiny real Linux executables, one per architecture, for Code.Dir.
	bootstraps map[string]string
}{}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "oncehook-infra")
	if err != nil {
		panic(err)
	}
	synth.bootstraps = map[string]string{}
	for _, arch := range []string{"arm64", "amd64"} {
		synth.bootstraps[arch] = filepath.Join(dir, arch)
		if err := buildTiny(synth.bootstraps[arch], arch); err != nil {
			panic(err)
		}
	}
	app := awscdk.NewApp(nil)
	synth.stack = awscdk.NewStack(app, jsii.String("Oncehook"), nil)
	synth.o = New(synth.stack, "Oncehook", &Props{
		SourcesFile: "../examples/sources.json",
		Receiver:    ReceiverProps{Code: Code{Dir: synth.bootstraps["arm64"]}},
		Outbox:      OutboxProps{Code: Code{Dir: synth.bootstraps["arm64"]}},
		Sweeper:     SweeperProps{Code: Code{Dir: synth.bootstraps["arm64"]}},
	})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	synth.tpl = assertions.Template_FromStack(synth.stack, nil)
	code := m.Run()
	os.RemoveAll(dir)
	jsii.Close()
	os.Exit(code)
}

// buildTiny builds a do-nothing Linux executable for arch into dir/bootstrap.
func buildTiny(dir, arch string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "bootstrap"), src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return os.Remove(src)
}

func props(m map[string]any) *map[string]interface{} { p := map[string]interface{}(m); return &p }

// must turns a failed CDK assertion (a panic through jsii) into a test failure, so one failing
// assertion does not end the whole test binary.
func must(t *testing.T, assert func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Error(r)
		}
	}()
	assert()
}

func TestTheTableIsTheDesignsTable(t *testing.T) {
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), props(map[string]any{
			"KeySchema": []any{
				map[string]any{"AttributeName": "pk", "KeyType": "HASH"},
				map[string]any{"AttributeName": "sk", "KeyType": "RANGE"},
			},
			"BillingMode":                      "PAY_PER_REQUEST",
			"TimeToLiveSpecification":          map[string]any{"AttributeName": "expires_at", "Enabled": true},
			"StreamSpecification":              map[string]any{"StreamViewType": "NEW_IMAGE"},
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"DeletionProtectionEnabled":        true,
			"GlobalSecondaryIndexes": []any{map[string]any{
				"IndexName": "pending",
				"KeySchema": []any{
					map[string]any{"AttributeName": "pending_shard", "KeyType": "HASH"},
					map[string]any{"AttributeName": "pending_since", "KeyType": "RANGE"},
				},
				"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"},
			}},
		}))
	})
}

func TestFunctionsAreGoOnGraviton(t *testing.T) {
	must(t, func() {
		synth.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), props(map[string]any{
			"Runtime": "provided.al2023", "Handler": "bootstrap", "Architectures": []any{"arm64"},
		}), jsii.Number(3))
	})
}

// TestEachSourceHasItsOwnRoute: POST /hooks/<name> per source of the file and no catch-all, so
// API Gateway answers any other source 404 without starting the receiver.
func TestEachSourceHasItsOwnRoute(t *testing.T) {
	var keys []string
	for _, res := range *synth.tpl.FindResources(jsii.String("AWS::ApiGatewayV2::Route"), nil) {
		keys = append(keys, (*res)["Properties"].(map[string]any)["RouteKey"].(string))
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ", "); got != "POST /hooks/github, POST /hooks/shop, POST /hooks/stripe" {
		t.Errorf("routes %s, want one POST per source", got)
	}
	for name, url := range synth.o.WebhookUrls {
		if !strings.HasSuffix(*url, "/hooks/"+name) {
			t.Errorf("WebhookUrls[%s] = %s", name, *url)
		}
	}
	if len(synth.o.WebhookUrls) != 3 {
		t.Errorf("%d webhook URLs, want one per source", len(synth.o.WebhookUrls))
	}
}

// TestTheAccessLogSaysWhoCalledWhatAndWhatWasAnswered: one JSON object per request, with the
// fields an investigation needs.
func TestTheAccessLogSaysWhoCalledWhatAndWhatWasAnswered(t *testing.T) {
	for _, res := range *synth.tpl.FindResources(jsii.String("AWS::ApiGatewayV2::Stage"), nil) {
		settings := (*res)["Properties"].(map[string]any)["AccessLogSettings"].(map[string]any)
		var line map[string]string
		if err := json.Unmarshal([]byte(settings["Format"].(string)), &line); err != nil {
			t.Fatalf("the access log format is not a JSON object: %v", err)
		}
		for field, variable := range map[string]string{"ip": "$context.identity.sourceIp", "userAgent": "$context.identity.userAgent",
			"path": "$context.path", "routeKey": "$context.routeKey", "status": "$context.status", "latency": "$context.responseLatency",
			"integrationStatus": "$context.integrationStatus", "integrationLatency": "$context.integrationLatency",
			"error": "$context.error.message", "integrationError": "$context.integrationErrorMessage", "requestId": "$context.requestId"} {
			if line[field] != variable {
				t.Errorf("access log %s = %q, want %s", field, line[field], variable)
			}
		}
		if settings["DestinationArn"] == nil {
			t.Error("the access log has no destination")
		}
	}
}

func TestTheStreamMappingRetriesBoundedlyAndReportsItemFailures(t *testing.T) {
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), props(map[string]any{
			"StartingPosition":           "TRIM_HORIZON",
			"BatchSize":                  100,
			"BisectBatchOnFunctionError": true,
			"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
			"MaximumRetryAttempts":       5,
			"MaximumRecordAgeInSeconds":  21600,
			"DestinationConfig":          assertions.Match_ObjectLike(props(map[string]any{"OnFailure": assertions.Match_AnyValue()})),
			// Written out here, not taken from outbox.StreamFilterPatterns: this is what the
			// deployed mapping must say.
			"FilterCriteria": map[string]any{"Filters": []any{
				map[string]any{"Pattern": assertions.Match_SerializedJson(props(map[string]any{
					"eventName": []any{"INSERT"},
					"dynamodb":  map[string]any{"NewImage": map[string]any{"pending_shard": map[string]any{"S": []any{map[string]any{"exists": true}}}}},
				}))},
				map[string]any{"Pattern": assertions.Match_SerializedJson(props(map[string]any{
					"eventName": []any{"MODIFY"},
					"dynamodb":  map[string]any{"NewImage": map[string]any{"wake": map[string]any{"N": []any{map[string]any{"exists": true}}}}},
				}))},
			}},
		}))
	})
}

func TestRetriesAreWokenByADelayQueueTheOutboxConsumes(t *testing.T) {
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), props(map[string]any{
			"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^OncehookOutboxRetries")), "Arn"}},
			"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
		}))
	})
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), props(map[string]any{
			"Description": "oncehook outbox",
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(props(map[string]any{
				"RETRY_QUEUE_URL": map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^OncehookOutboxRetries"))},
				"LEASE_SECONDS":   "60",
			}))},
			// 100 records at once, calls of up to 10 s plus a 5 s margin: 20 s, and at least a minute.
			"Timeout": 60,
		}))
	})
}

// TestTheSweeperRunsOnAScheduleOneAtATime: every 2 minutes, a run that could not start is not
// retried late, and a second concurrent run cannot even start (reserved concurrency 1).
func TestTheSweeperRunsOnAScheduleOneAtATime(t *testing.T) {
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), props(map[string]any{
			"ScheduleExpression": "rate(2 minutes)",
			"Targets": []any{assertions.Match_ObjectLike(props(map[string]any{
				"Arn":         map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^OncehookSweeper[0-9A-F]{8}$")), "Arn"}},
				"RetryPolicy": map[string]any{"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60},
			}))},
		}))
	})
	// EventBridge may invoke the sweeper for this rule only.
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), props(map[string]any{
			"Action": "lambda:InvokeFunction", "Principal": "events.amazonaws.com",
			"FunctionName": map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^OncehookSweeper[0-9A-F]{8}$")), "Arn"}},
			"SourceArn":    map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^OncehookSweepSchedule")), "Arn"}},
		}))
	})
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), props(map[string]any{
			"Description": "oncehook sweeper", "ReservedConcurrentExecutions": 1,
		}))
	})
	p := prebuilt("arm64")
	p.Sweeper.Unreserved = true
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	for id, res := range *tpl.FindResources(jsii.String("AWS::Lambda::Function"), nil) {
		if c := (*res)["Properties"].(map[string]any)["ReservedConcurrentExecutions"]; c != nil {
			t.Errorf("UnreservedSweeper: %s still reserves %v", id, c)
		}
	}
}

// TestEachRoleHasExactlyTheActionsItsCodeIssuesOnExactlyItsResources reads every inline
// policy as (action, resource) pairs, the resources rendered from the template's references,
// and compares each function's with the calls its code was recorded making
// (launch/testdata/calls.json) and those Lambda's event sources make: an action or a resource
// more (or a wildcard) fails it, and so does a call the code makes that the role lacks.
func TestEachRoleHasExactlyTheActionsItsCodeIssuesOnExactlyItsResources(t *testing.T) {
	got := map[string][]string{}
	for _, res := range *synth.tpl.FindResources(jsii.String("AWS::IAM::Policy"), nil) {
		p := (*res)["Properties"].(map[string]any)
		role := render(p["Roles"].([]any)[0])
		for _, st := range asSlice(p["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			if st["Effect"] != "Allow" {
				t.Errorf("%s: a %v statement", role, st["Effect"])
			}
			for _, a := range listOf(st["Action"]) {
				for _, r := range listOf(st["Resource"]) {
					got[role] = append(got[role], render(a)+" "+render(r))
				}
			}
		}
	}
	// What each function's code calls, recorded from its requests by the launch package's test
	// (launch/testdata/calls.json), on the resource this stack gives it.
	raw, err := os.ReadFile("../launch/testdata/calls.json")
	if err != nil {
		t.Fatal(err)
	}
	var calls map[string][]string
	if err := json.Unmarshal(raw, &calls); err != nil {
		t.Fatal(err)
	}
	const (
		table = "OncehookTable.Arn"
		here  = "arn:${AWS::Partition}:%s:${AWS::Region}:${AWS::AccountId}:"
	)
	resources := map[string][]string{
		"dynamodb:GetItem": {table}, "dynamodb:BatchGetItem": {table}, "dynamodb:PutItem": {table}, "dynamodb:UpdateItem": {table}, "dynamodb:DeleteItem": {table}, "dynamodb:ConditionCheckItem": {table},
		"dynamodb:Query":  {table + "/index/pending"},
		"sqs:SendMessage": {"OncehookOutboxRetries.Arn"},
		// examples/sources.json's secrets.
		"secretsmanager:GetSecretValue": {fmt.Sprintf(here, "secretsmanager") + "secret:oncehook/shop-??????", fmt.Sprintf(here, "secretsmanager") + "secret:oncehook/stripe-??????"},
		"ssm:GetParameter":              {fmt.Sprintf(here, "ssm") + "parameter/oncehook/github"},
	}
	want := map[string][]string{}
	for role, actions := range calls {
		id := "Oncehook" + strings.ToUpper(role[:1]) + role[1:] + "Role"
		for _, a := range actions {
			if a == "dynamodb:Scan" {
				continue // the leak audit, granted only with Props.Sweeper.AuditPrefixes (TestTheLeakAudit...)
			}
			if resources[a] == nil {
				t.Fatalf("the %s calls %s, which this test gives no resource", role, a)
			}
			for _, r := range resources[a] {
				want[id] = append(want[id], a+" "+r)
			}
		}
		logs := "Oncehook" + strings.ToUpper(role[:1]) + role[1:] + "Logs.Arn:*"
		want[id] = append(want[id], "logs:CreateLogStream "+logs, "logs:PutLogEvents "+logs)
	}
	// The receiver may also write an effect of every kind the API accepts on the table, whether
	// or not the reference application's planners use it (TestTheReceiverMayWriteEveryEffectKind...).
	for _, a := range sortedKeys(sources.TableActions) {
		if pair := sources.TableActions[a] + " " + table; !slices.Contains(want["OncehookReceiverRole"], pair) {
			want["OncehookReceiverRole"] = append(want["OncehookReceiverRole"], pair)
		}
	}
	// And what Lambda itself does with the outbox's role: read the stream, consume the retry
	// queue, send given-up records to the on-failure queue (the event sources' own grants).
	stream, queue, failures := "OncehookTable.StreamArn", "OncehookOutboxRetries.Arn", "OncehookOutboxFailures.Arn"
	want["OncehookOutboxRole"] = append(want["OncehookOutboxRole"],
		"dynamodb:DescribeStream "+stream, "dynamodb:GetRecords "+stream, "dynamodb:GetShardIterator "+stream, "dynamodb:ListStreams *",
		"sqs:ChangeMessageVisibility "+queue, "sqs:DeleteMessage "+queue, "sqs:GetQueueAttributes "+queue, "sqs:GetQueueUrl "+queue, "sqs:ReceiveMessage "+queue,
		"sqs:GetQueueAttributes "+failures, "sqs:GetQueueUrl "+failures, "sqs:SendMessage "+failures)
	for role, pairs := range want {
		sort.Strings(pairs)
		have := got[role]
		sort.Strings(have)
		if strings.Join(have, "\n") != strings.Join(pairs, "\n") {
			t.Errorf("%s allows\n  %s\nwant\n  %s", role, strings.Join(have, "\n  "), strings.Join(pairs, "\n  "))
		}
		delete(got, role)
	}
	for role := range got {
		if !strings.HasPrefix(role, "CustomResource") && !strings.HasPrefix(role, "LogRetention") {
			t.Errorf("a policy for %s, which the test does not know", role)
		}
	}
	// No role carries a managed policy (AWSLambdaBasicExecutionRole would let a function write
	// to every log group in the account).
	for id, res := range *synth.tpl.FindResources(jsii.String("AWS::IAM::Role"), nil) {
		if m := (*res)["Properties"].(map[string]any)["ManagedPolicyArns"]; m != nil {
			t.Errorf("%s has managed policies %v", id, m)
		}
	}
}

// render writes a template value as text: a reference as its logical id without the CDK's
// hash suffix (OncehookTable.Arn), a join as its parts joined, a pseudo parameter as ${AWS::...}.
func render(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if ref, ok := v["Ref"].(string); ok {
			if strings.HasPrefix(ref, "AWS::") {
				return "${" + ref + "}"
			}
			return unhash(ref)
		}
		if att, ok := v["Fn::GetAtt"].([]any); ok {
			return unhash(att[0].(string)) + "." + att[1].(string)
		}
		if sel, ok := v["Fn::Select"].([]any); ok {
			return fmt.Sprintf("select(%v,%s)", sel[0], render(sel[1]))
		}
		if sp, ok := v["Fn::Split"].([]any); ok {
			return fmt.Sprintf("split(%s,%s)", render(sp[0]), render(sp[1]))
		}
		if imp, ok := v["Fn::ImportValue"]; ok {
			return "import:" + render(imp)
		}
		if j, ok := v["Fn::Join"].([]any); ok {
			var parts []string
			for _, p := range asSlice(j[1]) {
				parts = append(parts, render(p))
			}
			return strings.Join(parts, j[0].(string))
		}
	}
	return fmt.Sprint(v)
}

var hashSuffix = regexp.MustCompile(`[0-9A-F]{8}$`)

func unhash(id string) string { return hashSuffix.ReplaceAllString(id, "") }

func listOf(v any) []any {
	if s, ok := v.([]any); ok {
		return s
	}
	return []any{v}
}

// alarms returns every alarm of the template by logical id.
func alarmsByID(t *testing.T) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, res := range *synth.tpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil) {
		out[id] = (*res)["Properties"].(map[string]any)
	}
	return out
}

// alarmNamed finds an alarm by the construct id it was given (OncehookSweeperHeartbeat1234ABCD).
func alarmNamed(t *testing.T, all map[string]map[string]any, name string) map[string]any {
	t.Helper()
	for id, p := range all {
		if strings.HasPrefix(id, "Oncehook"+name) {
			return p
		}
	}
	t.Fatalf("no alarm %s", name)
	return nil
}

func TestAlarmsCoverTheFailureSignals(t *testing.T) {
	all := alarmsByID(t)
	// Per source (shop, stripe, github): duplicate spike, signature rejections, failing
	// receiver, unknown types; a replay alarm for github (its id is unsigned); and the rest.
	for _, name := range []string{"OutboxDlqNotEmpty", "OutboxIteratorAge", "ParkedIntents", "SweeperHeartbeat", "SweepDeferred", "Api5xx", "ReceiverLatency",
		"ReceiverErrors", "OutboxErrors", "SweeperErrors", "ReceiverThrottles", "OutboxThrottles", "SweeperThrottles", "TableThrottled", "PendingIndexThrottled",
		"DuplicateSpikeshop", "SignatureRejectedstripe", "ReceiverFailinggithub", "UnknownTypesshop", "ReplayRefusedgithub"} {
		alarmNamed(t, all, name)
	}
	// And a count of failed deliveries per source, a count of the API's 5xx, and a retry
	// alarm per target.
	for _, name := range []string{"DeliveriesFailingshop", "DeliveriesFailingstripe", "DeliveriesFailinggithub", "Api5xxCount"} {
		alarmNamed(t, all, name)
	}
	// And a failed re-read of each source's secrets from its store (all three read one).
	for _, name := range []string{"SecretRefreshFailedshop", "SecretRefreshFailedstripe", "SecretRefreshFailedgithub"} {
		alarmNamed(t, all, name)
	}
	targets := len(synth.o.Sources.Targets)
	if want := 16 + 6*3 + 1 + targets; len(all) != want {
		t.Errorf("%d alarms, want %d", len(all), want)
	}
	for id := range all {
		if strings.HasPrefix(id, "OncehookReplayRefused") && !strings.HasPrefix(id, "OncehookReplayRefusedgithub") {
			t.Errorf("%s: only a source with a body guard (github) has a replay alarm", id)
		}
	}
	// The receiver's latency against the tightest provider timeout: GitHub's and Stripe's 10 s.
	if got := alarmNamed(t, all, "ReceiverLatency")["Threshold"]; got != 8000.0 {
		t.Errorf("receiver latency threshold %v, want 80%% of 10 s", got)
	}
}

func TestEveryAlarmReachesTheTopicForAlarmAndOK(t *testing.T) {
	for id, p := range alarmsByID(t) {
		for _, key := range []string{"AlarmActions", "OKActions"} {
			actions, _ := p[key].([]any)
			if len(actions) != 1 || !strings.Contains(fmt.Sprint(actions[0]), "OncehookAlarms") {
				t.Errorf("%s: %s %v, want the alarm topic", id, key, p[key])
			}
		}
	}
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::SNS::TopicPolicy"), props(map[string]any{
			"PolicyDocument": assertions.Match_ObjectLike(props(map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(props(map[string]any{"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}, "Effect": "Deny"})),
			})})),
		}))
	})
}

// TestMissingDataAndPeriodsAreChosenPerAlarm: a stopped sweeper must fire its heartbeat (and
// not turn the parked alarm OK); a rate or a failure count judges several periods, not one.
func TestMissingDataAndPeriodsAreChosenPerAlarm(t *testing.T) {
	all := alarmsByID(t)
	single := map[string]bool{"OutboxDlqNotEmpty": true, "ParkedIntents": true, "SweeperHeartbeat": true, "ReplayRefused": true, "UnknownTypes": true}
	for id, p := range all {
		name := strings.TrimPrefix(id, "Oncehook")
		switch {
		case strings.HasPrefix(name, "SweeperHeartbeat"):
			if p["TreatMissingData"] != "breaching" || p["ComparisonOperator"] != "LessThanThreshold" {
				t.Errorf("%s: %v %v: a sweeper that stops must keep its heartbeat alarm firing", id, p["TreatMissingData"], p["ComparisonOperator"])
			}
		case strings.HasPrefix(name, "ParkedIntents"):
			if p["TreatMissingData"] != "ignore" {
				t.Errorf("%s: missing data %v, want ignore (keep the state)", id, p["TreatMissingData"])
			}
		default:
			if p["TreatMissingData"] != "notBreaching" {
				t.Errorf("%s: missing data %v, want notBreaching", id, p["TreatMissingData"])
			}
		}
		isSingle := false
		for k := range single {
			isSingle = isSingle || strings.HasPrefix(name, k)
		}
		if periods := p["EvaluationPeriods"].(float64); !isSingle && (periods < 3 || p["DatapointsToAlarm"].(float64) < 2) {
			t.Errorf("%s: %v of %v periods: a rate or a count must be judged over several periods", id, p["DatapointsToAlarm"], periods)
		}
	}
}

// metricsOf lists the (namespace, name, dimension names) of every metric an alarm names, as
// the template has it: one metric, or a math expression's metrics.
func metricsOf(p map[string]any) [][3]string {
	dims := func(ds any) string {
		var names []string
		for _, d := range asSlice(ds) {
			names = append(names, d.(map[string]any)["Name"].(string))
		}
		sort.Strings(names)
		return strings.Join(names, ",")
	}
	if name, ok := p["MetricName"].(string); ok {
		return [][3]string{{fmt.Sprint(p["Namespace"]), name, dims(p["Dimensions"])}}
	}
	var out [][3]string
	for _, m := range asSlice(p["Metrics"]) {
		stat, ok := m.(map[string]any)["MetricStat"].(map[string]any)
		if !ok {
			continue
		}
		metric := stat["Metric"].(map[string]any)
		out = append(out, [3]string{fmt.Sprint(metric["Namespace"]), metric["MetricName"].(string), dims(metric["Dimensions"])})
	}
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// catalog is the receiver's and the outbox's EMF metrics, as their own tests hold the code to.
func catalog() map[string]bool {
	m := map[string]bool{}
	for _, e := range append(receiver.EmittedMetrics(), outbox.EmittedMetrics()...) {
		d := append([]string(nil), e.Dimensions...)
		sort.Strings(d)
		m[e.Name+"/"+strings.Join(d, ",")] = true
	}
	return m
}

// dashboardMetrics reads the dashboard body out of the template (the CloudFormation join of
// its JSON with the tokens it refers to) and lists each widget metric's namespace, name and
// dimension names.
func dashboardMetrics(t *testing.T) [][3]string {
	var out [][3]string
	for _, res := range *synth.tpl.FindResources(jsii.String("AWS::CloudWatch::Dashboard"), nil) {
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
			Widgets []struct {
				Properties struct {
					Metrics [][]any `json:"metrics"`
				} `json:"properties"`
			} `json:"widgets"`
		}
		if err := json.Unmarshal([]byte(text.String()), &d); err != nil {
			t.Fatalf("dashboard body: %v\n%s", err, text.String())
		}
		for _, w := range d.Widgets {
			for _, m := range w.Properties.Metrics {
				// [namespace, name, dim1, value1, dim2, value2, ..., {options}]
				var names []string
				for i := 2; i+1 < len(m); i += 2 {
					if n, ok := m[i].(string); ok {
						names = append(names, n)
					}
				}
				sort.Strings(names)
				out = append(out, [3]string{fmt.Sprint(m[0]), fmt.Sprint(m[1]), strings.Join(names, ",")})
			}
		}
	}
	return out
}

// TestEveryChartedAndAlarmedMetricIsOneTheFunctionsWrite matches every widget and alarm metric
// of the template in the functions' namespace against the EMF catalogs (receiver.EmittedMetrics,
// outbox.EmittedMetrics), which the receiver's and the outbox's tests hold the code to: the
// dashboard and the alarms cannot drift from what the code emits again.
func TestEveryChartedAndAlarmedMetricIsOneTheFunctionsWrite(t *testing.T) {
	emitted := catalog()
	checked := 0
	check := func(where string, m [3]string) {
		if m[0] != synth.o.MetricsNamespace {
			return // AWS's own metrics (Lambda, API Gateway, DynamoDB, SQS)
		}
		checked++
		if !emitted[m[1]+"/"+m[2]] {
			t.Errorf("%s names %s with dimensions [%s], which no function writes", where, m[1], m[2])
		}
	}
	for id, p := range alarmsByID(t) {
		for _, m := range metricsOf(p) {
			check("alarm "+id, m)
		}
	}
	widgets := dashboardMetrics(t)
	for _, m := range widgets {
		check("the dashboard", m)
	}
	if checked < 60 || len(widgets) < 40 {
		t.Fatalf("checked %d metrics (%d on the dashboard): the template was not read", checked, len(widgets))
	}
}

// TestCdkNagFindsNoUnsuppressedErrors applies the AwsSolutions rules; every suppression in
// suppress.go carries its reason.
func TestCdkNagFindsNoUnsuppressedErrors(t *testing.T) {
	for _, kind := range []string{"Error", "Warning"} {
		var found *[]*cxapi.SynthesisMessage
		if kind == "Error" {
			found = assertions.Annotations_FromStack(synth.stack).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		} else {
			found = assertions.Annotations_FromStack(synth.stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		}
		for _, m := range *found {
			t.Errorf("cdk-nag %s at %s: %v", kind, *m.Id, m.Entry.Data)
		}
	}
}

// A sources file whose retention rests on a default nobody chose (a Stripe source without
// redrive_window) still synthesizes, with a warning naming the field on the construct's scope;
// a file that chooses has none.
func TestSynthWarnsOfARetentionOnADefault(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, redrive string
		warned        bool
	}{{"unset", "", true}, {"chosen", `,"redrive_window":"30d"`, false}} {
		file := filepath.Join(dir, c.name+".json")
		os.WriteFile(file, []byte(`{"sources":{"stripe":{"scheme":"stripe","secrets":[{"secretsmanager":"s"}]`+c.redrive+`}}}`), 0o644)
		stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("W"+c.name), nil)
		New(stack, "Oncehook", &Props{SourcesFile: file, Receiver: ReceiverProps{Code: Code{Dir: synth.bootstraps["arm64"]}},
			Outbox: OutboxProps{Code: Code{Dir: synth.bootstraps["arm64"]}}, Sweeper: SweeperProps{Code: Code{Dir: synth.bootstraps["arm64"]}}})
		found := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("sources.stripe.redrive_window: not set")))
		if got := len(*found) > 0; got != c.warned {
			t.Errorf("%s: warned %v, want %v", c.name, got, c.warned)
		}
	}
}

// A source whose secrets come from a store (Secrets Manager, SSM) has an alarm on their re-read
// failing, which keeps the values held (so a revoked secret verifies on); a source whose secrets
// are environment variables or public keys reads no store, and has none.
func TestASecretRefreshAlarmForEverySourceThatReadsAStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sources.json")
	os.WriteFile(file, []byte(`{"sources":{
  "sm":  {"scheme":"stripe","secrets":[{"secretsmanager":"s"}],"retry_horizon":"1h","redrive_window":"1d"},
  "ssm": {"scheme":"github","secrets":[{"env":"G"},{"ssm":"/g"}],"retry_horizon":"1h","redrive_window":"1d"},
  "env": {"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"1h","redrive_window":"1d"},
  "pk":  {"scheme":"discord","public_keys":["`+strings.Repeat("ab", 32)+`"],"event_id":{"json":"id"},"event_type":{"json":"type"},"retry_horizon":"1h","redrive_window":"1d"}}}`), 0o644)
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("Refresh"), nil)
	o := New(stack, "Oncehook", &Props{SourcesFile: file, AllowEnvSecrets: true, Environment: map[string]string{"S": "s", "G": "g"}, Receiver: ReceiverProps{Code: Code{Dir: synth.bootstraps["arm64"]}},
		Outbox: OutboxProps{Code: Code{Dir: synth.bootstraps["arm64"]}}, Sweeper: SweeperProps{Code: Code{Dir: synth.bootstraps["arm64"]}}})
	got := map[string]bool{}
	for _, a := range o.Alarms {
		if id := *a.Node().Id(); strings.HasPrefix(id, "SecretRefreshFailed-") {
			got[strings.TrimPrefix(id, "SecretRefreshFailed-")] = true
		}
	}
	if !got["sm"] || !got["ssm"] || got["env"] || got["pk"] || len(got) != 2 {
		t.Fatalf("secret refresh alarms for %v, want sm and ssm only", got)
	}
	tpl := assertions.Template_FromStack(stack, nil)
	for _, res := range *tpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil) {
		p := (*res)["Properties"].(map[string]any)
		if name, _ := p["MetricName"].(string); name == "SecretRefreshFailed" {
			if p["TreatMissingData"] != "notBreaching" || len(p["AlarmActions"].([]any)) == 0 {
				t.Fatalf("the secret refresh alarm does not page, or pages on silence: %v", p)
			}
		}
	}
}
