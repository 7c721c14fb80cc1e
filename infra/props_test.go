package infra

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// synthesize runs New in a stack of its own and returns its template, or the refusal.
func synthesize(props *Props, before ...func(awscdk.Stack)) (tpl assertions.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), nil)
	for _, f := range before {
		f(stack)
	}
	New(stack, "Oncehook", props)
	return assertions.Template_FromStack(stack, nil), nil
}

func prebuilt(arch string) *Props {
	d := synth.bootstraps[arch]
	return &Props{SourcesFile: "../examples/sources.json", Receiver: Code{Dir: d}, Outbox: Code{Dir: d}, Sweeper: Code{Dir: d}}
}

func TestAPrebuiltBootstrapOfAnotherArchitectureFailsTheSynth(t *testing.T) {
	_, err := synthesize(prebuilt("amd64")) // arm64 is the default
	if err == nil || !strings.Contains(err.Error(), "receiver.Code") || !strings.Contains(err.Error(), "EM_X86_64") {
		t.Fatalf("got %v, want a stale amd64 build refused for arm64 Lambda", err)
	}
	p := prebuilt("amd64")
	p.X86 = true
	if _, err := synthesize(p); err != nil {
		t.Fatalf("an amd64 build for x86 functions: %v", err)
	}
}

func TestTheFunctionsGetTheVerySourcesFileTheirPermissionsCameFrom(t *testing.T) {
	raw, err := os.ReadFile("../examples/sources.json")
	if err != nil {
		t.Fatal(err)
	}
	// The construct bundles the file compacted; its hash, computed here from the file.
	sum := sha256.Sum256(compactJSON(raw))
	must(t, func() {
		synth.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), props(map[string]any{
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(props(map[string]any{"ONCEHOOK_SOURCES_SHA256": hex.EncodeToString(sum[:])}))},
		}), jsii.Number(3))
	})
	// Code built elsewhere gets the file inline instead.
	p := prebuilt("arm64")
	p.Outbox = Code{Lambda: awslambda.Code_FromAsset(jsii.String(synth.bootstraps["arm64"]), nil)}
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), props(map[string]any{
			"Description": "oncehook outbox",
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(props(map[string]any{"ONCEHOOK_SOURCES": string(compactJSON(raw))}))},
		}))
	})
}

func TestPropsThatCannotWorkFailTheSynthNamingTheProp(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.json")
	var b strings.Builder
	b.WriteString(`{"sources":{`)
	for i := range 40 {
		fmt.Fprintf(&b, `%s"source-%02d":{"scheme":"stripe","secrets":[{"secretsmanager":"oncehook/source-%02d"}],"retry_horizon":"3d","redrive_window":"30d"}`, map[bool]string{true: "", false: ","}[i == 0], i, i)
	}
	b.WriteString(`}}`)
	if err := os.WriteFile(big, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*Props)
		want string
	}{
		{"no sources file", func(p *Props) { p.SourcesFile = "" }, "Props.SourcesFile is required"},
		{"a sources file that does not exist", func(p *Props) { p.SourcesFile = "nope.json" }, "Props.SourcesFile"},
		{"a shard count over the maximum", func(p *Props) { p.PendingShards = 5000 }, "Props.PendingShards"},
		{"an environment variable the construct sets", func(p *Props) { p.Environment = map[string]string{"TABLE_NAME": "x"} }, "Props.Environment: TABLE_NAME"},
		{"a custom target that is an HTTP target", func(p *Props) { p.Targets = []string{"email"} }, `Props.Targets: "email"`},
		{"two kinds of code for one function", func(p *Props) { p.Receiver.GoPackage = "./x" }, "receiver.Code: set exactly one"},
		{"a sources file too big to pass inline", func(p *Props) {
			p.SourcesFile = big
			p.Outbox = Code{Lambda: awslambda.Code_FromAsset(jsii.String(synth.bootstraps["arm64"]), nil)}
		}, "outbox.Code: the sources file is"},
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

func TestTheFloodGuardsAndAnExistingApi(t *testing.T) {
	p := prebuilt("arm64")
	p.ReceiverReservedConcurrency = 50
	p.Targets = []string{"crm", "billing"}
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), props(map[string]any{
			"DefaultRouteSettings": map[string]any{"ThrottlingRateLimit": 1000, "ThrottlingBurstLimit": 2000},
		}))
	})
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), props(map[string]any{
			"Description": "oncehook receiver", "ReservedConcurrentExecutions": 50,
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(props(map[string]any{"ONCEHOOK_TARGETS": "crm,billing"}))},
			"Tags":        assertions.Match_ArrayWith(&[]any{map[string]any{"Key": "oncehook:function", "Value": "receiver"}}),
		}))
	})
	// An HTTP API of the application's own: the webhook route is added to it, nothing else.
	var api awsapigatewayv2.HttpApi
	p = prebuilt("arm64")
	tpl, err = synthesize(p, func(s awscdk.Stack) {
		api = awsapigatewayv2.NewHttpApi(s, jsii.String("TheirApi"), nil)
		p.HttpApi = api
	})
	if err != nil {
		t.Fatal(err)
	}
	must(t, func() { tpl.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Api"), jsii.Number(1)) })
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), props(map[string]any{
			"RouteKey": "POST /hooks/{source}", "ApiId": map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^TheirApi"))},
		}))
	})
}

func TestASynthForAWSRefusesWhatOnlyWorksLocally(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	envSecret := write("env.json", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"SHOP_SECRET"}],"retry_horizon":"3d","redrive_window":"30d"}}}`)
	loopback := write("loop.json", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"ssm":"/s"}],"retry_horizon":"3d","redrive_window":"30d"}},
		"targets":{"email":{"url":"http://127.0.0.1:8025/send"}}}`)
	private := write("private.json", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"ssm":"/s"}],"retry_horizon":"3d","redrive_window":"30d"}},
		"targets":{"crm":{"url":"https://10.0.3.7/api"}}}`)
	for _, c := range []struct {
		file, want string
		allow      func(*Props)
	}{
		{envSecret, `sources.shop.secrets[0]: "SHOP_SECRET" is read from the environment`, func(p *Props) { p.AllowEnvSecrets = true }},
		{loopback, "targets.email.url: 127.0.0.1:8025 is a loopback or private address", func(p *Props) { p.AllowPrivateTargets = true }},
		{private, "targets.crm.url: 10.0.3.7", func(p *Props) { p.AllowPrivateTargets = true }},
	} {
		p := prebuilt("arm64")
		p.SourcesFile = c.file
		if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", filepath.Base(c.file), err, c.want)
		}
		c.allow(p)
		if _, err := synthesize(p); err != nil {
			t.Errorf("%s, explicitly allowed: %v", filepath.Base(c.file), err)
		}
		p = prebuilt("arm64")
		p.SourcesFile, p.Local = c.file, true
		if _, err := synthesize(p); err != nil {
			t.Errorf("%s, on an emulator: %v", filepath.Base(c.file), err)
		}
	}
}

// TestALocalStackLeavesOutOnlyTheMetricMathAlarms: MiniStack's CloudFormation refuses an alarm
// on metric math, so a Local stack has every other alarm and none of those.
func TestALocalStackLeavesOutOnlyTheMetricMathAlarms(t *testing.T) {
	p := prebuilt("arm64")
	p.Local = true
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	local := map[string]bool{}
	for id, res := range *tpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil) {
		if (*res)["Properties"].(map[string]any)["Metrics"] != nil {
			t.Errorf("%s: a metric-math alarm on a Local stack", id)
		}
		local[id] = true
	}
	math := 0
	for id, p := range alarmsByID(t) {
		if p["Metrics"] != nil {
			math++
			continue
		}
		if !local[id] {
			t.Errorf("%s is missing from the Local stack", id)
		}
	}
	if math == 0 || len(local) == 0 {
		t.Fatalf("%d metric-math alarms, %d on the Local stack: the templates were not read", math, len(local))
	}
}
