package infra

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsroute53"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// ReceiverProps override the receiver's defaults (Props.Receiver): oncehook's own receiver
// package, on a new HTTP API throttled to 1,000 requests a second (bursts of 2,000), with no
// reserved concurrency.
type ReceiverProps struct {
	// Code is the function's code (default ReceiverPackage, built from Props.GoModuleDir).
	Code Code
	// Function is the function's options over the construct-wide ones.
	Function FunctionOptions
	// SecretsKeys are the customer-managed KMS keys the sources file's secrets are under: the
	// receiver may decrypt with them through Secrets Manager and SSM only.
	SecretsKeys []awskms.IKey
	// HttpApi is an existing HTTP API to add the webhook routes to; default a new one.
	HttpApi awsapigatewayv2.HttpApi
	// ThrottleRate and ThrottleBurst bound the new API's requests per second (default 1,000
	// and 2,000), so API Gateway, not the receiver, refuses a flood.
	ThrottleRate, ThrottleBurst float64
	// SourceThrottles overrides them on a source's own route (POST /hooks/<name>), so one
	// provider's flood cannot use up another's allowance. Only with the construct's own API.
	SourceThrottles map[string]Throttle
	// NoDuplicateProbe turns off the receiver's duplicate probe (receiver.Config.NoDuplicateProbe).
	NoDuplicateProbe bool
	// Domain serves the construct's own API on a custom domain, so the URL each provider is
	// given survives replacing the API.
	Domain *Domain
}

// Throttle is a steady rate (requests per second) and a burst.
type Throttle struct {
	Rate, Burst float64
}

// Domain is a custom domain for the webhook API.
type Domain struct {
	// Name is the domain name, such as hooks.example.com (required).
	Name string
	// Certificate is an ACM certificate covering Name, in the stack's region (required).
	Certificate awscertificatemanager.ICertificate
	// Zone gets an alias A record for Name; without it, point a CNAME at Oncehook.DomainTarget.
	Zone awsroute53.IHostedZone
}

// receiver is the receiver: its function, allowed what its transaction and its secrets
// need, behind the webhook API (one route per source).
func (b *builder) receiver() error {
	cfg, file, o := b.cfg, b.file, b.o
	// Lambda's timeout is whole seconds; a delivery_timeout may not be ("2500ms"). Rounded up,
	// never down: the handler answers by each source's own time (receiver's answerBy), which
	// an invocation ending no sooner than the tightest source's leaves in force.
	timeout := math.Ceil(receiverTimeout(file).Seconds())
	fn, err := b.function("Receiver", cfg.Receiver.Function, b.settings, timeout)
	if err != nil {
		return err
	}
	o.Receiver = fn
	// Least privilege: exactly the calls its code makes (launch/testdata/calls.json, which the
	// IAM test holds these to): ownTableActions, and BatchGetItem of a redelivered batch's claims.
	allow(fn, append(ownTableActions(), "dynamodb:BatchGetItem"), o.Table.TableArn())
	grantSecrets(b.stack, file, fn, cfg.Receiver.SecretsKeys)
	b.grantTables(fn)
	grantTableKey(fn, o.Table.EncryptionKey())

	api, base := webhookAPI(b.c, cfg, file, fn, o)
	o.Api = api
	o.WebhookUrl = jsii.String(base + receiver.Route)
	o.WebhookUrls = map[string]*string{}
	for _, name := range file.Names() {
		o.WebhookUrls[name] = jsii.String(base + receiver.Path(name))
	}
	return nil
}

// checkReceiver fills in the API's throttling defaults and refuses a source throttle for no
// source, a domain without its name or certificate, and either with an API of the app's own.
func checkReceiver(cfg *Props, file *sources.File) error {
	// API Gateway's rate is a number of requests a second, its burst a whole number of them.
	if !knob(&cfg.Receiver.ThrottleRate, 1000, 0, math.MaxFloat64, false) {
		return fmt.Errorf("Props.Receiver.ThrottleRate %g: must be a positive number of requests a second", cfg.Receiver.ThrottleRate)
	}
	if !knob(&cfg.Receiver.ThrottleBurst, 2000, 0, math.MaxInt32, true) {
		return fmt.Errorf("Props.Receiver.ThrottleBurst %g: must be a positive whole number of requests", cfg.Receiver.ThrottleBurst)
	}
	for _, name := range sortedKeys(cfg.Receiver.SourceThrottles) {
		th := cfg.Receiver.SourceThrottles[name]
		if file.Sources[name] == nil {
			return fmt.Errorf("Props.Receiver.SourceThrottles: %q is not a source of the sources file", name)
		}
		if th.Rate <= 0 || th.Burst <= 0 || !knob(&th.Rate, 0, 0, math.MaxFloat64, false) || !knob(&th.Burst, 0, 0, math.MaxInt32, true) {
			return fmt.Errorf("Props.Receiver.SourceThrottles[%q]: Rate and Burst must both be positive, Burst a whole number", name)
		}
	}
	if i := slices.Index(cfg.Receiver.SecretsKeys, nil); i >= 0 {
		return fmt.Errorf("Props.Receiver.SecretsKeys[%d]: nil; the secrets under a key need its grant", i)
	}
	if cfg.Receiver.Domain != nil && (cfg.Receiver.Domain.Name == "" || cfg.Receiver.Domain.Certificate == nil) {
		return errors.New("Props.Receiver.Domain: Name and Certificate are required")
	}
	if cfg.Receiver.HttpApi != nil && (cfg.Receiver.Domain != nil || len(cfg.Receiver.SourceThrottles) > 0) {
		return errors.New("Props.Receiver.Domain and Props.Receiver.SourceThrottles configure the construct's own API: with Props.Receiver.HttpApi, map domains and set route throttling on that API")
	}
	return nil
}

// accessLogFormat is one JSON line per request: who sent it, to which route, what API Gateway
// and the receiver answered, how long each took, and why an integration failed.
const accessLogFormat = `{"requestId":"$context.requestId","requestTime":"$context.requestTime","ip":"$context.identity.sourceIp",` +
	`"userAgent":"$context.identity.userAgent","method":"$context.httpMethod","path":"$context.path","routeKey":"$context.routeKey",` +
	`"protocol":"$context.protocol","status":"$context.status","responseLength":"$context.responseLength","latency":"$context.responseLatency",` +
	`"integrationStatus":"$context.integrationStatus","integrationLatency":"$context.integrationLatency",` +
	`"error":"$context.error.message","integrationError":"$context.integrationErrorMessage"}`

// webhookAPI adds one route per source, POST receiver.Path(name), to the API (any other source is
// answered 404 by API Gateway, without starting the receiver) and returns it with the base URL
// the providers are given.
func webhookAPI(c constructs.Construct, cfg Props, file *sources.File, fn awslambda.Function, o *Oncehook) (awsapigatewayv2.HttpApi, string) {
	api := cfg.Receiver.HttpApi
	if api == nil {
		var mapping *awsapigatewayv2.DomainMappingOptions
		if d := cfg.Receiver.Domain; d != nil {
			dn := awsapigatewayv2.NewDomainName(c, jsii.String("Domain"), &awsapigatewayv2.DomainNameProps{
				DomainName: jsii.String(d.Name), Certificate: d.Certificate, SecurityPolicy: awsapigatewayv2.SecurityPolicy_TLS_1_2,
			})
			mapping = &awsapigatewayv2.DomainMappingOptions{DomainName: dn}
			o.DomainTarget = dn.RegionalDomainName()
			if d.Zone != nil {
				// An alias to the domain, written as its template states it: awsroute53targets'
				// Go package would bring CloudFront, RDS and more into every CDK app's build.
				awsroute53.NewCfnRecordSet(c, jsii.String("DomainRecord"), &awsroute53.CfnRecordSetProps{
					HostedZoneId: d.Zone.HostedZoneId(), Name: jsii.String(strings.TrimSuffix(d.Name, ".") + "."), Type: jsii.String("A"),
					AliasTarget: &awsroute53.CfnRecordSet_AliasTargetProperty{DnsName: dn.RegionalDomainName(), HostedZoneId: dn.RegionalHostedZoneId()},
				})
			}
		}
		api = awsapigatewayv2.NewHttpApi(c, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
			Description:          jsii.String("oncehook webhook receiver"),
			DefaultDomainMapping: mapping,
		})
		o.AccessLogs = logGroup(c, "ApiAccessLogs", cfg)
		stage := api.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage)
		stage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
			DestinationArn: o.AccessLogs.LogGroupArn(),
			Format:         jsii.String(accessLogFormat),
		})
		stage.SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
			ThrottlingRateLimit:  jsii.Number(cfg.Receiver.ThrottleRate),
			ThrottlingBurstLimit: jsii.Number(cfg.Receiver.ThrottleBurst),
		})
		if len(cfg.Receiver.SourceThrottles) > 0 {
			settings := map[string]any{}
			for name, th := range cfg.Receiver.SourceThrottles {
				// CloudFormation's own keys: RouteSettings is a JSON map, which jsii passes as is.
				settings["POST "+receiver.Path(name)] = map[string]any{"ThrottlingRateLimit": th.Rate, "ThrottlingBurstLimit": th.Burst}
			}
			stage.SetRouteSettings(settings)
		}
	}
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ReceiverIntegration"), fn, nil)
	for _, name := range file.Names() {
		methods := []awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_POST}
		if file.Sources[name].Scheme == "intercom" {
			// Intercom checks a new endpoint with a HEAD before it sends anything.
			methods = append(methods, awsapigatewayv2.HttpMethod_HEAD)
		}
		api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(receiver.Path(name)),
			Methods:     &methods,
			Integration: integration,
		})
	}
	base := *api.ApiEndpoint()
	if cfg.Receiver.Domain != nil {
		base = "https://" + cfg.Receiver.Domain.Name
	}
	return api, base
}

// receiverTimeout is the tightest provider's delivery timeout: past it the answer is worth
// nothing (the handler itself answers 503 a second before).
func receiverTimeout(f *sources.File) time.Duration {
	t := time.Duration(0)
	for _, name := range f.Names() {
		if d := time.Duration(f.Sources[name].DeliveryTimeout); t == 0 || d < t {
			t = d
		}
	}
	return t
}

// ownTableActions are the receiver's actions on oncehook's own table: the claim and its body
// guard (PutItem), a duplicate's claim (GetItem), and an effect of each kind
// (sources.TableActions), which a planner may write there too.
func ownTableActions() []string {
	actions := slices.AppendSeq([]string{"dynamodb:GetItem", "dynamodb:PutItem"}, maps.Values(sources.TableActions))
	slices.Sort(actions)
	return slices.Compact(actions)
}

// grantTables lets the receiver do to each of the sources file's tables exactly what its
// effects do there, with a bound table's customer-managed key through DynamoDB.
func (b *builder) grantTables(fn awslambda.Function) {
	for _, name := range sortedKeys(b.file.Tables) {
		t := b.file.Tables[name]
		var actions []string
		for _, a := range t.Actions {
			actions = append(actions, sources.TableActions[a])
		}
		slices.Sort(actions)
		arn, key := b.appTable(name, t)
		grantTableKey(fn, key)
		allow(fn, slices.Compact(actions), arn)
	}
}

// appTable is one of the application's own tables: its ARN (the bound table's, or the one its
// name makes in the stack's account and Region), and a bound table's customer-managed key.
func (b *builder) appTable(name string, t *sources.Table) (*string, awskms.IKey) {
	if bt := b.bound.tables[name]; t.Bound && bt != nil {
		return bt.TableArn(), bt.EncryptionKey()
	}
	if arn := t.PhysicalName(name); strings.HasPrefix(arn, "arn:") {
		return jsii.String(arn), nil
	}
	return jsii.String(stackArn(b.stack, "dynamodb", "table/"+t.PhysicalName(name))), nil
}

// grantSecrets lets the receiver read exactly the secrets the sources file names, by reference
// (the stack never sees a value), with their keys through Secrets Manager and SSM only.
func grantSecrets(stack awscdk.Stack, f *sources.File, fn awslambda.Function, keys []awskms.IKey) {
	var sm, ps []string
	for _, name := range f.Names() {
		for _, ref := range f.Sources[name].Secrets {
			switch {
			case ref.SecretsManager != "":
				sm = append(sm, secretArns(stack, ref.SecretsManager)...)
			case ref.SSM != "":
				ps = append(ps, parameterArn(stack, ref.SSM))
			}
		}
	}
	slices.Sort(sm)
	slices.Sort(ps)
	if len(sm) > 0 {
		allow(fn, []string{"secretsmanager:GetSecretValue"}, *jsii.Strings(slices.Compact(sm)...)...)
	}
	if len(ps) > 0 {
		allow(fn, []string{"ssm:GetParameter"}, *jsii.Strings(slices.Compact(ps)...)...)
	}
	allowKey(fn, []string{"kms:Decrypt"}, keys, "secretsmanager", "ssm")
}

// secretArns is the resources a Secrets Manager reference may read: a name matches any of the
// six-character suffixes Secrets Manager appends; an ARN may be complete (with the suffix) or
// partial (without it), which cannot be told apart, so both are granted.
func secretArns(stack awscdk.Stack, ref string) []string {
	if strings.HasPrefix(ref, "arn:") {
		return []string{ref, ref + "-??????"}
	}
	return []string{stackArn(stack, "secretsmanager", "secret:"+ref+"-??????")}
}

// parameterArn is the resource an SSM reference reads: a name, or an ARN, either with a
// version or label selector (name:3, name:live), which IAM does not see.
func parameterArn(stack awscdk.Stack, ref string) string {
	if !strings.HasPrefix(ref, "arn:") {
		name, _, _ := strings.Cut(ref, ":") // parameter names have no colons
		return stackArn(stack, "ssm", "parameter/"+strings.TrimPrefix(name, "/"))
	}
	if arn, name, ok := strings.Cut(ref, ":parameter/"); ok {
		name, _, _ = strings.Cut(name, ":")
		return arn + ":parameter/" + name
	}
	return ref
}
