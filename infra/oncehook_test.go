package infra

import (
	"fmt"
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
		Receiver:    Code{Dir: synth.bootstraps["arm64"]},
		Outbox:      Code{Dir: synth.bootstraps["arm64"]},
		Sweeper:     Code{Dir: synth.bootstraps["arm64"]},
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
		"Receiver": "dynamodb:GetItem dynamodb:PutItem dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents secretsmanager:GetSecretValue ssm:GetParameter",
		"Outbox": "dynamodb:DescribeStream dynamodb:GetItem dynamodb:GetRecords dynamodb:GetShardIterator dynamodb:ListStreams dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents " +
			"sqs:ChangeMessageVisibility sqs:DeleteMessage sqs:GetQueueAttributes sqs:GetQueueAttributes sqs:GetQueueAttributes sqs:GetQueueUrl sqs:GetQueueUrl sqs:GetQueueUrl sqs:ReceiveMessage sqs:SendMessage sqs:SendMessage",
		"Sweeper": "dynamodb:GetItem dynamodb:Query dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents sqs:GetQueueAttributes sqs:GetQueueUrl sqs:SendMessage",
	}
	for fn, actions := range want {
		var role string
		for r := range got {
			if strings.HasPrefix(r, "Oncehook"+fn+"Role") {
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
