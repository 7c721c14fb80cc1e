package infra

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
)

// TestACollectorLayerForAnotherArchitectureFailsTheSynth: collector layers are built per
// architecture, and name it (ADOT's aws-otel-collector-<arm64|amd64>-ver-..., OpenTelemetry's
// opentelemetry-collector-<arm64|amd64>-...; CollectorLayerArn's documentation: "for the
// functions' architecture (arm64 unless X86)"). A layer of the other architecture is an
// extension binary the function cannot execute: each function's environment fails to
// initialise, every delivery with it, not only its traces. The construct adds the one ARN to
// all three functions whatever their architecture, Props.X86's or each FunctionOptions', and
// refuses neither an arm64 collector on x86_64 functions nor a mix of architectures (a single
// ARN cannot be both) at synth, though it refuses a prebuilt bootstrap of the wrong
// architecture there.
func TestACollectorLayerForAnotherArchitectureFailsTheSynth(t *testing.T) {
	const amd64Layer = "arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-collector-amd64-ver-0-117-0:1"
	otelArm := "arn:aws:lambda:us-east-1:184161586896:layer:opentelemetry-collector-arm64-0_12_0:1"
	if _, err := synthesize(withLayer(prebuilt("arm64"), adotLayer)); err != nil {
		t.Fatalf("arm64 functions, arm64 layer: %v", err)
	}
	x86 := func(arn string) *Props {
		p := withLayer(prebuilt("amd64"), arn)
		p.X86 = true
		return p
	}
	if _, err := synthesize(x86(amd64Layer)); err != nil {
		t.Fatalf("x86_64 functions, amd64 layer: %v", err)
	}
	mixed := func(arn string) *Props {
		p := withLayer(prebuilt("arm64"), arn)
		p.Receiver = Code{Dir: synth.bootstraps["amd64"]}
		p.ReceiverFunction.Architecture = awslambda.Architecture_X86_64()
		return p
	}
	for name, p := range map[string]*Props{
		"X86 functions, ADOT's arm64 layer":                 x86(adotLayer),
		"X86 functions, OpenTelemetry's arm64 layer":        x86(otelArm),
		"arm64 functions, ADOT's amd64 layer":               withLayer(prebuilt("arm64"), amd64Layer),
		"an x86_64 receiver beside arm64 ones, arm64 layer": mixed(adotLayer),
		"an x86_64 receiver beside arm64 ones, amd64 layer": mixed(amd64Layer),
	} {
		if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), "CollectorLayerArn") {
			t.Errorf("%s: got %v, want a refusal naming Props.OpenTelemetry.CollectorLayerArn", name, err)
		}
	}
}
