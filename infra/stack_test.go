package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/oncehook/oncehook/sources"
)

// One synth serves every test: starting the jsii runtime and synthesizing take seconds.
var synth = struct {
	stack awscdk.Stack
	tpl   assertions.Template
}{}

// runAppEnv makes the test binary run the infra app's main instead of the tests, so a test
// can run the synth as a process and read its exit status.
const runAppEnv = "ONCEHOOK_INFRA_RUN_APP"

func TestMain(m *testing.M) {
	if os.Getenv(runAppEnv) == "1" {
		main()
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "oncehook-infra")
	if err != nil {
		panic(err)
	}
	for _, fn := range []string{"receiver", "outbox", "sweeper"} {
		_ = os.MkdirAll(filepath.Join(dir, fn), 0o755)
		_ = os.WriteFile(filepath.Join(dir, fn, "bootstrap"), []byte("test asset for "+fn), 0o755)
	}
	file, err := sources.Load("../examples/sources.json")
	if err != nil {
		panic(err)
	}
	app := awscdk.NewApp(nil)
	synth.stack = NewStack(app, "Oncehook", StackConfig{Sources: file, CodeDir: dir, ARM64: true, DeletionProtection: true})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	synth.tpl = assertions.Template_FromStack(synth.stack, nil)
	code := m.Run()
	os.RemoveAll(dir)
	jsii.Close()
	os.Exit(code)
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

func TestTheReceiverIsBehindPostHooksSource(t *testing.T) {
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), props(map[string]any{"RouteKey": "POST /hooks/{source}"}))
	})
	must(t, func() {
		synth.tpl.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Route"), jsii.Number(1))
	})
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
			"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^OutboxRetries")), "Arn"}},
			"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
		}))
	})
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), props(map[string]any{
			"Description": "oncehook outbox",
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(props(map[string]any{
				"RETRY_QUEUE_URL": map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^OutboxRetries"))},
				"LEASE_SECONDS":   "60",
			}))},
			// 100 records, 8 at a time, calls of up to 10 s plus a 5 s margin each: 13 x 15 s + 5 s.
			"Timeout": 200,
		}))
	})
}

func TestTheSweeperRunsOnASchedule(t *testing.T) {
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), props(map[string]any{"ScheduleExpression": "rate(2 minutes)"}))
	})
}

// TestEachRoleHasExactlyTheActionsItsCodeIssues reads every inline policy and checks the
// DynamoDB, Secrets Manager and SSM actions per function.
func TestEachRoleHasExactlyTheActionsItsCodeIssues(t *testing.T) {
	policies := synth.tpl.FindResources(jsii.String("AWS::IAM::Policy"), nil)
	got := map[string][]string{}
	for _, res := range *policies {
		p := (*res)["Properties"].(map[string]any)
		roles := p["Roles"].([]any)
		role := roles[0].(map[string]any)["Ref"].(string)
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			switch a := st.(map[string]any)["Action"].(type) {
			case string:
				got[role] = append(got[role], a)
			case []any:
				for _, x := range a {
					got[role] = append(got[role], x.(string))
				}
			}
		}
	}
	want := map[string]string{
		"Receiver": "dynamodb:ConditionCheckItem dynamodb:GetItem dynamodb:PutItem dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents secretsmanager:GetSecretValue ssm:GetParameter",
		"Outbox": "dynamodb:DescribeStream dynamodb:GetItem dynamodb:GetRecords dynamodb:GetShardIterator dynamodb:ListStreams dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents " +
			"sqs:ChangeMessageVisibility sqs:DeleteMessage sqs:GetQueueAttributes sqs:GetQueueAttributes sqs:GetQueueAttributes sqs:GetQueueUrl sqs:GetQueueUrl sqs:GetQueueUrl sqs:ReceiveMessage sqs:SendMessage sqs:SendMessage",
		"Sweeper": "dynamodb:GetItem dynamodb:Query dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents sqs:GetQueueAttributes sqs:GetQueueUrl sqs:SendMessage",
	}
	for fn, actions := range want {
		var role string
		for r := range got {
			if strings.HasPrefix(r, fn+"Role") {
				role = r
			}
		}
		have := got[role]
		sort.Strings(have)
		if strings.Join(have, " ") != actions {
			t.Errorf("%s's role allows\n  %s\nwant\n  %s", fn, strings.Join(have, " "), actions)
		}
	}
}

func TestAlarmsCoverTheFailureSignals(t *testing.T) {
	for _, metric := range []string{"ApproximateNumberOfMessagesVisible", "IteratorAge", "ParkedClaims", "Duplicate", "Errors"} {
		must(t, func() {
			synth.tpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), props(map[string]any{"MetricName": metric}))
		})
	}
	// One duplicate-spike alarm per source, a replay alarm for the source whose id is unsigned
	// (github), three error alarms, and the three above.
	must(t, func() {
		synth.tpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(3+1+3+3))
	})
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), props(map[string]any{
			"MetricName": "ReplayRefused", "Dimensions": []any{map[string]any{"Name": "source", "Value": "github"}},
		}))
	})
	must(t, func() {
		synth.tpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1))
	})
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

// synthFails runs the infra app itself (this test binary, re-executed as the app) with a
// sources file, and returns its output, failing the test unless it exits non-zero.
func synthFails(t *testing.T, sourcesJSON string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "sources.json")
	if err := os.WriteFile(path, []byte(sourcesJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"receiver", "outbox", "sweeper"} {
		_ = os.MkdirAll(filepath.Join(dir, fn), 0o755)
		_ = os.WriteFile(filepath.Join(dir, fn, "bootstrap"), []byte("test asset"), 0o755)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runAppEnv+"=1", "CDK_OUTDIR="+filepath.Join(dir, "out"),
		`CDK_CONTEXT_JSON={"sources":"`+path+`","code":"`+dir+`"}`)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("the synth exited %v:\n%s", err, out)
	}
	return string(out)
}

func TestARetentionShorterThanTheProvidersPromiseFailsTheSynth(t *testing.T) {
	out := synthFails(t, `{"sources":{"stripe":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d","keep":"7d"}}}`)
	if !strings.Contains(out, `"stripe"`) || !strings.Contains(out, "shorter than its retry horizon") {
		t.Fatalf("the synth's error does not name the source and the rule:\n%s", out)
	}
}

func TestATargetTooSlowForTheOutboxFailsTheSynth(t *testing.T) {
	out := synthFails(t, `{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d"}},
		"targets":{"slow":{"url":"https://b.example/x","timeout":"2m"}}}`)
	if !strings.Contains(out, `"slow"`) || !strings.Contains(out, "15 minutes") {
		t.Fatalf("the synth's error does not name the target:\n%s", out)
	}
}
