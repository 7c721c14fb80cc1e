package deployment_test

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/sources"
)

// The construct writes a deployment's settings into each function's environment; the
// function's start reads them back, defaults filled in, or refuses them naming the variable.
func Example() {
	written := deployment.Settings{Table: "claims", Lease: 75 * time.Second, Targets: []string{"crm"}}.Environment()
	for _, k := range slices.Sorted(maps.Keys(written)) {
		fmt.Printf("%s=%s\n", k, written[k])
	}
	s, err := deployment.FromEnv(func(k string) string { return written[k] }) // a function's start: os.Getenv
	fmt.Println(s.Lease, s.MaxAttempts, s.PendingShards, err)

	written["MAX_ATTEMPTS"] = "none"
	_, err = deployment.FromEnv(func(k string) string { return written[k] })
	fmt.Println(err)
	// Output:
	// LEASE_SECONDS=75
	// ONCEHOOK_TARGETS=crm
	// TABLE_NAME=claims
	// 1m15s 10 16 <nil>
	// MAX_ATTEMPTS="none": want a positive whole number
}

// A pipeline of one's own that bundles the sources file with a function's bootstrap names it
// as the function reads it, and pins it by its hash: any other file is refused at start.
func ExampleSourcesSum() {
	file := []byte(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"S"}]}}}`)
	env := deployment.Settings{SourcesSHA256: deployment.SourcesSum(file)}.Environment()
	fmt.Println(deployment.BundledSources, len(env["ONCEHOOK_SOURCES_SHA256"]))
	// Output: sources.json 64
}

// Settings that each work alone can fail together with the sources file: a sweep that waits
// longer than a source keeps its claims would never see them.
func ExampleSettings_CheckFile() {
	f, err := sources.Parse([]byte(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"0d","keep":"7d"}}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(deployment.Settings{Table: "claims"}.CheckFile(f))
	fmt.Println(deployment.Settings{Table: "claims", SweepMinAge: 8 * 24 * time.Hour}.CheckFile(f))
	// Output:
	// <nil>
	// SWEEP_MIN_AGE_SECONDS="691200": want less than sources.shop's retention (7d), or its claims expire before a sweep looks at them
}
