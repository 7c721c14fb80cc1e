package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runAppEnv makes the test binary run the app's main instead of the tests, so a test runs the
// synth as a process and reads its exit status and output.
const runAppEnv = "ONCEHOOK_INFRA_RUN_APP"

func TestMain(m *testing.M) {
	if os.Getenv(runAppEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// synthFails runs the app with a sources file (and no prebuilt code: the construct builds
// oncehook's packages, so a refusal must come before that) and returns its output, failing
// the test unless it exits non-zero.
func synthFails(t *testing.T, sourcesJSON string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "sources.json")
	if sourcesJSON != "" {
		if err := os.WriteFile(path, []byte(sourcesJSON), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runAppEnv+"=1", "CDK_OUTDIR="+filepath.Join(dir, "out"))
	if sourcesJSON != "" {
		cmd.Env = append(cmd.Env, `CDK_CONTEXT_JSON={"sources":"`+path+`"}`)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("the synth exited %v:\n%s", err, out)
	}
	return string(out)
}

func TestARetentionShorterThanTheProvidersPromiseFailsTheSynth(t *testing.T) {
	out := synthFails(t, `{"sources":{"stripe":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d","keep":"7d"}}}`)
	if !strings.Contains(out, `"stripe"`) || !strings.Contains(out, "shorter than its retry horizon") {
		t.Fatalf("the synth's error does not name the source and the rule:\n%s", out)
	}
}

func TestATargetLimitThatCannotWorkFailsTheSynthNamingTheField(t *testing.T) {
	out := synthFails(t, `{"sources":{"s":{"scheme":"stripe","secrets":[{"secretsmanager":"s"}],"retry_horizon":"3d","redrive_window":"30d"}},
		"targets":{"slow":{"url":"https://b.example/x","max_in_flight":5000}}}`)
	if !strings.Contains(out, "slow") || !strings.Contains(out, "max_in_flight") {
		t.Fatalf("the synth's error does not name the field:\n%s", out)
	}
}

func TestThereIsNoDefaultSourcesFile(t *testing.T) {
	if out := synthFails(t, ""); !strings.Contains(out, "no sources file") {
		t.Fatalf("%s", out)
	}
}
