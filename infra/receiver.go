package infra

import (
	"errors"
	"fmt"
	"maps"
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

	"github.com/oncehook/oncehook/sources"
)

// ReceiverProps override the receiver's defaults (Props.Receiver): oncehook's own receiver
// package, on a new HTTP API throttled to 1,000 requests a second (bursts of 2,000), with no
// reserved concurrency.
type ReceiverProps struct {
	// Code is the function's code. Default: oncehook's ReceiverPackage, built from
	// Props.GoModuleDir.
	Code Code
	// Function sets the function's memory, architecture and reserved concurrency over the
	// construct-wide defaults.
	Function FunctionOptions
	// ReservedConcurrency caps the receiver's concurrent executions (0: no cap), so a flood
	// cannot take the account's concurrency from the outbox and the sweeper. (A new account's
	// unreserved minimum of 100 leaves little to reserve.) The same as Function's: set one.
	ReservedConcurrency float64
	// SecretsKeys are the customer-managed KMS keys the sources file's secrets and SecureString
	// parameters are encrypted under: the receiver may decrypt with them through Secrets
	// Manager and SSM only (kms:ViaService). Secrets under the AWS managed keys need none.
	SecretsKeys []awskms.IKey
	// HttpApi is an existing HTTP API to add the webhook routes to; default a new one.
	HttpApi awsapigatewayv2.HttpApi
	// ThrottleRate and ThrottleBurst bound the new API's requests per second (default 1,000
	// and 2,000): a flood of unsigned requests is refused at API Gateway rather than starting
	// receivers that refuse them one by one.
	ThrottleRate, ThrottleBurst float64
	// SourceThrottles overrides ThrottleRate and ThrottleBurst for a source's own route (each
	// source has one: POST /hooks/<name>), so one provider's flood cannot use up another's
	// allowance. Only with the construct's own API.
	SourceThrottles map[string]Throttle
	// NoDuplicateProbe turns off the receiver's duplicate probe, which answers a duplicate
	// from an eventually consistent read of its claim while a source is in a redrive
	// (receiver.Config.NoDuplicateProbe, ONCEHOOK_DUPLICATE_PROBE=off).
	NoDuplicateProbe bool
	// Domain serves the webhook API on a custom domain, so that the URL each provider is
	// configured with survives replacing the API. Only with the construct's own API.
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
	// Zone, when set, gets an alias A record for Name pointing at the API; otherwise point a
	// CNAME at Oncehook.DomainTarget yourself.
	Zone awsroute53.IHostedZone
}

// newReceiver is the receiver: its function, allowed what its transaction and its secrets
// need, behind the webhook API (one route per source).
func newReceiver(c constructs.Construct, stack awscdk.Stack, cfg Props, file *sources.File, bound *bindings, code staged,
	env map[string]string, o *Oncehook) error {
	fn, err := function(c, "Receiver", cfg, cfg.Receiver.Function, code, env, receiverTimeout(file).Seconds())
	if err != nil {
		return err
	}
	o.Receiver = fn
	// Least privilege: each function gets exactly the actions its code issues (recorded from
	// its requests in launch/testdata/calls.json, which the IAM test holds these to). The
	// receiver's transaction puts the claim, its body guard and put effects (PutItem) and
	// applies update effects (UpdateItem); it reads a claim on a duplicate (GetItem) and, on a
	// redelivered batch, the claims still to write (BatchGetItem). Effects on the table itself
	// may be of every kind the API accepts (ownTableActions).
	allow(fn, append(ownTableActions(), "dynamodb:BatchGetItem"), o.Table.TableArn())
	grantSecrets(stack, file, fn, cfg.Receiver.SecretsKeys)
	grantTables(stack, file, bound, fn)
	grantTableKey(o.Table, fn)

	api, base := webhookAPI(c, cfg, file, fn, o)
	o.Api = api
	o.WebhookUrl = jsii.String(base + "/hooks/{source}")
	o.WebhookUrls = map[string]*string{}
	for _, name := range file.Names() {
		o.WebhookUrls[name] = jsii.String(base + "/hooks/" + name)
	}
	return nil
}

// checkReceiver fills in the API's throttling defaults and refuses a source throttle for no
// source, a domain without its name or certificate, and either with an API of the app's own.
func checkReceiver(cfg *Props, file *sources.File) error {
	if cfg.Receiver.ThrottleRate == 0 {
		cfg.Receiver.ThrottleRate = 1000
	}
	if cfg.Receiver.ThrottleBurst == 0 {
		cfg.Receiver.ThrottleBurst = 2000
	}
	for _, name := range sortedKeys(cfg.Receiver.SourceThrottles) {
		th := cfg.Receiver.SourceThrottles[name]
		if file.Sources[name] == nil {
			return fmt.Errorf("Props.Receiver.SourceThrottles: %q is not a source of the sources file", name)
		}
		if th.Rate <= 0 || th.Burst <= 0 {
			return fmt.Errorf("Props.Receiver.SourceThrottles[%q]: Rate and Burst must both be positive", name)
		}
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

// webhookAPI adds one route per source, POST /hooks/<name>, to the API (a request for any other
// source is answered 404 by API Gateway, without starting the receiver) and returns it with
// the base URL the providers are given. (checkReceiver has checked the API's props.)
func webhookAPI(c constructs.Construct, cfg Props, file *sources.File, receiver awslambda.Function, o *Oncehook) (awsapigatewayv2.HttpApi, string) {
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
				settings["POST /hooks/"+name] = map[string]any{"ThrottlingRateLimit": th.Rate, "ThrottlingBurstLimit": th.Burst}
			}
			stage.SetRouteSettings(settings)
		}
	}
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ReceiverIntegration"), receiver, nil)
	for _, name := range file.Names() {
		methods := []awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_POST}
		if file.Sources[name].Scheme == "intercom" {
			// Intercom checks a new endpoint with a HEAD before it sends anything.
			methods = append(methods, awsapigatewayv2.HttpMethod_HEAD)
		}
		api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String("/hooks/" + name),
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
// nothing (the provider has counted the delivery failed), and the handler itself answers 503
// a second before it.
func receiverTimeout(f *sources.File) time.Duration {
	t := time.Duration(0)
	for _, name := range f.Names() {
		if d := time.Duration(f.Sources[name].DeliveryTimeout); t == 0 || d < t {
			t = d
		}
	}
	return t
}

// ownTableActions are the DynamoDB actions the receiver's transaction needs on oncehook's own
// table: the claim and its body guard (PutItem), a duplicate's claim (GetItem), and an effect of
// each kind the API accepts (dedup.PutEffect, UpdateEffect, DeleteEffect, CheckEffect:
// sources.TableActions), which a planner may write there as well as in its own tables.
func ownTableActions() []string {
	actions := slices.AppendSeq([]string{"dynamodb:GetItem", "dynamodb:PutItem"}, maps.Values(sources.TableActions))
	slices.Sort(actions)
	return slices.Compact(actions)
}

// grantTables lets the receiver do to each of the application's own tables (the sources
// file's tables: named, or bound by Props.TableBindings) exactly what its effects do there, in
// the claim's transaction; a bound table's customer-managed key is usable for that through
// DynamoDB only. (The sweeper's audit of them: grantAudits.)
func grantTables(stack awscdk.Stack, f *sources.File, bound *bindings, fn awslambda.Function) {
	for _, name := range sortedKeys(f.Tables) {
		t := f.Tables[name]
		var actions []string
		for _, a := range t.Actions {
			actions = append(actions, sources.TableActions[a])
		}
		slices.Sort(actions)
		arn, key := appTable(stack, bound, name, t)
		if key != nil {
			allowKey(fn, tableKeyActions, []*string{key.KeyArn()}, "dynamodb")
		}
		allow(fn, slices.Compact(actions), arn)
	}
}

// appTable is one of the application's own tables: its ARN (the bound table's, or the one its
// name makes in the stack's account and Region), and a bound table's customer-managed key.
func appTable(stack awscdk.Stack, bound *bindings, name string, t *sources.Table) (*string, awskms.IKey) {
	if b := bound.tables[name]; t.Bound && b != nil {
		return b.TableArn(), b.EncryptionKey()
	}
	if arn := t.PhysicalName(name); strings.HasPrefix(arn, "arn:") {
		return jsii.String(arn), nil
	}
	return jsii.String(fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", *stack.Partition(), *stack.Region(), *stack.Account(), t.PhysicalName(name))), nil
}

// grantSecrets lets the receiver read exactly the secrets the sources file names, by reference:
// the stack never sees a secret's value. (Secrets referenced by "env" are for local runs; the
// stack does not set them.) Customer-managed keys the secrets are under may decrypt for it
// only through Secrets Manager and SSM.
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
	if len(keys) > 0 {
		var arns []*string
		for _, k := range keys {
			arns = append(arns, k.KeyArn())
		}
		allowKey(fn, []string{"kms:Decrypt"}, arns, "secretsmanager", "ssm")
	}
}

// secretArns is the resources a Secrets Manager reference may read: a name matches any of the
// six-character suffixes Secrets Manager appends; an ARN may be complete (with the suffix) or
// partial (without it), which cannot be told apart, so both are granted.
func secretArns(stack awscdk.Stack, ref string) []string {
	if strings.HasPrefix(ref, "arn:") {
		return []string{ref, ref + "-??????"}
	}
	return []string{fmt.Sprintf("arn:%s:secretsmanager:%s:%s:secret:%s-??????", *stack.Partition(), *stack.Region(), *stack.Account(), ref)}
}

// parameterArn is the resource an SSM reference reads: a name, or an ARN, either with a
// version or label selector (name:3, name:live), which IAM does not see.
func parameterArn(stack awscdk.Stack, ref string) string {
	if strings.HasPrefix(ref, "arn:") {
		if i := strings.Index(ref, ":parameter/"); i >= 0 {
			name := ref[i+len(":parameter/"):]
			if j := strings.IndexByte(name, ':'); j >= 0 {
				name = name[:j]
			}
			return ref[:i] + ":parameter/" + name
		}
		return ref
	}
	name, _, _ := strings.Cut(ref, ":") // parameter names have no colons
	return fmt.Sprintf("arn:%s:ssm:%s:%s:parameter/%s", *stack.Partition(), *stack.Region(), *stack.Account(), strings.TrimPrefix(name, "/"))
}
