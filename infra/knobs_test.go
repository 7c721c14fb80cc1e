package infra

import (
	"math"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// functionsByTag is each function's properties by its oncehook:function tag.
func functionsByTag(t *testing.T, tpl assertions.Template) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, res := range *tpl.FindResources(jsii.String("AWS::Lambda::Function"), nil) {
		p := (*res)["Properties"].(map[string]any)
		for _, tag := range asSlice(p["Tags"]) {
			if m := tag.(map[string]any); m["Key"] == FunctionTag {
				out[m["Value"].(string)] = p
			}
		}
	}
	if len(out) != 3 {
		t.Fatalf("found functions %v, want receiver, outbox and sweeper", out)
	}
	return out
}

// TestThePlatformKnobsReachTheTemplate: each knob a platform team sets lands on the resource it
// names, and only there; the defaults are what the docs say.
func TestThePlatformKnobsReachTheTemplate(t *testing.T) {
	// Defaults.
	must(t, func() {
		synth.tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), props(map[string]any{
			"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^OncehookTable")), "StreamArn"}},
			"ParallelizationFactor": 2, "BatchSize": 100,
		}))
		synth.tpl.AllResourcesProperties(jsii.String("AWS::Logs::LogGroup"), props(map[string]any{"RetentionInDays": 30}))
		synth.tpl.AllResources(jsii.String("AWS::Logs::LogGroup"), props(map[string]any{"DeletionPolicy": "Delete"}))
	})
	for name, fn := range functionsByTag(t, synth.tpl) {
		if fn["TracingConfig"] != nil {
			t.Errorf("%s: tracing %v by default", name, fn["TracingConfig"])
		}
		if fn["MemorySize"] != 256.0 {
			t.Errorf("%s: memory %v, want 256", name, fn["MemorySize"])
		}
	}
	if synth.o.StreamMapping == nil || synth.o.SweepSchedule == nil || synth.o.AccessLogs == nil {
		t.Fatalf("fields: stream mapping %v, schedule %v, access logs %v", synth.o.StreamMapping, synth.o.SweepSchedule, synth.o.AccessLogs)
	}
	if id := synth.o.StreamMapping.EventSourceMappingId(); id == nil || *id == "" {
		t.Error("Oncehook.StreamMapping has no mapping id")
	}

	// Set.
	p := prebuilt("arm64")
	p.Outbox.Code = Code{Dir: synth.bootstraps["amd64"]}
	p.Outbox.StreamParallelization = 7
	p.Outbox.StreamBatchSize = 25
	p.Telemetry.LogRetention = awslogs.RetentionDays_ONE_YEAR
	p.Telemetry.LogRemoval = awscdk.RemovalPolicy_RETAIN
	p.Telemetry.Tracing = awslambda.Tracing_ACTIVE
	p.Receiver.Function = FunctionOptions{MemorySize: 1024}
	p.Outbox.Function = FunctionOptions{MemorySize: 512, Architecture: awslambda.Architecture_X86_64(), ReservedConcurrency: 20}
	var o *Oncehook
	tpl, err := synthesizeWith(func(awscdk.Stack) *Props { return p }, &o)
	if err != nil {
		t.Fatal(err)
	}
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), props(map[string]any{
			"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^OncehookTable")), "StreamArn"}},
			"ParallelizationFactor": 7, "BatchSize": 25,
		}))
		tpl.AllResourcesProperties(jsii.String("AWS::Logs::LogGroup"), props(map[string]any{"RetentionInDays": 365}))
		tpl.AllResources(jsii.String("AWS::Logs::LogGroup"), props(map[string]any{"DeletionPolicy": "Retain"}))
	})
	fns := functionsByTag(t, tpl)
	for name, fn := range fns {
		if tc, _ := fn["TracingConfig"].(map[string]any); tc["Mode"] != "Active" {
			t.Errorf("%s: tracing %v, want Active", name, fn["TracingConfig"])
		}
	}
	for name, want := range map[string]float64{"receiver": 1024, "outbox": 512, "sweeper": 256} {
		if fns[name]["MemorySize"] != want {
			t.Errorf("%s: memory %v, want %v", name, fns[name]["MemorySize"], want)
		}
	}
	for name, want := range map[string]string{"receiver": "arm64", "outbox": "x86_64", "sweeper": "arm64"} {
		if got := asSlice(fns[name]["Architectures"]); len(got) != 1 || got[0] != want {
			t.Errorf("%s: architectures %v, want %s", name, got, want)
		}
	}
	if fns["outbox"]["ReservedConcurrentExecutions"] != 20.0 || fns["receiver"]["ReservedConcurrentExecutions"] != nil {
		t.Errorf("reserved concurrency: outbox %v, receiver %v", fns["outbox"]["ReservedConcurrentExecutions"], fns["receiver"]["ReservedConcurrentExecutions"])
	}
	// With tracing on, each role may send its segments (and nothing more).
	for _, prefix := range []string{"OncehookReceiverRole", "OncehookOutboxRole", "OncehookSweeperRole"} {
		pairs, _ := policyPairs(tpl, prefix)
		if !strings.Contains(strings.Join(pairs, "\n"), "xray:PutTraceSegments *") {
			t.Errorf("%s: no xray:PutTraceSegments with tracing on: %v", prefix, pairs)
		}
	}
	if o.AccessLogs == nil || o.SweepSchedule == nil || o.StreamMapping == nil {
		t.Error("a field is nil")
	}
}

// TestKnobsThatCannotWorkFailTheSynthNamingTheProp: every value Lambda or CloudFormation would
// refuse at deploy, or that cannot work, is refused at synth with the prop named.
func TestKnobsThatCannotWorkFailTheSynthNamingTheProp(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Props)
		want string
	}{
		{"parallelization over 10", func(p *Props) { p.Outbox.StreamParallelization = 11 }, "Props.Outbox.StreamParallelization"},
		{"parallelization below 1", func(p *Props) { p.Outbox.StreamParallelization = -1 }, "Props.Outbox.StreamParallelization"},
		{"a fractional parallelization", func(p *Props) { p.Outbox.StreamParallelization = 2.5 }, "Props.Outbox.StreamParallelization"},
		{"a batch over Lambda's", func(p *Props) { p.Outbox.StreamBatchSize = 10001 }, "Props.Outbox.StreamBatchSize"},
		// The outbox function's timeout is derived from the batch (outboxTimings): 10,000 records
		// 256 at a time, 40 rounds of calls up to 30 s, need 23 minutes.
		{"a batch the outbox cannot run in 15 minutes", func(p *Props) {
			p.Outbox.StreamBatchSize = 10000
			p.SourcesFile = sourcesFile(t, `{"sources":{"shop":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/shop"}],"redrive_window":"30d"}},
			  "targets":{"email":{"type":"http","url":"https://example.com/x","timeout":"30s"}}}`)
		}, "Props.Outbox.StreamBatchSize"},
		{"a negative batch", func(p *Props) { p.Outbox.StreamBatchSize = -5 }, "Props.Outbox.StreamBatchSize"},
		{"a fractional batch", func(p *Props) { p.Outbox.StreamBatchSize = 1.5 }, "Props.Outbox.StreamBatchSize"},
		{"memory under Lambda's", func(p *Props) { p.Receiver.Function.MemorySize = 64 }, "Props.Receiver.Function.MemorySize"},
		{"memory over Lambda's", func(p *Props) { p.Outbox.Function.MemorySize = 20000 }, "Props.Outbox.Function.MemorySize"},
		{"a global memory over Lambda's", func(p *Props) { p.MemorySize = 20000 }, "Props.MemorySize"},
		{"a sweeper reservation", func(p *Props) { p.Sweeper.Function.ReservedConcurrency = 3 }, "Props.Sweeper.Function.ReservedConcurrency"},
		{"a negative reservation", func(p *Props) { p.Outbox.Function.ReservedConcurrency = -1 }, "Props.Outbox.Function.ReservedConcurrency"},
		// Any duplicate breaches a spike below 0, every period breaches none above +Inf, and NaN
		// compares as neither.
		{"a negative duplicate spike", func(p *Props) { p.Alarms.DuplicateSpike = -1 }, "Props.Alarms.DuplicateSpike"},
		{"a NaN duplicate spike", func(p *Props) { p.Alarms.DuplicateSpike = math.NaN() }, "Props.Alarms.DuplicateSpike"},
		{"an infinite duplicate spike", func(p *Props) { p.Alarms.DuplicateSpike = math.Inf(1) }, "Props.Alarms.DuplicateSpike"},
		{"a negative API rate", func(p *Props) { p.Receiver.ThrottleRate = -1 }, "Props.Receiver.ThrottleRate"},
		{"a NaN API rate", func(p *Props) { p.Receiver.ThrottleRate = math.NaN() }, "Props.Receiver.ThrottleRate"},
		{"an infinite API rate", func(p *Props) { p.Receiver.ThrottleRate = math.Inf(1) }, "Props.Receiver.ThrottleRate"},
		{"a negative API burst", func(p *Props) { p.Receiver.ThrottleBurst = -1 }, "Props.Receiver.ThrottleBurst"},
		{"a fractional API burst", func(p *Props) { p.Receiver.ThrottleBurst = 2.5 }, "Props.Receiver.ThrottleBurst"},
		{"a NaN API burst", func(p *Props) { p.Receiver.ThrottleBurst = math.NaN() }, "Props.Receiver.ThrottleBurst"},
		{"a NaN source rate", func(p *Props) {
			p.Receiver.SourceThrottles = map[string]Throttle{"shop": {Rate: math.NaN(), Burst: 10}}
		}, `Props.Receiver.SourceThrottles["shop"]`},
		{"an infinite source rate", func(p *Props) {
			p.Receiver.SourceThrottles = map[string]Throttle{"shop": {Rate: math.Inf(1), Burst: 10}}
		}, `Props.Receiver.SourceThrottles["shop"]`},
		{"a fractional source burst", func(p *Props) { p.Receiver.SourceThrottles = map[string]Throttle{"shop": {Rate: 5, Burst: 1.5}} }, `Props.Receiver.SourceThrottles["shop"]`},
		// A nil key (a lookup that found none) would deploy without its grant: every secret
		// under it unreadable at the receiver's start.
		{"a nil secrets key", func(p *Props) { p.Receiver.SecretsKeys = []awskms.IKey{nil} }, "Props.Receiver.SecretsKeys[0]"},
		{"an outbox build of the wrong architecture", func(p *Props) {
			p.Outbox.Function.Architecture = awslambda.Architecture_X86_64() // the code is arm64
		}, "outbox.Code"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := prebuilt("arm64")
			c.edit(p)
			if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error naming %q", err, c.want)
			}
		})
	}
}

// TestQueuesAndLogsCanBeUnderACustomerManagedKey: with Props.Outbox.QueueKey both queues are under it
// and whoever sends to them may use it; with Props.Telemetry.LogKey every log group is, and the key lets
// CloudWatch Logs use it for this account's log groups only.
func TestQueuesAndLogsCanBeUnderACustomerManagedKey(t *testing.T) {
	var queueKey, logKey awskms.Key
	tpl, err := synthesizeWith(func(s awscdk.Stack) *Props {
		p := prebuilt("arm64")
		queueKey = awskms.NewKey(s, jsii.String("QueueKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
		logKey = awskms.NewKey(s, jsii.String("LogKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
		p.Outbox.QueueKey, p.Telemetry.LogKey = queueKey, logKey
		return p
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keyRef := func(prefix string) any {
		return map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^" + prefix)), "Arn"}}
	}
	must(t, func() {
		tpl.ResourcePropertiesCountIs(jsii.String("AWS::SQS::Queue"), props(map[string]any{"KmsMasterKeyId": keyRef("QueueKey")}), jsii.Number(2))
		tpl.ResourcePropertiesCountIs(jsii.String("AWS::Logs::LogGroup"), props(map[string]any{"KmsKeyId": keyRef("LogKey")}), jsii.Number(4))
		tpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), props(map[string]any{"KeyPolicy": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
			assertions.Match_ObjectLike(props(map[string]any{
				// logs.<region>.amazonaws.com, the region a token here
				"Principal": map[string]any{"Service": map[string]any{"Fn::Join": []any{"", []any{"logs.", map[string]any{"Ref": "AWS::Region"}, ".amazonaws.com"}}}},
				"Condition": map[string]any{"ArnLike": map[string]any{"kms:EncryptionContext:aws:logs:arn": assertions.Match_AnyValue()}},
			})),
		})}}))
	})
	for _, prefix := range []string{"OncehookOutboxRole", "OncehookSweeperRole"} {
		pairs, _ := policyPairs(tpl, prefix)
		all := strings.Join(pairs, "\n")
		if !strings.Contains(all, "kms:GenerateDataKey QueueKey") && !strings.Contains(all, "kms:GenerateDataKey* QueueKey") {
			t.Errorf("%s cannot send to a queue under the key: %v", prefix, pairs)
		}
	}
	// Without the props, the queues keep SQS's own encryption and the logs CloudWatch's.
	must(t, func() {
		synth.tpl.AllResourcesProperties(jsii.String("AWS::SQS::Queue"), props(map[string]any{"SqsManagedSseEnabled": true}))
		synth.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Logs::LogGroup"), props(map[string]any{"KmsKeyId": assertions.Match_AnyValue()}), jsii.Number(0))
	})
}
