package infra

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// The two modules resolve for a team once tagged: infra/go.mod requires the runtime at a version
// a team's `go get` can find. Its replace (to ../) applies in this repository only, so the
// requirement is what a dependent module resolves: v0.0.0 only while no release is tagged (it
// names no version that exists; docs/own-module.md says to use replace until then), and from the
// first release on, at least the newest runtime tag: the release commit sets the version it is
// about to be tagged with (docs/own-module.md, "Releasing").
func TestInfraRequiresARuntimeVersionATeamCanResolve(t *testing.T) {
	t.Parallel()
	const runtime = "github.com/oncehook/oncehook"
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var required string
	for _, r := range mf.Require {
		if r.Mod.Path == runtime {
			required = r.Mod.Version
		}
	}
	if required == "" {
		t.Fatalf("infra/go.mod does not require %s", runtime)
	}
	replaced := false
	for _, r := range mf.Replace {
		replaced = replaced || (r.Old.Path == runtime && r.Old.Version == "" && r.New.Path == "../")
	}
	if !replaced {
		t.Errorf("infra/go.mod has no `replace %s => ../`: the construct would build against a released runtime, not this tree", runtime)
	}
	if !semver.IsValid(required) || semver.Prerelease(required) != "" || semver.Build(required) != "" {
		t.Fatalf("infra/go.mod requires %s %s: want a release version (vX.Y.Z), or v0.0.0 before the first", runtime, required)
	}
	out, err := exec.Command("git", "tag", "--merged", "HEAD", "--list", "v*").Output()
	if err != nil {
		t.Skipf("no git history to hold the requirement to its tags: %v", err)
	}
	if err := requirementResolves(required, strings.Fields(string(out))); err != nil {
		t.Error(err)
	}
}

// requirementResolves says why infra/go.mod's requirement of the runtime would not resolve for
// a team, given the repository's tags (infra's own, infra/v*, are not the runtime's).
func requirementResolves(required string, tags []string) error {
	newest := ""
	for _, tag := range tags {
		if semver.IsValid(tag) && semver.Prerelease(tag) == "" && semver.Compare(tag, newest) > 0 {
			newest = tag
		}
	}
	if newest != "" && semver.Compare(required, newest) < 0 {
		return fmt.Errorf("infra/go.mod requires the runtime at %s, older than its newest tag %s: a team's go get of infra would resolve %s", required, newest, required)
	}
	return nil
}

func TestRequirementResolves(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		required string
		tags     []string
		ok       bool
	}{
		{"v0.0.0", nil, true},
		{"v0.0.0", []string{"v0.1.0"}, false}, // tagged, infra left on the placeholder
		{"v0.1.0", nil, true},                 // the release commit, before its tag
		{"v0.1.0", []string{"v0.1.0"}, true},
		{"v0.1.0", []string{"v0.1.0", "v0.2.0"}, false},
		{"v0.2.0", []string{"v0.1.0", "v0.2.0-rc.1"}, true},
		{"v0.0.0", []string{"v0.1.0-rc.1", "vnext"}, true}, // no release among them
	} {
		if err := requirementResolves(c.required, c.tags); (err == nil) != c.ok {
			t.Errorf("%s with tags %v: %v, want ok %v", c.required, c.tags, err, c.ok)
		}
	}
}

// TestTheConstructLinksNoneOfTheFunctionsAWSClients: a team's first synth compiles every package
// its CDK app imports. The construct checks the functions' tracing settings with launch/tracing,
// not launch, which links every AWS client the functions call (Lambda, Step Functions,
// EventBridge, SNS, the SDK's configuration with STS and SSO); the clients it links are those of
// the packages whose checks it runs: dedup's DynamoDB, the outbox's SQS (its retry scheduler),
// and the sources file's Secrets Manager and SSM (its secrets' resolver).
func TestTheConstructLinksNoneOfTheFunctionsAWSClients(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	client := regexp.MustCompile(`^github\.com/aws/aws-sdk-go-v2/service/([^/]+)$`)
	for _, pkg := range strings.Fields(string(out)) {
		if m := client.FindStringSubmatch(pkg); m != nil && !slices.Contains([]string{"dynamodb", "sqs", "secretsmanager", "ssm"}, m[1]) {
			t.Errorf("the construct links the AWS %s client", m[1])
		}
		if pkg == "github.com/oncehook/oncehook/launch" {
			t.Error("the construct links launch, and with it every AWS client the functions call")
		}
	}
}
