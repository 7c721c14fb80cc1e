package infra

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/deployment"
)

// Code is where one function's code comes from: exactly one of its fields. With GoPackage or
// Dir, the sources file the permissions were derived from is staged beside the binary (its
// SHA-256 checked at start); with Lambda, it goes inline in the environment (3 KB at most).
type Code struct {
	// GoPackage is a Go package to build with the local toolchain (no Docker), as `go build`
	// names it from GoModuleDir: "./cmd/receiver", or an import path the module requires.
	GoPackage string
	// GoModuleDir is where `go build` runs for GoPackage. Default ".".
	GoModuleDir string
	// Tags are extra build tags for GoPackage (lambda.norpc is always set).
	Tags []string
	// Dir holds a prebuilt bootstrap (`make build`'s dist/<function>), of the architecture the
	// function deploys on (checked: a stale host build must not reach Lambda).
	Dir string
	// Lambda is code built by other means; the sources file then goes inline.
	Lambda awslambda.Code
}

// The oncehook functions' own packages, the default Code for each.
const (
	ReceiverPackage = "github.com/oncehook/oncehook/functions/receiver"
	OutboxPackage   = "github.com/oncehook/oncehook/functions/outbox"
	SweeperPackage  = "github.com/oncehook/oncehook/functions/sweeper"
)

// maxInlineSources is how much of Lambda's 4 KB of environment an inline sources file may use.
const maxInlineSources = 3 << 10

// staged is a function's code as the construct hands it to Lambda, and the settings that tell
// the function where its sources file is: inline, or bundled with this SHA-256.
type staged struct {
	code                   awslambda.Code
	sources, sourcesSHA256 string
}

// stage prepares one function's code. arm64 is the architecture the stack deploys; sources is
// the sources file's bytes as given to the synth.
func (c Code) stage(function string, arm64 bool, sources []byte, stagingRoot string) (staged, error) {
	set := 0
	for _, ok := range []bool{c.GoPackage != "", c.Dir != "", c.Lambda != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return staged{}, fmt.Errorf("%s.Code: set exactly one of GoPackage, Dir, Lambda", function)
	}
	if c.Lambda != nil {
		if len(sources) > maxInlineSources {
			return staged{}, fmt.Errorf("%s.Code: the sources file is %d bytes, over the %d that fit in the function's environment: give GoPackage or Dir, so the construct can bundle it with the binary",
				function, len(sources), maxInlineSources)
		}
		return staged{code: c.Lambda, sources: string(sources)}, nil
	}
	dir, err := os.MkdirTemp(stagingRoot, function+"-")
	if err != nil {
		return staged{}, err
	}
	bootstrap := filepath.Join(dir, "bootstrap")
	if c.GoPackage != "" {
		if err := goBuild(c, arm64, bootstrap); err != nil {
			return staged{}, fmt.Errorf("%s.Code: %w", function, err)
		}
	} else {
		b, err := os.ReadFile(filepath.Join(c.Dir, "bootstrap"))
		if err == nil {
			err = os.WriteFile(bootstrap, b, 0o755)
		}
		if err != nil {
			return staged{}, fmt.Errorf("%s.Code.Dir: %w", function, err)
		}
	}
	if err := checkArch(bootstrap, arm64); err != nil {
		return staged{}, fmt.Errorf("%s.Code: %w", function, err)
	}
	if err := os.WriteFile(filepath.Join(dir, deployment.BundledSources), sources, 0o644); err != nil {
		return staged{}, err
	}
	return staged{code: awslambda.Code_FromAsset(jsii.String(dir), nil), sourcesSHA256: deployment.SourcesSum(sources)}, nil
}

// goBuild builds a Lambda bootstrap for provided.al2023 with the local toolchain.
func goBuild(c Code, arm64 bool, out string) error {
	arch := "amd64"
	if arm64 {
		arch = "arm64"
	}
	tags := append([]string{"lambda.norpc"}, c.Tags...)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", strings.Join(tags, ","), "-o", out, c.GoPackage)
	cmd.Dir = c.GoModuleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", c.GoPackage, err, b)
	}
	return nil
}

// checkArch reads the bootstrap's ELF header and refuses one built for another architecture
// than the function's.
func checkArch(path string, arm64 bool) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable: %w", path, err)
	}
	defer f.Close()
	want, name := elf.EM_X86_64, "x86_64"
	if arm64 {
		want, name = elf.EM_AARCH64, "arm64"
	}
	if f.Machine != want {
		return fmt.Errorf("%s is built for %s and the function runs on %s: rebuild it (make build ARCH=...)", path, f.Machine, name)
	}
	return nil
}
