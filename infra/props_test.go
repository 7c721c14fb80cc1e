package infra

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsroute53"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsssm"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/outbox"
)

// synthesize runs New in a stack of its own and returns its template, or the refusal.
func synthesize(props *Props, before ...func(awscdk.Stack)) (assertions.Template, error) {
	return synthesizeWith(func(stack awscdk.Stack) *Props {
		for _, f := range before {
			f(stack)
		}
		return props
	}, nil)
}

// sourcesFile writes a sources file for one test and returns its path.
func sourcesFile(t *testing.T, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func prebuilt(arch string) *Props {
	d := synth.bootstraps[arch]
	return &Props{SourcesFile: "../examples/sources.json", Receiver: ReceiverProps{Code: Code{Dir: d}}, Outbox: OutboxProps{Code: Code{Dir: d}}, Sweeper: SweeperProps{Code: Code{Dir: d}}}
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
	p.Outbox.Code = Code{Lambda: awslambda.Code_FromAsset(jsii.String(synth.bootstraps["arm64"]), nil)}
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
		{"a shard count over the maximum", func(p *Props) { p.Table.PendingShards = 5000 }, "Props.Table.PendingShards"},
		{"an environment variable the construct sets", func(p *Props) { p.Environment = map[string]string{"TABLE_NAME": "x"} }, "Props.Environment: TABLE_NAME"},
		{"a setting the functions would refuse at start", func(p *Props) { p.Environment = map[string]string{"LOG_LEVEL": "verbose"} },
			`the receiver function's environment (Props.Environment): LOG_LEVEL="verbose"`},
		{"an attempt budget that is not positive", func(p *Props) { p.Environment = map[string]string{"MAX_ATTEMPTS": "0"} }, `MAX_ATTEMPTS="0"`},
		{"a sweep min age no claim lives to", func(p *Props) { p.Environment = map[string]string{"SWEEP_MIN_AGE_SECONDS": "8640000"} },
			`(Props.Environment): SWEEP_MIN_AGE_SECONDS="8640000": want less than sources.`},
		{"a setting left empty", func(p *Props) { p.Environment = map[string]string{"MAX_ATTEMPTS": ""} }, "Props.Environment: MAX_ATTEMPTS is empty"},
		{"a custom target that is an HTTP target", func(p *Props) { p.Outbox.Executors = bounded("email") }, `Props.Outbox.Executors: "email"`},
		{"an executor that declares no bound", func(p *Props) { p.Outbox.Executors = map[string]outbox.Executor{"crm": outbox.ExecutorFunc(nil)} },
			`Props.Outbox.Executors["crm"] (outbox.ExecutorFunc) declares no bound`},
		{"two kinds of code for one function", func(p *Props) { p.Receiver.Code.GoPackage = "./x" }, "receiver.Code: set exactly one"},
		{"a sources file too big to pass inline", func(p *Props) {
			p.SourcesFile = big
			p.Outbox.Code = Code{Lambda: awslambda.Code_FromAsset(jsii.String(synth.bootstraps["arm64"]), nil)}
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
	p.Receiver.Function.ReservedConcurrency = 50
	p.Receiver.NoDuplicateProbe = true
	p.Outbox.Executors = bounded("crm", "billing")
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
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(props(map[string]any{"ONCEHOOK_TARGETS": "billing,crm", "ONCEHOOK_DUPLICATE_PROBE": "off"}))},
			"Tags":        assertions.Match_ArrayWith(&[]any{map[string]any{"Key": "oncehook:function", "Value": "receiver"}}),
		}))
	})
	// An HTTP API of the application's own: the webhook route is added to it, nothing else.
	var api awsapigatewayv2.HttpApi
	p = prebuilt("arm64")
	tpl, err = synthesize(p, func(s awscdk.Stack) {
		api = awsapigatewayv2.NewHttpApi(s, jsii.String("TheirApi"), nil)
		p.Receiver.HttpApi = api
	})
	if err != nil {
		t.Fatal(err)
	}
	must(t, func() { tpl.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Api"), jsii.Number(1)) })
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), props(map[string]any{
			"RouteKey": "POST /hooks/shop", "ApiId": map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^TheirApi"))},
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

// TestACustomDomainCarriesTheWebhookURLs: the domain, its mapping to the API's default stage
// and, given a zone, its alias record; every URL handed to providers is on the domain.
func TestACustomDomainCarriesTheWebhookURLs(t *testing.T) {
	var o *Oncehook
	tpl, err := synthesizeWith(func(stack awscdk.Stack) *Props {
		p := prebuilt("arm64")
		p.Receiver.Domain = &Domain{
			Name:        "hooks.example.com",
			Certificate: awscertificatemanager.Certificate_FromCertificateArn(stack, jsii.String("Cert"), jsii.String("arn:aws:acm:us-east-1:111111111111:certificate/abc")),
			Zone:        awsroute53.HostedZone_FromHostedZoneAttributes(stack, jsii.String("Zone"), &awsroute53.HostedZoneAttributes{HostedZoneId: jsii.String("Z123"), ZoneName: jsii.String("example.com")}),
		}
		return p
	}, &o)
	if err != nil {
		t.Fatal(err)
	}
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::DomainName"), props(map[string]any{
			"DomainName": "hooks.example.com",
			"DomainNameConfigurations": []any{assertions.Match_ObjectLike(props(map[string]any{
				"CertificateArn": "arn:aws:acm:us-east-1:111111111111:certificate/abc", "SecurityPolicy": "TLS_1_2", "EndpointType": "REGIONAL",
			}))},
		}))
	})
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::ApiMapping"), props(map[string]any{"Stage": "$default"}))
	})
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::Route53::RecordSet"), props(map[string]any{"Name": "hooks.example.com.", "Type": "A", "HostedZoneId": "Z123",
			"AliasTarget": map[string]any{
				"DNSName":      map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^OncehookDomain")), "RegionalDomainName"}},
				"HostedZoneId": map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^OncehookDomain")), "RegionalHostedZoneId"}},
			}}))
	})
	if *o.WebhookUrls["shop"] != "https://hooks.example.com/hooks/shop" || *o.WebhookUrl != "https://hooks.example.com/hooks/{source}" {
		t.Errorf("webhook URLs %s, %s: not on the domain", *o.WebhookUrls["shop"], *o.WebhookUrl)
	}
}

func TestASourceCanHaveItsOwnThrottle(t *testing.T) {
	p := prebuilt("arm64")
	p.Receiver.SourceThrottles = map[string]Throttle{"github": {Rate: 50, Burst: 100}}
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), props(map[string]any{
			"DefaultRouteSettings": map[string]any{"ThrottlingRateLimit": 1000, "ThrottlingBurstLimit": 2000},
			"RouteSettings":        map[string]any{"POST /hooks/github": map[string]any{"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100}},
		}))
	})
}

func TestAPIPropsThatCannotWorkFailTheSynth(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(awscdk.Stack, *Props)
		want string
	}{
		{"a throttle for a source the file lacks", func(_ awscdk.Stack, p *Props) { p.Receiver.SourceThrottles = map[string]Throttle{"paypal": {1, 1}} }, `"paypal" is not a source`},
		{"a throttle of zero", func(_ awscdk.Stack, p *Props) { p.Receiver.SourceThrottles = map[string]Throttle{"shop": {Rate: 10}} }, `SourceThrottles["shop"]`},
		{"a domain without a certificate", func(_ awscdk.Stack, p *Props) { p.Receiver.Domain = &Domain{Name: "hooks.example.com"} }, "Props.Receiver.Domain"},
		{"a domain on an API of the application's", func(s awscdk.Stack, p *Props) {
			p.Receiver.HttpApi = awsapigatewayv2.NewHttpApi(s, jsii.String("Mine"), nil)
			p.Receiver.Domain = &Domain{Name: "h.example.com", Certificate: awscertificatemanager.Certificate_FromCertificateArn(s, jsii.String("C"), jsii.String("arn:aws:acm:us-east-1:1:certificate/x"))}
		}, "with Props.Receiver.HttpApi"},
	} {
		_, err := synthesizeWith(func(s awscdk.Stack) *Props { p := prebuilt("arm64"); c.set(s, p); return p }, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// synthesizeWith runs New in a stack of its own with the props build makes in it (certificates
// and zones need the stack), keeping the construct in *o when o is not nil, and returns the
// template or the refusal.
func synthesizeWith(build func(awscdk.Stack) *Props, o **Oncehook) (tpl assertions.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), nil)
	n := New(stack, "Oncehook", build(stack))
	if o != nil {
		*o = n
	}
	return assertions.Template_FromStack(stack, nil), nil
}

// policyPairs is every "action resource" an inline policy of the role logicalPrefix grants.
func policyPairs(tpl assertions.Template, rolePrefix string) (pairs []string, conditions []any) {
	for _, res := range *tpl.FindResources(jsii.String("AWS::IAM::Policy"), nil) {
		p := (*res)["Properties"].(map[string]any)
		if !strings.HasPrefix(render(p["Roles"].([]any)[0]), rolePrefix) {
			continue
		}
		for _, st := range asSlice(p["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			for _, a := range listOf(st["Action"]) {
				for _, r := range listOf(st["Resource"]) {
					pairs = append(pairs, render(a)+" "+render(r))
					if st["Condition"] != nil {
						conditions = append(conditions, st["Condition"])
					}
				}
			}
		}
	}
	return pairs, conditions
}

// TestSecretReferencesOfEveryFormGrantTheRightResources: names, complete and partial ARNs,
// SSM ARNs and version or label selectors each grant the resource IAM will see, and a
// customer-managed key decrypts only through Secrets Manager and SSM.
func TestSecretReferencesOfEveryFormGrantTheRightResources(t *testing.T) {
	const secrets = `[{"secretsmanager":"hooks/shop"},` +
		`{"secretsmanager":"arn:aws:secretsmanager:eu-west-1:222222222222:secret:hooks/full-AbCdEf"},` +
		`{"secretsmanager":"arn:aws:secretsmanager:eu-west-1:222222222222:secret:hooks/partial"},` +
		`{"ssm":"/hooks/plain"},{"ssm":"/hooks/versioned:3"},{"ssm":"hooks-label:live"},` +
		`{"ssm":"arn:aws:ssm:eu-west-1:222222222222:parameter/hooks/shared:2"}]`
	file := sourcesFile(t, `{"sources":{"shop":{"scheme":"stripe","secrets":`+secrets+`,"retry_horizon":"3d","redrive_window":"30d"}}}`)
	tpl, err := synthesizeWith(func(s awscdk.Stack) *Props {
		p := prebuilt("arm64")
		p.SourcesFile = file
		p.Receiver.SecretsKeys = []awskms.IKey{awskms.Key_FromKeyArn(s, jsii.String("K"), jsii.String("arn:aws:kms:eu-west-1:222222222222:key/1234"))}
		return p
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pairs, conditions := policyPairs(tpl, "OncehookReceiverRole")
	const here = "arn:${AWS::Partition}:%s:${AWS::Region}:${AWS::AccountId}:"
	want := []string{
		"secretsmanager:GetSecretValue " + fmt.Sprintf(here, "secretsmanager") + "secret:hooks/shop-??????",
		"secretsmanager:GetSecretValue arn:aws:secretsmanager:eu-west-1:222222222222:secret:hooks/full-AbCdEf",
		"secretsmanager:GetSecretValue arn:aws:secretsmanager:eu-west-1:222222222222:secret:hooks/full-AbCdEf-??????",
		"secretsmanager:GetSecretValue arn:aws:secretsmanager:eu-west-1:222222222222:secret:hooks/partial",
		"secretsmanager:GetSecretValue arn:aws:secretsmanager:eu-west-1:222222222222:secret:hooks/partial-??????",
		"ssm:GetParameter " + fmt.Sprintf(here, "ssm") + "parameter/hooks/plain",
		"ssm:GetParameter " + fmt.Sprintf(here, "ssm") + "parameter/hooks/versioned",
		"ssm:GetParameter " + fmt.Sprintf(here, "ssm") + "parameter/hooks-label",
		"ssm:GetParameter arn:aws:ssm:eu-west-1:222222222222:parameter/hooks/shared",
		"kms:Decrypt arn:aws:kms:eu-west-1:222222222222:key/1234",
	}
	have := map[string]bool{}
	for _, p := range pairs {
		have[p] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("the receiver may not %s", w)
		}
	}
	for _, p := range pairs {
		if strings.HasPrefix(p, "secretsmanager:") || strings.HasPrefix(p, "ssm:") || strings.HasPrefix(p, "kms:") {
			if !slices.Contains(want, p) {
				t.Errorf("the receiver may also %s", p)
			}
		}
	}
	via := fmt.Sprint(conditions)
	if len(conditions) != 1 || !strings.Contains(via, "kms:ViaService") || !strings.Contains(via, "secretsmanager.") || !strings.Contains(via, "ssm.") {
		t.Errorf("the key's grant has conditions %v, want kms:ViaService Secrets Manager and SSM", conditions)
	}
}

// TestTheTableCanBeUnderACustomerManagedKey: the table's SSE names the key, and each function
// may use it (the stream's records are read under it too).
func TestTheTableCanBeUnderACustomerManagedKey(t *testing.T) {
	tpl, err := synthesizeWith(func(s awscdk.Stack) *Props {
		p := prebuilt("arm64")
		p.Table.Encryption = awsdynamodb.TableEncryption_CUSTOMER_MANAGED
		p.Table.Key = awskms.NewKey(s, jsii.String("TableKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
		return p
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), props(map[string]any{
			"SSESpecification": map[string]any{"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^TableKey")), "Arn"}}},
		}))
	})
	for _, fn := range []string{"Receiver", "Outbox", "Sweeper"} {
		pairs, _ := policyPairs(tpl, "Oncehook"+fn+"Role")
		if !slices.Contains(pairs, "kms:Decrypt TableKey.Arn") || !slices.Contains(pairs, "kms:GenerateDataKey* TableKey.Arn") {
			t.Errorf("%s may not use the table's key: %v", fn, pairs)
		}
	}
	// The default: AWS owned, no key, no grants.
	if pairs, _ := policyPairs(synth.tpl, "Oncehook"); slices.ContainsFunc(pairs, func(p string) bool { return strings.HasPrefix(p, "kms:") }) {
		t.Error("a KMS grant without a customer-managed key")
	}
	p := prebuilt("arm64")
	p.Table.Key = awskms.Key_FromKeyArn(awscdk.NewStack(awscdk.NewApp(nil), jsii.String("K"), nil), jsii.String("K"), jsii.String("arn:aws:kms:us-east-1:1:key/x"))
	if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), "Props.Table.Key") {
		t.Errorf("a key without CUSTOMER_MANAGED: got %v", err)
	}
}

// TestTheLeakAuditRunsWithTheSweeperWhenAskedFor: the sweeper gets the prefixes, may Scan the
// table (and only then), and EffectsWithoutClaim is alarmed; prefixes that cannot work fail
// the synth, naming the prop.
func TestTheLeakAuditRunsWithTheSweeperWhenAskedFor(t *testing.T) {
	p := prebuilt("arm64")
	p.Sweeper.AuditPrefixes, p.Sweeper.AuditSample = []string{"ORDER#", "SHIPMENT#"}, 40
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	must(t, func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), props(map[string]any{
			"Description": "oncehook sweeper",
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(props(map[string]any{"AUDIT_PREFIXES": "ORDER#,SHIPMENT#", "AUDIT_SAMPLE": "40"}))},
		}))
	})
	if pairs, _ := policyPairs(tpl, "OncehookSweeperRole"); !slices.Contains(pairs, "dynamodb:Scan OncehookTable.Arn") {
		t.Errorf("the sweeper may not scan: %v", pairs)
	}
	for _, role := range []string{"OncehookReceiverRole", "OncehookOutboxRole"} {
		if pairs, _ := policyPairs(tpl, role); slices.ContainsFunc(pairs, func(p string) bool { return strings.HasPrefix(p, "dynamodb:Scan") }) {
			t.Errorf("%s may scan", role)
		}
	}
	found := false
	for id, res := range *tpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil) {
		if strings.HasPrefix(id, "OncehookEffectsWithoutClaim") {
			found = (*res)["Properties"].(map[string]any)["MetricName"] == "EffectsWithoutClaim"
		}
	}
	if !found {
		t.Error("no EffectsWithoutClaim alarm")
	}
	// Without prefixes (the default stack), no audit, no scan, no alarm.
	if pairs, _ := policyPairs(synth.tpl, "OncehookSweeperRole"); slices.Contains(pairs, "dynamodb:Scan OncehookTable.Arn") {
		t.Error("the sweeper may scan without an audit")
	}
	for _, c := range []struct {
		prefixes []string
		sample   int
		want     string
	}{{[]string{"ORDER#", "EVT#"}, 0, "Props.Sweeper.AuditPrefixes[1]"}, {[]string{"ORDER#"}, 5000, "Props.Sweeper.AuditSample"}, {nil, 50, "Props.Sweeper.AuditPrefixes"}} {
		p := prebuilt("arm64")
		p.Sweeper.AuditPrefixes, p.Sweeper.AuditSample = c.prefixes, c.sample
		if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %d: got %v, want %s", c.prefixes, c.sample, err, c.want)
		}
	}
}

// TestEveryProviderSchemeSynthesizes: the example with one source of every scheme deploys;
// Intercom's source also answers the HEAD Intercom checks a new endpoint with, and a public-key
// source (Discord, SendGrid) is granted no secret.
func TestEveryProviderSchemeSynthesizes(t *testing.T) {
	p := prebuilt("arm64")
	p.SourcesFile = "../examples/sources.providers.json"
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	for _, res := range *tpl.FindResources(jsii.String("AWS::ApiGatewayV2::Route"), nil) {
		routes[(*res)["Properties"].(map[string]any)["RouteKey"].(string)] = true
	}
	if !routes["HEAD /hooks/intercom"] || !routes["POST /hooks/intercom"] || routes["HEAD /hooks/stripe"] || !routes["POST /hooks/sendgrid"] {
		t.Fatalf("routes %v: want POST for every source and HEAD for intercom alone", routes)
	}
	pairs, _ := policyPairs(tpl, "OncehookReceiverRole")
	for _, pair := range pairs {
		if strings.Contains(pair, "discord") || strings.Contains(pair, "sendgrid") {
			t.Errorf("the receiver is granted %s: a public-key source has no secret", pair)
		}
	}
}

// TestTheApplicationsOwnTablesAreGrantedWhatTheirEffectsDo: each table of the sources file's
// tables gets exactly the actions its effects need, on that table alone, for the receiver only.
func TestTheApplicationsOwnTablesAreGrantedWhatTheirEffectsDo(t *testing.T) {
	p := prebuilt("arm64")
	p.SourcesFile = sourcesFile(t, `{"sources":{"shop":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/shop"}],"redrive_window":"30d"}},
	  "tables":{"orders":{"name":"Orders-prod","partition_key":"order_id","actions":["put","check"],"audit":true},
	            "ledger":{"name":"arn:aws:dynamodb:eu-west-1:222222222222:table/Ledger","partition_key":"account","sort_key":"seq","actions":["update"]}}}`)
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	pairs, _ := policyPairs(tpl, "OncehookReceiverRole")
	var got []string
	for _, pair := range pairs {
		if strings.Contains(pair, "Orders-prod") || strings.Contains(pair, "Ledger") {
			got = append(got, pair)
		}
	}
	slices.Sort(got)
	want := []string{
		"dynamodb:ConditionCheckItem arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/Orders-prod",
		"dynamodb:PutItem arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/Orders-prod",
		"dynamodb:UpdateItem arn:aws:dynamodb:eu-west-1:222222222222:table/Ledger",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the receiver's grants on the application's tables:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for role, allowed := range map[string]string{"OncehookOutboxRole": "", "OncehookSweeperRole": "dynamodb:Scan arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/Orders-prod"} {
		pairs, _ := policyPairs(tpl, role)
		for _, pair := range pairs {
			if (strings.Contains(pair, "Orders-prod") || strings.Contains(pair, "Ledger")) && pair != allowed {
				t.Errorf("%s is granted %s: only the receiver writes effects, and the sweeper reads only audited tables", role, pair)
			}
		}
		if allowed != "" && !slices.Contains(pairs, allowed) {
			t.Errorf("%s is not granted %s for the audited table", role, allowed)
		}
	}
}

// TestAWSTargetsAreGrantedTheirOneCall: each AWS target of the sources file gives the outbox
// and the sweeper its service's one call on that resource (and Step Functions the read of its
// type, which the executor acts on, and of its executions), the receiver nothing.
func TestAWSTargetsAreGrantedTheirOneCall(t *testing.T) {
	const acct = "arn:aws:%s:eu-west-1:222222222222:%s"
	p := prebuilt("arm64")
	p.SourcesFile = sourcesFile(t, fmt.Sprintf(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/shop"}],"redrive_window":"30d"}},
	  "targets":{"q":{"type":"sqs","arn":%q,"group_id":"g"},"n":{"type":"sns","arn":%q},"e":{"type":"eventbridge"},
	             "s":{"type":"stepfunctions","arn":%q},"l":{"type":"lambda","arn":%q,"invocation":"request-response"}}}`,
		fmt.Sprintf(acct, "sqs", "orders.fifo"), fmt.Sprintf(acct, "sns", "alerts"), fmt.Sprintf(acct, "states", "stateMachine:fulfil"), fmt.Sprintf(acct, "lambda", "function:crm")))
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"events:PutEvents arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default",
		"lambda:InvokeFunction arn:aws:lambda:eu-west-1:222222222222:function:crm",
		"sns:Publish arn:aws:sns:eu-west-1:222222222222:alerts",
		"sqs:SendMessage arn:aws:sqs:eu-west-1:222222222222:orders.fifo",
		"states:DescribeExecution arn:aws:states:eu-west-1:222222222222:execution:fulfil:*",
		"states:DescribeStateMachine arn:aws:states:eu-west-1:222222222222:stateMachine:fulfil",
		"states:StartExecution arn:aws:states:eu-west-1:222222222222:stateMachine:fulfil",
	}
	for _, role := range []string{"OncehookOutboxRole", "OncehookSweeperRole", "OncehookReceiverRole"} {
		pairs, _ := policyPairs(tpl, role)
		var got []string
		for _, pair := range pairs {
			if strings.Contains(pair, "222222222222") || strings.Contains(pair, "event-bus") {
				got = append(got, pair)
			}
		}
		slices.Sort(got)
		expect := want
		if role == "OncehookReceiverRole" {
			expect = nil
		}
		if strings.Join(got, "\n") != strings.Join(expect, "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", role, strings.Join(got, "\n"), strings.Join(expect, "\n"))
		}
	}
}

// TestTheSynthSizesEveryFunctionForTheSlowestTargetAsTheWorkerChecksIt: the lease and both
// functions' timeouts come from outbox.PlanTimings over the targets' timeouts, the computation
// the worker's start checks: a Step Functions target of 30 s (over 27.5 s, where a lease sized
// from twice the timeout once failed the start) synthesizes, the worker accepts the lease the
// stack passes, and the sweeper's timeout fits that target's call with its margins. A target
// whose calls no outbox function could run a batch of is refused, naming it.
func TestTheSynthSizesEveryFunctionForTheSlowestTargetAsTheWorkerChecksIt(t *testing.T) {
	for _, timeout := range []string{"28s", "30s", "55s", "60s"} {
		t.Run(timeout, func(t *testing.T) {
			p := prebuilt("arm64")
			p.SourcesFile = sourcesFile(t, fmt.Sprintf(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/shop"}],"redrive_window":"30d"}},
			  "targets":{"s":{"type":"stepfunctions","arn":"arn:aws:states:eu-west-1:222222222222:stateMachine:fulfil","timeout":%q}}}`, timeout))
			tpl, err := synthesize(p)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := time.ParseDuration(timeout)
			fns := map[string]map[string]any{}
			for _, res := range *tpl.FindResources(jsii.String("AWS::Lambda::Function"), nil) {
				props := (*res)["Properties"].(map[string]any)
				fns[fmt.Sprint(props["Description"])] = props
			}
			outboxFn, sweeperFn := fns["oncehook outbox"], fns["oncehook sweeper"]
			lease, err := strconv.Atoi(fmt.Sprint(outboxFn["Environment"].(map[string]any)["Variables"].(map[string]any)["LEASE_SECONDS"]))
			if err != nil {
				t.Fatal(err)
			}
			// The Step Functions executor's longest call is its Timeout (outbox/targets; that
			// package's SDK clients are not this module's dependencies).
			x := boundedExecutor(d)
			if _, err := outbox.New(&dynamodb.Client{}, outbox.Config{Table: "t", Lease: time.Duration(lease) * time.Second, Executors: map[string]outbox.Executor{"s": x}}); err != nil {
				t.Fatalf("LEASE_SECONDS=%d: the worker refuses the lease the stack gives it: %v", lease, err)
			}
			if got := time.Duration(sweeperFn["Timeout"].(float64)) * time.Second; got < x.MaxDuration()+3*outbox.DefaultMargin || got < outbox.DefaultSweeperTimeout {
				t.Fatalf("sweeper timeout %s cannot run a %s call with its margins", got, x.MaxDuration())
			}
			if got := time.Duration(outboxFn["Timeout"].(float64)) * time.Second; got < (d+outbox.DefaultMargin)+outbox.DefaultMargin {
				t.Fatalf("outbox timeout %s cannot run a batch of 100 records at once", got)
			}
		})
	}
	p := prebuilt("arm64")
	p.Outbox.StreamBatchSize = 1000 // four rounds of 256 records
	p.SourcesFile = sourcesFile(t, `{"sources":{"shop":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/shop"}],"redrive_window":"30d"}},
	  "targets":{"slow":{"type":"http","url":"https://example.com/x","timeout":"10m"}}}`)
	if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), `"slow"`) {
		t.Fatalf("%v: want the synth refused, naming the slow target", err)
	}
}

// boundedExecutor is an executor whose calls take up to its duration (outbox.Bounded).
type boundedExecutor time.Duration

func (boundedExecutor) Execute(context.Context, outbox.Task) error { return nil }
func (b boundedExecutor) MaxDuration() time.Duration               { return time.Duration(b) }

// bounded is the application's executors for targets, each bounded at 5 s.
func bounded(targets ...string) map[string]outbox.Executor {
	m := map[string]outbox.Executor{}
	for _, t := range targets {
		m[t] = boundedExecutor(5 * time.Second)
	}
	return m
}

// TestTheSynthSizesTheLeaseFromTheApplicationsExecutors: an application's executor is sized
// by the bound it declares, as the sources file's targets by their timeouts: a 70 s CRM call
// gets a 75 s lease, which the worker accepts with that executor, and its target is among
// the functions' ONCEHOOK_TARGETS.
func TestTheSynthSizesTheLeaseFromTheApplicationsExecutors(t *testing.T) {
	p := prebuilt("arm64")
	crm := boundedExecutor(70 * time.Second)
	p.Outbox.Executors = map[string]outbox.Executor{"crm": crm}
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range *tpl.FindResources(jsii.String("AWS::Lambda::Function"), nil) {
		props := (*res)["Properties"].(map[string]any)
		if props["Description"] != "oncehook outbox" {
			continue
		}
		vars := props["Environment"].(map[string]any)["Variables"].(map[string]any)
		if vars["LEASE_SECONDS"] != "75" || vars["ONCEHOOK_TARGETS"] != "crm" {
			t.Fatalf("LEASE_SECONDS %v, ONCEHOOK_TARGETS %v: want 75 and crm", vars["LEASE_SECONDS"], vars["ONCEHOOK_TARGETS"])
		}
		if _, err := outbox.New(&dynamodb.Client{}, outbox.Config{Table: "t", Lease: 75 * time.Second, Executors: p.Outbox.Executors}); err != nil {
			t.Fatalf("the worker refuses the lease the stack gives it: %v", err)
		}
		return
	}
	t.Fatal("no outbox function")
}

// functionEnvironments is each function's environment variables by its role (receiver,
// outbox, sweeper), a value CloudFormation completes at deploy rendered.
func functionEnvironments(t *testing.T, tpl assertions.Template) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for name, fn := range functionsByTag(t, tpl) {
		out[name] = map[string]string{}
		for k, v := range envOf(fn) {
			out[name][k] = render(v)
		}
	}
	return out
}

// TestTheStartReadsTheApplicationsTargetsAndAuditPrefixesAsTheSynthWasGivenThem: the
// application's executors' targets (ONCEHOOK_TARGETS) and the leak audit's prefixes
// (AUDIT_PREFIXES) are comma-separated lists at start, read with their entries trimmed. A
// target or a prefix that list would read as another ("crm,billing" as crm and billing, " crm"
// as crm: targets no executor of the application's map serves, so the outbox refuses to start)
// fails the synth naming its prop; else every function reads back exactly what it was given.
func TestTheStartReadsTheApplicationsTargetsAndAuditPrefixesAsTheSynthWasGivenThem(t *testing.T) {
	for _, c := range []struct {
		name    string
		set     func(*Props)
		prop    string
		want    []string
		current func(deployment.Settings) []string
	}{
		{"a target with a comma", func(p *Props) { p.Outbox.Executors = bounded("crm,billing") }, "Props.Outbox.Executors",
			[]string{"crm,billing"}, func(s deployment.Settings) []string { return s.Targets }},
		{"a target with a space around it", func(p *Props) { p.Outbox.Executors = bounded(" crm") }, "Props.Outbox.Executors",
			[]string{" crm"}, func(s deployment.Settings) []string { return s.Targets }},
		{"an empty target", func(p *Props) { p.Outbox.Executors = bounded("") }, "Props.Outbox.Executors",
			[]string{""}, func(s deployment.Settings) []string { return s.Targets }},
		{"a prefix with a comma", func(p *Props) { p.Sweeper.AuditPrefixes = []string{"ORDER#,INV#"} }, "Props.Sweeper.AuditPrefixes",
			[]string{"ORDER#,INV#"}, func(s deployment.Settings) []string { return s.AuditPrefixes }},
		{"a prefix with a space around it", func(p *Props) { p.Sweeper.AuditPrefixes = []string{" ORDER#"} }, "Props.Sweeper.AuditPrefixes",
			[]string{" ORDER#"}, func(s deployment.Settings) []string { return s.AuditPrefixes }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := prebuilt("arm64")
			c.set(p)
			tpl, err := synthesize(p)
			if err != nil {
				if !strings.Contains(err.Error(), c.prop) {
					t.Fatalf("refused without naming %s: %v", c.prop, err)
				}
				return
			}
			for name, env := range functionEnvironments(t, tpl) {
				if c.prop == "Props.Sweeper.AuditPrefixes" && name != "sweeper" {
					continue
				}
				s, err := deployment.FromEnv(func(k string) string { return env[k] })
				if err != nil {
					t.Fatalf("%s: the start refuses what the synth accepted: %v", name, err)
				}
				if got := c.current(s); !slices.Equal(got, c.want) {
					t.Errorf("%s: the start reads %q, the synth was given %q", name, got, c.want)
				}
			}
		})
	}
}

// TestALeaseForATimeoutOfAFractionOfASecondIsOneTheWorkerAccepts: a target's timeout (or an
// executor's bound) may be a fraction of a second ("55.5s"), and the lease the synth derives
// from it with the margin then is too; LEASE_SECONDS is whole seconds. The synth either refuses
// such a timeout naming the target, or writes a lease the worker's start accepts with that
// target: never one rounded down below the call plus its margin (a batch of 512, two rounds of
// 256, gives the functions whole-second timeouts and a 60.5 s lease, written as 60), nor a
// refusal from CloudFormation's whole seconds that names nothing of the props.
func TestALeaseForATimeoutOfAFractionOfASecondIsOneTheWorkerAccepts(t *testing.T) {
	for _, c := range []struct {
		timeout string
		batch   float64
	}{{"55.5s", 512}, {"60.5s", 0}} {
		t.Run(c.timeout, func(t *testing.T) {
			p := prebuilt("arm64")
			p.Outbox.StreamBatchSize = c.batch
			p.SourcesFile = sourcesFile(t, fmt.Sprintf(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/shop"}],"redrive_window":"30d"}},
			  "targets":{"slow":{"type":"http","url":"https://example.com/x","timeout":%q}}}`, c.timeout))
			tpl, err := synthesize(p)
			if err != nil {
				if !strings.Contains(err.Error(), `"slow"`) && !strings.Contains(err.Error(), "targets.slow") {
					t.Fatalf("refused without naming the target: %v", err)
				}
				return
			}
			d, _ := time.ParseDuration(c.timeout)
			for _, name := range []string{"outbox", "sweeper"} {
				lease, err := strconv.Atoi(functionEnvironments(t, tpl)[name]["LEASE_SECONDS"])
				if err != nil {
					t.Fatal(err)
				}
				x := &outbox.HTTPExecutor{URL: "https://example.com/x", Timeout: d}
				if _, err := outbox.New(&dynamodb.Client{}, outbox.Config{Table: "t", Lease: time.Duration(lease) * time.Second, Executors: map[string]outbox.Executor{"slow": x}}); err != nil {
					t.Errorf("%s: LEASE_SECONDS=%d: the worker refuses the lease the stack gives it: %v", name, lease, err)
				}
			}
		})
	}
}

// TestAFractionalDeliveryTimeoutGivesTheReceiverTheNextWholeSecond: a source's delivery_timeout
// may be a fraction of a second ("2500ms"), as the sources file and the receiver's start take
// it, and a Lambda timeout is whole seconds. The receiver's is the tightest delivery timeout
// rounded up, never down: the handler answers a second before each source's own delivery
// timeout, or before its invocation ends if that comes first, so an invocation that ends no
// sooner than the tightest source's timeout leaves every source its own time. The latency
// alarm keeps the delivery timeout itself.
func TestAFractionalDeliveryTimeoutGivesTheReceiverTheNextWholeSecond(t *testing.T) {
	for _, c := range []struct {
		timeout string
		want    float64
	}{{"2500ms", 3}, {"9.001s", 10}, {"28.5s", 29}, {"7s", 7}} {
		t.Run(c.timeout, func(t *testing.T) {
			p := prebuilt("arm64")
			p.SourcesFile = sourcesFile(t, fmt.Sprintf(`{"sources":{
			  "shop":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/shop"}],"redrive_window":"30d","delivery_timeout":%q},
			  "slow":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/slow"}],"redrive_window":"30d","delivery_timeout":"29s"}}}`, c.timeout))
			tpl, err := synthesize(p)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := time.ParseDuration(c.timeout)
			got := functionsByTag(t, tpl)["receiver"]["Timeout"]
			if got != c.want {
				t.Errorf("receiver timeout %v, want %v", got, c.want)
			}
			if end := time.Duration(c.want) * time.Second; end < d || end >= d+time.Second {
				t.Fatalf("the case's own want %s is not the delivery timeout %s rounded up", end, d)
			}
			for id, res := range *tpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), nil) {
				if strings.HasPrefix(id, "OncehookReceiverLatency") {
					if th := (*res)["Properties"].(map[string]any)["Threshold"]; th != 0.8*float64(d.Milliseconds()) {
						t.Errorf("ReceiverLatency threshold %v, want 80%% of %s", th, d)
					}
				}
			}
		})
	}
}

// TestASettingOfPropsEnvironmentKnownOnlyAtDeployIsLeftToTheStart: a setting the functions'
// start reads (LOG_LEVEL, MAX_ATTEMPTS, SWEEP_MIN_AGE_SECONDS, ONCEHOOK_SECRETS_MAX_AGE) may be
// a CDK token, a CloudFormation parameter or an SSM parameter's value, which has no value at
// synth: the synth passes it to the functions, which check it at start, as it does an
// OpenTelemetry setting's, rather than refuse the placeholder text it sees. A literal setting
// beside it is still checked at synth.
func TestASettingOfPropsEnvironmentKnownOnlyAtDeployIsLeftToTheStart(t *testing.T) {
	for _, c := range []struct {
		name  string
		value func(s awscdk.Stack, setting string) string
	}{
		{"a CloudFormation parameter", func(s awscdk.Stack, setting string) string {
			return *awscdk.NewCfnParameter(s, jsii.String(strings.ReplaceAll(setting, "_", "")), &awscdk.CfnParameterProps{Type: jsii.String("String")}).ValueAsString()
		}},
		{"an SSM parameter's value", func(s awscdk.Stack, setting string) string {
			return *awsssm.StringParameter_ValueForStringParameter(s, jsii.String("/hooks/"+setting), nil)
		}},
		{"a value with a token in it", func(s awscdk.Stack, setting string) string {
			return "1" + *awscdk.NewCfnParameter(s, jsii.String(strings.ReplaceAll(setting, "_", "")), &awscdk.CfnParameterProps{Type: jsii.String("String")}).ValueAsString()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tpl, err := synthesizeWith(func(s awscdk.Stack) *Props {
				p := prebuilt("arm64")
				p.Environment = map[string]string{}
				for _, k := range settable {
					p.Environment[k] = c.value(s, k)
				}
				return p
			}, nil)
			if err != nil {
				t.Fatalf("refused at synth, though the start checks it: %v", err)
			}
			for fn, props := range functionsByTag(t, tpl) {
				env := envOf(props)
				for _, k := range settable {
					if _, literal := env[k].(string); literal {
						t.Errorf("%s: %s=%v holds no reference to the value known at deploy", fn, k, env[k])
					}
				}
			}
		})
	}
	_, err := synthesizeWith(func(s awscdk.Stack) *Props {
		p := prebuilt("arm64")
		p.Environment = map[string]string{"MAX_ATTEMPTS": *awscdk.NewCfnParameter(s, jsii.String("MaxAttempts"), nil).ValueAsString(), "LOG_LEVEL": "verbose"}
		return p
	}, nil)
	if err == nil || !strings.Contains(err.Error(), `LOG_LEVEL="verbose"`) {
		t.Errorf("beside a token, a literal LOG_LEVEL the start refuses: got %v, want it refused", err)
	}
}

// TestAnExecutorForATargetOfTheSourcesFileIsRefusedNamingTheTargetsType: the application's
// executor for a target the sources file also has is refused, the target named with its type
// (an AWS target is no HTTP one).
func TestAnExecutorForATargetOfTheSourcesFileIsRefusedNamingTheTargetsType(t *testing.T) {
	for typ, target := range map[string]string{
		"http":          `{"url":"https://example.com/x"}`,
		"sqs":           `{"type":"sqs","arn":"arn:aws:sqs:us-east-1:111111111111:audit"}`,
		"sns":           `{"type":"sns","arn":"arn:aws:sns:us-east-1:111111111111:audit"}`,
		"eventbridge":   `{"type":"eventbridge","arn":"default"}`,
		"stepfunctions": `{"type":"stepfunctions","arn":"arn:aws:states:us-east-1:111111111111:stateMachine:audit"}`,
		"lambda":        `{"type":"lambda","arn":"arn:aws:lambda:us-east-1:111111111111:function:audit"}`,
	} {
		t.Run(typ, func(t *testing.T) {
			file := sourcesFile(t, `{"sources":{"shop":{"scheme":"stripe","secrets":[{"secretsmanager":"hooks/shop"}],"redrive_window":"30d"}},"targets":{"audit":`+target+`}}`)
			_, _, _, err := configure(&Props{SourcesFile: file, Outbox: OutboxProps{Executors: bounded("audit")}})
			if err == nil {
				t.Fatal("accepted")
			}
			want := fmt.Sprintf(`Props.Outbox.Executors: "audit" is also a target of the sources file (type %s)`, typ)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("got %v, want %q", err, want)
			}
		})
	}
}
