package launch_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The operator's tools (hookctl, the console) and the end-to-end tests are modules of their
// own, so that a team's functions, which link this module, pull none of their dependencies:
// not in the build, and not in go.mod, which `go get` of the library reads.
var operatorOnly = []string{"github.com/chromedp/", "github.com/trustelem/zxcvbn", "service/cloudformation"}

func TestTheLibraryModuleRequiresNoOperatorTool(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-deps", "-test", "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range operatorOnly {
		if strings.Contains(string(mod), dep) {
			t.Errorf("go.mod requires %s", dep)
		}
		if strings.Contains(string(out), dep) {
			t.Errorf("a package of the library module (or its tests) imports %s", dep)
		}
	}
}
