package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/oncehook/oncehook/sources"
)

// main synthesizes the stack. Configuration comes from CDK context (-c key=value):
//
//	sources       the sources file (default ../examples/sources.json)
//	code          the folder of built functions (default ../dist)
//	local         "true" for an emulator: host architecture, no deletion protection
//
// A sources file whose retention is shorter than a provider's retry horizon + redrive window
// fails the synth, with the source named.
func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	ctx := func(key, def string) string {
		if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok && v != "" {
			return v
		}
		return def
	}
	file, err := sources.Load(ctx("sources", "../examples/sources.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
	local := ctx("local", "false") == "true"
	NewStack(app, "Oncehook", StackConfig{
		Sources:            file,
		CodeDir:            ctx("code", "../dist"),
		ARM64:              !local,
		DeletionProtection: !local,
	})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
}
