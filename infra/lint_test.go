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
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsroute53"
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
// leak audit, per-function settings and tracing, a local stack.
func TestCfnLintPassesOnEverySynthesizedTemplate(t *testing.T) {
	bin := os.Getenv("ONCEHOOK_CFN_LINT")
	if bin == "" {
		t.Skip("ONCEHOOK_CFN_LINT is not set (make test-infra sets it)")
	}
	dir := t.TempDir()
	var files []string
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
			p.Domain = &Domain{Name: "hooks.example.com",
				Certificate: awscertificatemanager.Certificate_FromCertificateArn(s, jsii.String("Cert"), jsii.String("arn:aws:acm:us-east-1:111111111111:certificate/abc")),
				Zone:        awsroute53.HostedZone_FromHostedZoneAttributes(s, jsii.String("Zone"), &awsroute53.HostedZoneAttributes{HostedZoneId: jsii.String("Z123"), ZoneName: jsii.String("example.com")})}
			p.SourceThrottles = map[string]Throttle{"stripe": {Rate: 10, Burst: 20}}
			return p
		},
		"keys": func(s awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.TableEncryption = awsdynamodb.TableEncryption_CUSTOMER_MANAGED
			p.TableKey = awskms.NewKey(s, jsii.String("TableKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
			p.SecretsKeys = []awskms.IKey{awskms.Key_FromKeyArn(s, jsii.String("K"), jsii.String("arn:aws:kms:us-east-1:111111111111:key/1234"))}
			return p
		},
		"knobs": func(s awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.AuditPrefixes = []string{"ORDER#"}
			p.Tracing = awslambda.Tracing_ACTIVE
			p.StreamParallelization, p.StreamBatchSize = 10, 10
			p.ReceiverFunction = FunctionOptions{MemorySize: 1024, ReservedConcurrency: 50}
			p.AlarmEmails = []string{"oncall@example.com"}
			p.AlarmHttpsEndpoints = []string{"https://pager.example.com/hook"}
			p.TableLogicalID = "AdoptedTable"
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
}
