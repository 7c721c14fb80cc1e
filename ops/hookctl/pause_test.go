package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/outbox"
)

// An operator pauses a target of the sources file, with why; the pause is listed with who and
// why, a name the sources file does not have is refused, and resume lets the target go again.
func TestPauseListAndResumeATarget(t *testing.T) {
	client, table := testTable(t)
	t.Setenv("USER", "ada")
	file := filepath.Join(t.TempDir(), "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"1d"}},`+
		`"targets":{"email":{"url":"https://mail.example.com/send"}}}`), 0o600)
	if code, _, errOut := hookctl(t, "", "pause", "-table", table, "-sources", file, "emial", "maintenance"); code != 1 || !strings.Contains(errOut, `no target "emial"`) {
		t.Fatalf("pause of a target the sources file has not: %d %s", code, errOut)
	}
	if code, _, errOut := hookctl(t, "", "pause", "-table", table, "email"); code != 1 || !strings.Contains(errOut, "want <target> <why...>") {
		t.Fatalf("pause without why: %d %s", code, errOut)
	}
	code, out, errOut := hookctl(t, "", "pause", "-table", table, "-sources", file, "email", "mail", "provider", "maintenance")
	if code != 0 || !strings.Contains(out, "paused email: mail provider maintenance") || !strings.Contains(out, "hookctl resume email") {
		t.Fatalf("pause: %d\n%s%s", code, out, errOut)
	}
	paused, err := (&outbox.Targets{API: client, Table: table}).Paused(context.Background())
	if p := paused["email"]; err != nil || p.By != "ada (hookctl pause)" || p.Why != "mail provider maintenance" {
		t.Fatalf("paused targets %+v %v, want email paused by ada (hookctl pause)", paused, err)
	}
	if code, out, errOut := hookctl(t, "", "pause", "-table", table); code != 0 || !strings.Contains(out, "email") || !strings.Contains(out, "ada (hookctl pause)") || !strings.Contains(out, "1 paused targets") {
		t.Fatalf("list: %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := hookctl(t, "", "resume", "-table", table, "email"); code != 0 || !strings.Contains(out, "resumed email") {
		t.Fatalf("resume: %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := hookctl(t, "", "pause", "-table", table); code != 0 || strings.Contains(out, "email") || !strings.Contains(out, "0 paused targets") {
		t.Fatalf("list after resume: %d\n%s%s", code, out, errOut)
	}
}

// TestPauseRefusesWhenTheNamedSourcesFileDoesNotLoad: a sources file named (by -sources,
// ONCEHOOK_SOURCES_FILE or the stack file) that does not load refuses the pause with its
// error, pausing nothing: read as no file, a misspelled target would be paused while the real
// one kept being called. With none named, the name is not checked.
func TestPauseRefusesWhenTheNamedSourcesFileDoesNotLoad(t *testing.T) {
	client, table := testTable(t)
	dir := t.TempDir()
	missing, invalid := filepath.Join(dir, "sourcse.json"), filepath.Join(dir, "invalid.json")
	os.WriteFile(invalid, []byte(`{"sources":{"shop":{"scheme":"nope"}}}`), 0o600)
	stack := filepath.Join(dir, "stack.env")
	if err := writeStack(stack, "a test's", map[string]string{"AWS_ENDPOINT_URL": os.Getenv("AWS_ENDPOINT_URL"), stackTable: table, stackSources: missing}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  string
		args []string
		path string
	}{
		{"", []string{"-stack", "none", "-sources", missing}, missing},
		{"", []string{"-stack", "none", "-sources", invalid}, invalid},
		{missing, []string{"-stack", "none"}, missing},
		{"", []string{"-stack", stack}, missing},
	} {
		t.Setenv("ONCEHOOK_SOURCES_FILE", c.env)
		args := append(append([]string{"pause", "-table", table}, c.args...), "emial", "maintenance")
		code, out, errOut := hookctl(t, "", args...)
		paused, err := (&outbox.Targets{API: client, Table: table}).Paused(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if code != 1 || !strings.Contains(errOut, c.path) || len(paused) != 0 {
			t.Errorf("ONCEHOOK_SOURCES_FILE=%q %v: exit %d, paused %v\n%s%s", c.env, args, code, paused, out, errOut)
		}
	}
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	if code, out, errOut := hookctl(t, "", "pause", "-stack", "none", "-table", table, "email", "maintenance"); code != 0 || !strings.Contains(out, "paused email") {
		t.Fatalf("pause with no sources file named: exit %d\n%s%s", code, out, errOut)
	}
}
