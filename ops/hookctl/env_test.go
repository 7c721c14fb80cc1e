package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/emf"
)

// TestMain lets the test binary run as hookctl itself (HOOKCTL_TEST_MAIN=1): the tests below
// start it as a new process with an environment of their choosing, as a user's shell would.
func TestMain(m *testing.M) {
	if os.Getenv("HOOKCTL_TEST_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// process runs hookctl as a process in dir with exactly env (plus the switch that makes the
// test binary hookctl), as a fresh shell with only those variables would.
func process(t *testing.T, dir string, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"HOOKCTL_TEST_MAIN=1"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// cleanEnv is a new shell's environment on a machine with no AWS configuration: PATH and a
// HOME of its own (no ~/.aws), and the instance metadata service redirected to imds, where any
// request is counted: the SDK would otherwise try 169.254.169.254.
func cleanEnv(t *testing.T, imds string, extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AWS_EC2_METADATA_SERVICE_ENDPOINT=" + imds}, extra...)
}

// metadataService stands in for 169.254.169.254 and counts what reaches it.
func metadataService(t *testing.T) (string, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &hits
}

// TestWithoutAnEndpointOrCredentialsItSaysWhatToDo: in a new shell with no AWS configuration and
// no local stack in the folder, every command that needs AWS answers with one line saying what
// to set, and nothing reaches for the instance metadata service (the SDK's chain would, with
// retries, and a warning about IMDSv1 on stderr).
func TestWithoutAnEndpointOrCredentialsItSaysWhatToDo(t *testing.T) {
	imds, hits := metadataService(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "sources.json")
	if err := os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"secretsmanager":"oncehook-local/shop"}],"retry_horizon":"1d","redrive_window":"0d"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"inspect", "-table", "t", "shop", "msg_1"},
		{"inspect", "shop", "msg_1"},
		{"send", "-sources", file, "-id", "msg_1", "shop", "http://127.0.0.1:1/hooks/shop"},
		{"parked", "-table", "t"},
		{"redrive", "-table", "t", "shop", "msg_1"},
		{"audit", "-table", "t"},
		{"check-retention", "-sources", file, "-table", "t"},
		{"backfill", "-sources", file, "-table", "t", "shop", file},
	} {
		code, out, errOut := process(t, dir, cleanEnv(t, imds), "{}", args...)
		want := "hookctl " + args[0] + ": " + errNoCredentials.Error() + "\n"
		if code != 1 || !strings.HasSuffix(out+errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant exit 1 and stderr %q", args, code, out, errOut, want)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d requests reached the instance metadata service", n)
	}
}

// TestTheInstanceMetadataServiceIsUsedOnlyWhenAskedFor: on an EC2 instance with a role, the
// operator says AWS_EC2_METADATA_DISABLED=false, and the SDK's chain reaches it. (This is also
// what shows the test above would see a request if one were made.)
func TestTheInstanceMetadataServiceIsUsedOnlyWhenAskedFor(t *testing.T) {
	imds, hits := metadataService(t)
	code, _, errOut := process(t, t.TempDir(), cleanEnv(t, imds, "AWS_EC2_METADATA_DISABLED=false", "AWS_REGION=us-east-1"), "", "inspect", "-table", "t", "shop", "msg_1")
	if code != 1 || hits.Load() == 0 {
		t.Fatalf("exit %d, %d metadata requests, stderr %q: want the SDK's chain to ask the metadata service", code, hits.Load(), errOut)
	}
	if strings.Contains(errOut, errNoCredentials.Error()) {
		t.Errorf("stderr %q: with the metadata service asked for, its failure is the SDK's to explain", errOut)
	}
}

// commitClaim commits one claim with an intent to a fresh table of the test endpoint.
func commitClaim(t *testing.T, source, id string) (table string) {
	t.Helper()
	client, table := testTable(t)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{source: {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(context.Background(), dedup.Event{Source: source, ID: id, Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	return table
}

// TestALocalEndpointNeedsNoCredentials: AWS_ENDPOINT_URL on this machine is an emulator, which
// takes any credentials: none need be set, and the SDK writes nothing on stderr.
func TestALocalEndpointNeedsNoCredentials(t *testing.T) {
	table := commitClaim(t, "shop", "evt_local")
	imds, hits := metadataService(t)
	code, out, errOut := process(t, t.TempDir(), cleanEnv(t, imds, "AWS_ENDPOINT_URL="+os.Getenv("AWS_ENDPOINT_URL")), "", "inspect", "-table", table, "shop", "evt_local")
	if code != 0 || !strings.Contains(out, "EVT#shop#evt_local") || errOut != "" || hits.Load() != 0 {
		t.Fatalf("exit %d, %d metadata requests\nstdout %s\nstderr %q", code, hits.Load(), out, errOut)
	}
}

// writeLocalStack writes dir/.oncehook/stack.env for the test endpoint and table, as a deploy does.
func writeLocalStack(t *testing.T, dir, table, sourcesFile string) string {
	t.Helper()
	path := filepath.Join(dir, StackFile)
	if err := writeStack(path, "a test's", map[string]string{
		"AWS_ENDPOINT_URL": os.Getenv("AWS_ENDPOINT_URL"), "AWS_REGION": "us-east-1",
		stackTable: table, stackSources: sourcesFile, stackWebhookURL: "http://127.0.0.1:1/hooks/{source}",
	}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTheLocalStackIsFoundInTheProjectFolder: where a local deploy wrote .oncehook/stack.env,
// a new shell with nothing set runs hookctl against that stack, and hookctl says so in one
// line; an endpoint of the caller's elsewhere, or -stack none, wins over the folder's file.
func TestTheLocalStackIsFoundInTheProjectFolder(t *testing.T) {
	table := commitClaim(t, "shop", "evt_here")
	dir := t.TempDir()
	file := filepath.Join(dir, "sources.json")
	if err := os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"S"}],"retry_horizon":"1d","redrive_window":"0d"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeLocalStack(t, dir, table, file)
	imds, hits := metadataService(t)
	note := "hookctl: the local stack recorded in " + StackFile + " (" + os.Getenv("AWS_ENDPOINT_URL") + ")\n"
	for name, env := range map[string][]string{
		"nothing set":       nil,
		"a profile of AWS":  {"AWS_PROFILE=production", "AWS_REGION=eu-west-1"}, // its credentials never go to an emulator
		"the same endpoint": {"AWS_ENDPOINT_URL=" + os.Getenv("AWS_ENDPOINT_URL")},
	} {
		code, out, errOut := process(t, dir, cleanEnv(t, imds, env...), "", "inspect", "shop", "evt_here")
		if code != 0 || !strings.Contains(out, "EVT#shop#evt_here") || errOut != note {
			t.Errorf("%s: exit %d\nstdout %s\nstderr %q, want %q", name, code, out, errOut, note)
		}
	}
	// Named, the file is used from anywhere, and nothing is announced.
	code, out, errOut := process(t, t.TempDir(), cleanEnv(t, imds, "ONCEHOOK_STACK="+path), "", "inspect", "shop", "evt_here")
	if code != 0 || !strings.Contains(out, "EVT#shop#evt_here") || errOut != "" {
		t.Errorf("ONCEHOOK_STACK: exit %d\nstdout %s\nstderr %q", code, out, errOut)
	}
	for name, c := range map[string]struct {
		env  []string
		args []string
	}{
		"another endpoint": {[]string{"AWS_ENDPOINT_URL=http://127.0.0.1:1"}, []string{"inspect", "shop", "evt_here"}},
		"-stack none":      {nil, []string{"inspect", "-stack", "none", "shop", "evt_here"}},
	} {
		code, _, errOut := process(t, dir, cleanEnv(t, imds, c.env...), "", c.args...)
		if code != 1 || strings.Contains(errOut, "local stack recorded") {
			t.Errorf("%s: exit %d, stderr %q: want the folder's stack left alone", name, code, errOut)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests reached the instance metadata service", hits.Load())
	}
}

// TestAStackFileFoundHereThatNamesNoLocalEndpointIsRefused: a stack file found in the folder
// is used only for an emulator on this machine; one naming no endpoint, or another (whatever
// the environment says), is refused, naming the file, and nothing is sent anywhere with the
// caller's credentials.
func TestAStackFileFoundHereThatNamesNoLocalEndpointIsRefused(t *testing.T) {
	var sent atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		http.Error(w, "no", http.StatusBadGateway)
	}))
	defer proxy.Close()
	imds, _ := metadataService(t)
	const aws = "https://dynamodb.us-east-1.amazonaws.com"
	for _, c := range []struct{ file, env string }{{"", ""}, {aws, ""}, {aws, aws}, {"http://db.internal:4566", ""}} {
		dir := t.TempDir()
		vars := map[string]string{stackTable: "shop-local", "AWS_REGION": "us-east-1"}
		if c.file != "" {
			vars["AWS_ENDPOINT_URL"] = c.file
		}
		if err := writeStack(filepath.Join(dir, StackFile), "hand-made", vars); err != nil {
			t.Fatal(err)
		}
		env := cleanEnv(t, imds, "AWS_ACCESS_KEY_ID=AKIAREALPROD", "AWS_SECRET_ACCESS_KEY=prod", "AWS_REGION=us-east-1", "HTTPS_PROXY="+proxy.URL, "HTTP_PROXY="+proxy.URL)
		if c.env != "" {
			env = append(env, "AWS_ENDPOINT_URL="+c.env)
		}
		code, out, errOut := process(t, dir, env, "", "inspect", "shop", "evt_1")
		if code == 0 || out != "" || !strings.Contains(errOut, StackFile) || strings.Contains(errOut, "local stack recorded") || sent.Load() != 0 {
			t.Errorf("stack file's endpoint %q, AWS_ENDPOINT_URL %q: exit %d, %d requests sent\nstdout %q\nstderr %q", c.file, c.env, code, sent.Load(), out, errOut)
		}
	}
}

// TestAStoppedEmulatorIsOneLine: the folder's stack names an emulator that is not running (make
// run was stopped): one line saying so, not the SDK's retries of a refused connection.
func TestAStoppedEmulatorIsOneLine(t *testing.T) {
	dir := t.TempDir()
	if err := writeStack(filepath.Join(dir, StackFile), "a stopped one", map[string]string{
		"AWS_ENDPOINT_URL": "http://127.0.0.1:1", stackTable: "t", stackSources: filepath.Join(dir, "none.json"),
	}); err != nil {
		t.Fatal(err)
	}
	imds, _ := metadataService(t)
	code, _, errOut := process(t, dir, cleanEnv(t, imds), "", "inspect", "shop", "msg_1")
	want := "hookctl: the local stack recorded in .oncehook/stack.env (http://127.0.0.1:1)\n" +
		"hookctl inspect: nothing answers on http://127.0.0.1:1 (.oncehook/stack.env): is the emulator running? (make run or make up starts it, in oncehook's folder)\n"
	if code != 1 || errOut != want {
		t.Fatalf("exit %d, stderr %q, want %q", code, errOut, want)
	}
}

// TestAStackFileIsWhatAShellReads: the stack file's values, quoted where they need it, read
// back the same by hookctl and by a shell sourcing it.
func TestAStackFileIsWhatAShellReads(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "d", "stack.env")
	vars := map[string]string{
		"PLAIN":  "http://127.0.0.1:4566/_aws/execute-api/a1b2/hooks/{source}",
		"SPACES": "/Users/Ada Lovelace/my app/sources.json",
		"QUOTES": `it's "quoted" $HOME ; ` + "`date`",
		"EMPTY":  "",
	}
	if err := writeStack(path, "two\nlines", vars); err != nil {
		t.Fatal(err)
	}
	s, err := readStack(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range vars {
		if s.vars[k] != v {
			t.Errorf("hookctl reads %s=%q, want %q", k, s.vars[k], v)
		}
		out, err := exec.Command("bash", "-c", `set -a; . "$0"; printf %s "$`+k+`"`, path).Output()
		if err != nil || string(out) != v {
			t.Errorf("a shell reads %s=%q (%v), want %q", k, out, err, v)
		}
	}
}

// TestSendWithAnEnvironmentSecretNeedsNoAWS: a source whose secret is an environment variable
// is signed for with no AWS configuration at all, in a new shell.
func TestSendWithAnEnvironmentSecretNeedsNoAWS(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Webhook-Signature") == "" {
			http.Error(w, "unsigned", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"received":true,"duplicate":false}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"SHOP_SECRET"}],"retry_horizon":"1d","redrive_window":"0d"}}}`), 0o600)
	imds, hits := metadataService(t)
	code, out, errOut := process(t, dir, cleanEnv(t, imds, "SHOP_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "{}", "send", "-sources", file, "shop", srv.URL+"/hooks/shop")
	if code != 0 || !strings.HasPrefix(out, "200 OK") || errOut != "" || hits.Load() != 0 {
		t.Fatalf("exit %d, %d metadata requests\nstdout %s\nstderr %q", code, hits.Load(), out, errOut)
	}
}

// hookctl console -metrics charts the namespace the stack's functions write (the construct's
// is oncehook/<its path>): -metrics-namespace, else the stack file's or $METRICS_NAMESPACE as
// for the table, else the functions' own default.
func TestTheConsoleChartsTheStacksMetricsNamespace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stack.env")
	if err := writeStack(path, "a test's", map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", stackNamespace: "oncehook/App/Webhooks"}); err != nil {
		t.Fatal(err)
	}
	cmd := commands[slices.IndexFunc(commands, func(c command) bool { return c.name == "console" })]
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"-stack", path}, "oncehook/App/Webhooks"},
		{"", []string{"-stack", path, "-metrics-namespace", "mine"}, "mine"},
		{"oncehook/Env", []string{"-stack", "none"}, "oncehook/Env"},
		{"", []string{"-stack", "none"}, emf.DefaultNamespace},
	} {
		t.Setenv("METRICS_NAMESPACE", c.env)
		cl, _, err := parseFlags(cmd, c.args, strings.NewReader(""), io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := cl.metricsNamespace(); got != c.want {
			t.Errorf("METRICS_NAMESPACE=%q %v: %q, want %q", c.env, c.args, got, c.want)
		}
	}
}
