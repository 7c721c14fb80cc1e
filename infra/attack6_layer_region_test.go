package infra

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// synthesizeIn is synthesize in a stack with an environment of its own.
func synthesizeIn(region string, p *Props) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), &awscdk.StackProps{
		Env: &awscdk.Environment{Account: jsii.String("123456789012"), Region: jsii.String(region)}})
	New(stack, "Oncehook", p)
	return nil
}

// TestACollectorLayerOfAnotherRegionFailsTheSynth: a Lambda layer is a Regional resource, and a
// function can only use a layer version of its own Region (CreateFunction refuses another's),
// as Props.OpenTelemetry.CollectorLayerArn's documentation says ("the ARN must be the stack's
// Region's"). The construct refuses at synth, naming the prop, a bound resource known to be in
// another Region than the stack (checkBindings' placed); a collector layer's ARN names its
// Region as plainly, and a stack with its own env names its Region. The synth passes a stack
// in eu-west-1 with us-east-1's ADOT layer (the ARN the docs' example names for another Region
// is one copy away), and the deployment fails at CloudFormation.
func TestACollectorLayerOfAnotherRegionFailsTheSynth(t *testing.T) {
	if err := synthesizeIn("us-east-1", withLayer(prebuilt("arm64"), adotLayer)); err != nil {
		t.Fatalf("the layer in the stack's own Region: %v", err)
	}
	for _, region := range []string{"eu-west-1", "us-west-2", "ap-southeast-2"} {
		err := synthesizeIn(region, withLayer(prebuilt("arm64"), adotLayer))
		if err == nil || !strings.Contains(err.Error(), "CollectorLayerArn") {
			t.Errorf("a stack in %s with a us-east-1 collector layer (%s): got %v, want a refusal naming Props.OpenTelemetry.CollectorLayerArn", region, adotLayer, err)
		}
	}
}

func withLayer(p *Props, arn string) *Props {
	p.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: arn, XRay: true}
	return p
}
