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
