package e2e

import (
	"github.com/oncehook/oncehook/internal/harness"

	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// printedCommands returns the commands a deploy printed: every line indented by four spaces
// (hookctl deploy-local indents its commands so, and nothing else), a trailing backslash
// continuing a command on the next line.
func printedCommands(out string) []string {
	var cmds []string
	var cur strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if cur.Len() == 0 && (!strings.HasPrefix(line, "    ") || strings.TrimSpace(line) == "") {
			continue
		}
		part := strings.TrimSpace(line)
		if strings.HasSuffix(part, `\`) {
			cur.WriteString(strings.TrimSpace(strings.TrimSuffix(part, `\`)) + " ")
			continue
		}
		cur.WriteString(part)
		cmds = append(cmds, cur.String())
		cur.Reset()
	}
	return cmds
}

// inNewShell runs a printed command as it is pasted into a new terminal on the same machine:
// bash, in dir, with only PATH and HOME.
func inNewShell(t *testing.T, dir, command string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// TestTheCommandsMakeRunPrintsWorkInANewShell runs what `make run` printed (the deploy's own
// output, which make test keeps in ONCEHOOK_DEPLOY_OUTPUT), exactly as printed, in a new shell
// with nothing but PATH and HOME: the signed delivery is accepted, the same again is a
// duplicate, and inspect shows the claim's email intent done, sent once to the downstream.
func TestTheCommandsMakeRunPrintsWorkInANewShell(t *testing.T) {
	s := deployed(t) // and the email target's downstream, on 127.0.0.1:8025
	path := os.Getenv("ONCEHOOK_DEPLOY_OUTPUT")
	if path == "" {
		if os.Getenv("ONCEHOOK_E2E") == "required" {
			t.Fatal("ONCEHOOK_DEPLOY_OUTPUT is not set: make test sets it to what localstack/deploy printed")
		}
		t.Skip("no deploy output: make test sets ONCEHOOK_DEPLOY_OUTPUT")
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var send, inspect string
	for _, c := range printedCommands(string(out)) {
		switch {
		case strings.Contains(c, " send ") && send == "":
			send = c
		case strings.Contains(c, " inspect ") && inspect == "":
			inspect = c
		}
	}
	if send == "" || inspect == "" {
		t.Fatalf("the deploy printed no send and inspect commands:\n%s", out)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	const note = "hookctl: the local stack recorded in .oncehook/stack.env (" // all it may say on stderr
	quiet := func(what, stderr string) {
		for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
			if line != "" && !strings.HasPrefix(line, note) {
				t.Errorf("%s wrote on stderr: %q", what, line)
			}
		}
	}
	for i, want := range []string{`"duplicate":false`, `"duplicate":true`} {
		stdout, stderr, err := inNewShell(t, root, send)
		if err != nil || !strings.Contains(stdout, "200 OK") || !strings.Contains(stdout, want) {
			t.Fatalf("send %d, %s:\n%v\nstdout %s\nstderr %s\nwant 200 and %s", i+1, send, err, stdout, stderr, want)
		}
		quiet("send", stderr)
	}
	fields := strings.Fields(inspect)
	id := fields[len(fields)-1]
	eventually(t, "inspect shows the email intent done", func() (bool, string) {
		stdout, stderr, err := inNewShell(t, root, inspect)
		quiet("inspect", stderr)
		var line string
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(l, "email.send ") {
				line = l
			}
		}
		return err == nil && strings.Contains(stdout, "EVT#shop#"+id) && strings.Contains(line, " done "),
			fmt.Sprintf("%v:\n%s%s", err, stdout, stderr)
	})
	if keys, calls := s.down.Seen("shop:" + id + ":"); keys != 1 || calls != 1 {
		t.Fatalf("the downstream saw %d keys in %d calls for %s, want the email once", keys, calls, id)
	}
}

func TestPrintedCommands(t *testing.T) {
	t.Parallel()
	out := "==> step\n  table  x\n\nshop: try:\n\n    echo '{}' | bin/hookctl send -id m shop\n    bin/hookctl \\\n      inspect shop m\n"
	got := printedCommands(out)
	if len(got) != 2 || got[0] != "echo '{}' | bin/hookctl send -id m shop" || got[1] != "bin/hookctl inspect shop m" {
		t.Fatalf("%q", got)
	}
}

// TestASignedURLThroughTheEmulatorsPathForm: Twilio signs the URL it calls, and the receiver
// rebuilds it from what API Gateway hands it; hookctl send signs over that URL for the
// emulator's path form (http://127.0.0.1:4566/_aws/execute-api/<api-id>/hooks/sms), so the local
// stack's sms source accepts its deliveries, and the second as a duplicate.
func TestASignedURLThroughTheEmulatorsPathForm(t *testing.T) {
	deployed(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	send := fmt.Sprintf("echo 'MessageSid=SM%[1]s&MessageStatus=delivered' | bin/hookctl send -id tok_%[1]s sms", runID(9))
	for i, want := range []string{`"duplicate":false`, `"duplicate":true`} {
		stdout, stderr, err := inNewShell(t, root, send)
		if err != nil || !strings.Contains(stdout, "200 OK") || !strings.Contains(stdout, want) {
			t.Fatalf("send %d, %s: %v\nstdout %s\nstderr %s\nwant 200 and %s", i+1, send, err, stdout, stderr, want)
		}
	}
}

// docCommands returns the commands of the first ```sh block after the line of doc that
// contains marker, a trailing backslash continuing a command on the next line, and a trailing
// "# comment" dropped.
func docCommands(t *testing.T, doc, marker string) []string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := -1
	for i, l := range lines {
		if strings.Contains(l, marker) {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("%s has no %q: the test and the doc disagree", doc, marker)
	}
	var block []string
	in := false
	for _, l := range lines[start:] {
		switch {
		case !in && strings.TrimSpace(l) == "```sh":
			in = true
		case in && strings.TrimSpace(l) == "```":
			return printedCommands("    " + strings.Join(block, "\n    "))
		case in:
			if i := strings.Index(l, "   #"); i >= 0 {
				l = l[:i]
			}
			block = append(block, l)
		}
	}
	t.Fatalf("%s: no ```sh block after %q", doc, marker)
	return nil
}

// TestTheLocalStackCommandsOfTheHookctlDoc runs what docs/hookctl.md tells a user to run against
// the local stack, as printed, in a new shell from the repository's folder: parked lists what is
// parked (or says nothing is) and check-retention passes on the deployed sources file and table.
// The block's storm needs port 8025, which these tests' downstream holds: make test runs it
// after them, as printed.
func TestTheLocalStackCommandsOfTheHookctlDoc(t *testing.T) {
	deployed(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, c := range docCommands(t, filepath.Join(root, "docs", "hookctl.md"), "For the local stack (after `make run`") {
		if strings.Contains(c, " storm ") {
			continue
		}
		stdout, stderr, err := inNewShell(t, root, c)
		if err != nil {
			t.Fatalf("%s: %v\nstdout %s\nstderr %s", c, err, stdout, stderr)
		}
		if strings.Contains(c, "check-retention") && (!strings.Contains(stdout, "shop ") || !strings.Contains(stdout, "TTL")) {
			t.Errorf("%s:\nstdout %s\nstderr %s\nwant the shop source and the table's TTL", c, stdout, stderr)
		}
		if strings.Contains(stderr, "warning") || strings.Contains(stderr, "WARN") {
			t.Errorf("%s wrote a warning on stderr: %s", c, stderr)
		}
		ran++
	}
	if ran < 2 {
		t.Fatalf("ran %d commands of docs/hookctl.md's local stack block, want parked and check-retention", ran)
	}
}

// TestTheREADMEsSampleCommandsWork runs the send and inspect lines of the README's sample of
// what `make run` prints, as printed, in a new shell from the repository's folder: the send is
// accepted (a duplicate from the second on: its id is the README's, the same every run), the
// same again is a duplicate, and inspect shows the claim.
func TestTheREADMEsSampleCommandsWork(t *testing.T) {
	deployed(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sample, ok := strings.Cut(string(b), "Try it from this folder, in any shell")
	sample, _, ended := strings.Cut(sample, "==> the downstream")
	if !ok || !ended {
		t.Fatal("README.md has no sample of make run's output from \"Try it from this folder, in any shell\" to \"==> the downstream\"")
	}
	cmds := printedCommands(sample)
	if len(cmds) != 2 || !strings.Contains(cmds[0], " send ") || !strings.Contains(cmds[1], " inspect ") {
		t.Fatalf("README.md's sample prints %q, want a send and an inspect", cmds)
	}
	for i, want := range []string{`"received":true`, `"duplicate":true`} {
		stdout, stderr, err := inNewShell(t, root, cmds[0])
		if err != nil || !strings.Contains(stdout, "200 OK") || !strings.Contains(stdout, want) {
			t.Fatalf("send %d, %s: %v\nstdout %s\nstderr %s\nwant 200 and %s", i+1, cmds[0], err, stdout, stderr, want)
		}
	}
	fields := strings.Fields(cmds[1])
	stdout, stderr, err := inNewShell(t, root, cmds[1])
	if claim := "EVT#shop#" + fields[len(fields)-1]; err != nil || !strings.Contains(stdout, claim) {
		t.Fatalf("%s: %v\nstdout %s\nstderr %s\nwant the claim %s", cmds[1], err, stdout, stderr, claim)
	}
}

// TestTheLogsCommandShowsEachFunctionsLinesForAnEvent runs docs/hookctl.md's logs command in a
// new shell after one event: the receiver's delivery line and the outbox's intent line for it
// are printed, each after its function's role.
func TestTheLogsCommandShowsEachFunctionsLinesForAnEvent(t *testing.T) {
	s := deployed(t)
	run := runID(11)
	s.storm(t, run, []int{1}, 1)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	const command = "bin/hookctl logs -since 10m"
	if doc, err := os.ReadFile("../docs/hookctl.md"); err != nil || !strings.Contains(string(doc), command) {
		t.Fatalf("docs/hookctl.md no longer prints %q (%v)", command, err)
	}
	id := harness.EventID(run, 1)
	eventually(t, "the logs show the receiver's and the outbox's lines for "+id, func() (bool, string) {
		stdout, stderr, err := inNewShell(t, root, command+" -filter '\""+id+"\"'")
		var receiver, outbox bool
		for _, l := range strings.Split(stdout, "\n") {
			receiver = receiver || strings.HasPrefix(l, "receiver ") && strings.Contains(l, `"msg":"delivery"`)
			outbox = outbox || strings.HasPrefix(l, "outbox ") && strings.Contains(l, `"msg":"intent"`)
		}
		return err == nil && receiver && outbox, fmt.Sprintf("%v:\n%s%s", err, stdout, stderr)
	})
}
