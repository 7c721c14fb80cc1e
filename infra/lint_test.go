package infra

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsroute53"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"
)

// cfnLintIgnored are the cfn-lint rules not applied, each with why it does not apply.
var cfnLintIgnored = map[string]string{
	// A DependsOn that a Ref or GetAtt already implies: the CDK writes it itself (each function
	// on its role, the API's stage on its domain), and CloudFormation orders the same either way.
	"W3005": "redundant DependsOn the CDK writes",
}

// TestCfnLintPassesOnEverySynthesizedTemplate runs AWS's CloudFormation linter (cfn-lint,
// pinned in localstack/requirements-lint.txt; make test-infra installs it under .cache/ and
// sets ONCEHOOK_CFN_LINT) on the default template and on one for each prop that adds
// resources: a custom domain with its record, a customer-managed table key, secrets keys, the
// leak audit, per-function settings and tracing, an adopted table, tables and targets bound to
// the app's resources, a local stack. Then checkov on the same.
func TestCfnLintPassesOnEverySynthesizedTemplate(t *testing.T) {
	bin := os.Getenv("ONCEHOOK_CFN_LINT")
	if bin == "" {
		t.Skip("ONCEHOOK_CFN_LINT is not set (make test-infra sets it)")
	}
	dir := t.TempDir()
	if keep := os.Getenv("ONCEHOOK_TEMPLATES_DIR"); keep != "" {
		dir = keep // to read them, or run another tool on them
	}
	var files []string
	boundSources := sourcesFile(t, boundSourcesFile)
	write := func(name string, tpl map[string]any) {
		b, err := json.MarshalIndent(tpl, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, name+".template.json")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	write("default", *synth.tpl.ToJSON())
	for name, build := range map[string]func(awscdk.Stack) *Props{
		"domain": func(s awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.Receiver.Domain = &Domain{Name: "hooks.example.com",
				Certificate: awscertificatemanager.Certificate_FromCertificateArn(s, jsii.String("Cert"), jsii.String("arn:aws:acm:us-east-1:111111111111:certificate/abc")),
				Zone:        awsroute53.HostedZone_FromHostedZoneAttributes(s, jsii.String("Zone"), &awsroute53.HostedZoneAttributes{HostedZoneId: jsii.String("Z123"), ZoneName: jsii.String("example.com")})}
			p.Receiver.SourceThrottles = map[string]Throttle{"stripe": {Rate: 10, Burst: 20}}
			return p
		},
		"keys": func(s awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.Table.Encryption = awsdynamodb.TableEncryption_CUSTOMER_MANAGED
			p.Table.Key = awskms.NewKey(s, jsii.String("TableKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
			p.Receiver.SecretsKeys = []awskms.IKey{awskms.Key_FromKeyArn(s, jsii.String("K"), jsii.String("arn:aws:kms:us-east-1:111111111111:key/1234"))}
			p.Outbox.QueueKey = awskms.NewKey(s, jsii.String("QueueKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
			p.Telemetry.LogKey = awskms.NewKey(s, jsii.String("LogKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
			// A topic of the team's own under a key whose policy lets CloudWatch use it.
			topicKey := awskms.NewKey(s, jsii.String("TopicKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
			topicKey.GrantEncryptDecrypt(awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil))
			p.Alarms.Topic = awssns.NewTopic(s, jsii.String("Pager"), &awssns.TopicProps{MasterKey: topicKey, EnforceSSL: jsii.Bool(true)})
			return p
		},
		"knobs": func(s awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.Sweeper.AuditPrefixes = []string{"ORDER#"}
			p.Telemetry.Tracing = awslambda.Tracing_ACTIVE
			p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, XRay: true}
			p.Outbox.StreamParallelization, p.Outbox.StreamBatchSize = 10, 10
			p.Receiver.Function = FunctionOptions{MemorySize: 1024, ReservedConcurrency: 50}
			p.Alarms.Emails = []string{"oncall@example.com"}
			p.Alarms.HttpsEndpoints = []string{"https://pager.example.com/hook"}
			p.Table.LogicalID = "AdoptedTable"
			return p
		},
		"adopted": func(s awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.Table.Existing = claimsTable(s, "Claims", nil, nil)
			return p
		},
		"bound": func(s awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.SourcesFile = boundSources
			defineResources(s).bind(p)
			return p
		},
		"local": func(s awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.Local = true
			return p
		},
	} {
		tpl, err := synthesizeWith(build, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		write(name, *tpl.ToJSON())
	}
	args := []string{"--format", "parseable"}
	for rule := range cfnLintIgnored {
		args = append(args, "--ignore-checks", rule)
	}
	out, err := exec.Command(bin, append(append(args, "--"), files...)...).CombinedOutput()
	if err != nil {
		t.Errorf("cfn-lint on %d templates: %v\n%s", len(files), err, strings.ReplaceAll(string(out), dir+"/", ""))
	}
	checkov(t, dir)
}

// checkovByProp are the checkov findings a prop fixes: none may remain in keys.template.json,
// which sets each of them.
var checkovByProp = map[string]string{
	"CKV_AWS_27":  "Props.Outbox.QueueKey",
	"CKV_AWS_158": "Props.Telemetry.LogKey",
	"CKV_AWS_119": "Props.Table.Encryption CUSTOMER_MANAGED",
	"CKV_AWS_26":  "Props.Alarms.Topic, a topic under a key CloudWatch may use",
}

// checkovNotApplicable are the findings that do not apply to oncehook, each with why (the same
// list, longer, is in docs/operations.md).
var checkovNotApplicable = map[string]string{
	"CKV_AWS_116": "a function DLQ is for asynchronous invocations: the receiver is invoked synchronously, the outbox by event source mappings with an on-failure queue, and a sweeper run that could not start is dropped by design",
	"CKV_AWS_117": "the functions call AWS APIs and public HTTPS targets: a VPC adds NAT and nothing checked",
	"CKV_AWS_115": "a reservation is a prop (FunctionOptions.ReservedConcurrency); the sweeper has 1; a default one fails on a new account's quota",
	"CKV_AWS_173": "the environment holds names, a queue URL and a hash, no secrets (secrets are read by reference); Lambda encrypts it at rest",
}

// checkov runs Bridgecrew's checkov (pinned with cfn-lint; ONCEHOOK_CHECKOV) on the templates:
// every finding is either fixed by a prop (and absent where the prop is set) or listed as not
// applying.
func checkov(t *testing.T, dir string) {
	bin := os.Getenv("ONCEHOOK_CHECKOV")
	if bin == "" {
		t.Log("ONCEHOOK_CHECKOV is not set: checkov skipped")
		return
	}
	out, _ := exec.Command(bin, "-d", dir, "--framework", "cloudformation", "--quiet", "--compact", "-o", "json").Output()
	var report struct {
		Results struct {
			Failed []struct {
				ID       string `json:"check_id"`
				Resource string `json:"resource"`
				File     string `json:"file_path"`
			} `json:"failed_checks"`
		} `json:"results"`
		Summary struct {
			Passed        int `json:"passed"`
			ParsingErrors int `json:"parsing_errors"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out, &report); err != nil || report.Summary.Passed == 0 || report.Summary.ParsingErrors > 0 {
		t.Fatalf("checkov: %v\n%s", err, out)
	}
	for _, f := range report.Results.Failed {
		file := filepath.Base(f.File)
		switch {
		case checkovNotApplicable[f.ID] != "":
		case checkovByProp[f.ID] != "" && file != "keys.template.json":
		case checkovByProp[f.ID] != "":
			t.Errorf("checkov %s on %s in %s: %s is set there and should fix it", f.ID, f.Resource, file, checkovByProp[f.ID])
		default:
			t.Errorf("checkov %s on %s in %s: neither fixed nor listed as not applying", f.ID, f.Resource, file)
		}
	}
}
