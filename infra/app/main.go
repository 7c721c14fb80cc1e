// Command app is oncehook's own CDK app: one stack with one oncehook construct (package infra).
// Configuration comes from CDK context (-c key=value):
//
//	sources   the sources file (required: there is no default deployment)
//	code      a folder of prebuilt functions, one <function>/bootstrap each (make build's
//	          dist/); without it the construct builds oncehook's own packages from the
//	          repository
//	local     "true" for an emulator: host architecture, a throwaway table
//
// Configuration that cannot work (a retention shorter than a provider's promise, a target too
// slow for the outbox) fails the synth, naming the source or target.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/oncehook/oncehook/infra"
)

// StackName is the app's stack.
const StackName = "Oncehook"

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	ctx := func(key string) string {
		v, _ := app.Node().TryGetContext(jsii.String(key)).(string)
		return v
	}
	if ctx("sources") == "" {
		fmt.Fprintln(os.Stderr, "infra: no sources file: pass -c sources=path/to/sources.json (make synth SOURCES=...)")
		os.Exit(1)
	}
	local := ctx("local") == "true"
	props := &infra.Props{SourcesFile: ctx("sources"), Local: local, X86: local && runtime.GOARCH == "amd64", GoModuleDir: ".."}
	if local {
		// MiniStack reads a batch of stream records and filters it afterwards, and invokes one
		// batch at a time (no parallelization factor): the worker's own lease and finish records
		// take two of every three places in a batch of 100, and a slow downstream sets the pace
		// of a batch per call. A batch of 1,000 gives the local stack the throughput of a few
		// parallel batches of 100 (docs/engines.md).
		props.Outbox.StreamBatchSize = 1000
	}
	if dir := ctx("code"); dir != "" {
		props.Receiver.Code = infra.Code{Dir: filepath.Join(dir, "receiver")}
		props.Outbox.Code = infra.Code{Dir: filepath.Join(dir, "outbox")}
		props.Sweeper.Code = infra.Code{Dir: filepath.Join(dir, "sweeper")}
	}
	stack := awscdk.NewStack(app, jsii.String(StackName), nil)
	o, err := newOncehook(stack, props)
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
	awscdk.NewCfnOutput(stack, jsii.String("WebhookUrl"), &awscdk.CfnOutputProps{
		Value:       o.WebhookUrl,
		Description: jsii.String("POST deliveries here, with {source} one of the sources file's names"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("TableName"), &awscdk.CfnOutputProps{Value: o.Table.TableName()})
	awscdk.NewCfnOutput(stack, jsii.String("ApiId"), &awscdk.CfnOutputProps{Value: o.Api.ApiId()})
	for id, fn := range map[string]interface{ FunctionName() *string }{"ReceiverFunction": o.Receiver, "OutboxFunction": o.Outbox, "SweeperFunction": o.Sweeper} {
		awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{Value: fn.FunctionName()})
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
}

// newOncehook is infra.New, with its refusal as an error for the app to print and exit on.
func newOncehook(stack awscdk.Stack, props *infra.Props) (o *infra.Oncehook, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return infra.New(stack, "Oncehook", props), nil
}
