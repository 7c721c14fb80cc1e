package deployment_test

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/oncehook/oncehook/deployment"
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
