package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// printedCommands returns the commands a deploy printed: the lines indented by four spaces
// (hookctl deploy-local indents its commands so, and nothing else).
func printedCommands(out string) []string {
	var cmds []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "    ") && strings.TrimSpace(line) != "" {
			cmds = append(cmds, strings.TrimSpace(line))
		}
	}
	return cmds
}

// TestTheCommandsTheDeployPrintedWorkInANewShell runs every command `hookctl deploy-local`
// printed for the storefront, exactly as printed, in a new shell (bash with only PATH and HOME)
// in the folder it ran in: for each source a signed delivery, accepted, then a duplicate when
// sent again, and inspect shows its claim, found by the provider's own id (GitHub's delivery
// GUID: the claim's id is <hook-id>:<guid>).
func TestTheCommandsTheDeployPrintedWorkInANewShell(t *testing.T) {
	path := os.Getenv("STOREFRONT_DEPLOY_OUTPUT")
	if path == "" {
		if os.Getenv("STOREFRONT_E2E") == "required" {
			t.Fatal("STOREFRONT_DEPLOY_OUTPUT is not set: make test sets it to what hookctl deploy-local printed")
		}
		t.Skip("the storefront is not deployed (make test deploys it to the emulator)")
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	shell := func(command string) (string, string) {
		t.Helper()
		cmd := exec.Command("bash", "-c", command)
		cmd.Dir = ".." // where the deploy ran
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\nstdout %s\nstderr %s", command, err, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	tried := map[string]bool{}
	for _, c := range printedCommands(string(out)) {
		fields := strings.Fields(c)
		source, id := fields[len(fields)-1], ""
		switch {
		case strings.Contains(c, " send "):
			for i, want := range []string{`"duplicate":false`, `"duplicate":true`} {
				if stdout, stderr := shell(c); !strings.Contains(stdout, "200 OK") || !strings.Contains(stdout, want) {
					t.Fatalf("send %d, %s:\nstdout %s\nstderr %s\nwant 200 and %s", i+1, c, stdout, stderr, want)
				}
			}
		case strings.Contains(c, " inspect "):
			source, id = fields[len(fields)-2], fields[len(fields)-1]
			stdout, stderr := shell(c)
			claim := "EVT#" + source + "#" + id
			if source == "github" {
				claim = "EVT#github#1:" + id // the hook id receivertest and hookctl send by default
				if !strings.Contains(stderr, "found 1:"+id+" by scanning the table (pass -scope 1") {
					t.Errorf("inspect github by its GUID: stderr %q, want the scope it found", stderr)
				}
			}
			if !strings.Contains(stdout, claim) {
				t.Fatalf("%s:\nstdout %s\nstderr %s\nwant the claim %s", c, stdout, stderr, claim)
			}
			tried[source] = true
		default:
			t.Fatalf("the deploy printed %q, which is neither a send nor an inspect", c)
		}
	}
	if !tried["stripe"] || !tried["github"] {
		t.Fatalf("tried %v: the deploy printed no commands for stripe and github:\n%s", tried, out)
	}
}

// docCommands returns the commands of the first ```sh block after the line of doc that contains
// marker, a trailing backslash continuing a command on the next line and a trailing
// "# comment" dropped.
func docCommands(t *testing.T, doc, marker string) []string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("%s has no %q: the test and the doc disagree", doc, marker)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, closed := strings.Cut(rest, "\n```")
	if !ok || !closed {
		t.Fatalf("%s: no ```sh block after %q", doc, marker)
	}
	var cmds []string
	var cur strings.Builder
	for _, l := range strings.Split(block, "\n") {
		if i := strings.Index(l, "   #"); i >= 0 {
			l = l[:i]
		}
		l = strings.TrimSpace(l)
		if strings.HasSuffix(l, `\`) {
			cur.WriteString(strings.TrimSpace(strings.TrimSuffix(l, `\`)) + " ")
			continue
		}
		cur.WriteString(l)
		if c := strings.TrimSpace(cur.String()); c != "" {
			cmds = append(cmds, c)
		}
		cur.Reset()
	}
	return cmds
}

// TestTheHookctlDocsGitHubPing runs docs/hookctl.md's example for the storefront, as printed, in a
// new shell from the storefront's folder: GitHub's ping is accepted (a duplicate when the test
// runs again on the same emulator), and inspect finds its claim <hook-id>:<guid> both by the
// GUID alone and with -scope.
func TestTheHookctlDocsGitHubPing(t *testing.T) {
	if os.Getenv("STOREFRONT_DEPLOY_OUTPUT") == "" {
		if os.Getenv("STOREFRONT_E2E") == "required" {
			t.Fatal("STOREFRONT_DEPLOY_OUTPUT is not set: make test deploys the storefront first")
		}
		t.Skip("the storefront is not deployed (make test deploys it to the emulator)")
	}
	cmds := docCommands(t, "../../../docs/hookctl.md", "For example, GitHub's ping")
	if len(cmds) != 3 {
		t.Fatalf("docs/hookctl.md's GitHub example has %d commands, want a send and two inspects: %q", len(cmds), cmds)
	}
	for _, c := range cmds {
		cmd := exec.Command("bash", "-c", c)
		cmd.Dir = ".."
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\nstdout %s\nstderr %s", c, err, stdout.String(), stderr.String())
		}
		switch {
		case strings.Contains(c, " send "):
			if !strings.Contains(stdout.String(), "200 OK") || !strings.Contains(stdout.String(), `"received":true`) {
				t.Fatalf("%s:\nstdout %s\nstderr %s\nwant 200 received", c, stdout.String(), stderr.String())
			}
		case strings.Contains(c, " inspect "):
			if claim := "EVT#github#12345678:8f2f5c4e-9a4e-11ef-8c6d-1b2c3d4e5f60"; !strings.Contains(stdout.String(), claim) {
				t.Fatalf("%s:\nstdout %s\nstderr %s\nwant the claim %s", c, stdout.String(), stderr.String(), claim)
			}
		default:
			t.Fatalf("docs/hookctl.md's GitHub example has %q, neither a send nor an inspect", c)
		}
	}
}
