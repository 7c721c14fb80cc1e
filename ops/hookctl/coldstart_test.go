package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// buildReceiver builds the receiver's Lambda binary as make build does.
func buildReceiver(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", "lambda.norpc", "-o", bin, "../../functions/receiver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The receiver binary, run as Lambda runs it against the test endpoint's table, reports its
// first events handled; then warm processes handle every delivery, one accepted per event.
// Timings are printed, never asserted.
func TestColdstartReportsTheFirstEventHandled(t *testing.T) {
	client := awstest.Client(t)
	t.Setenv("AWS_REGION", "us-east-1")
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		t.Setenv("AWS_ACCESS_KEY_ID", "test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	}
	table := awstest.Table(t, client)
	bin := buildReceiver(t)

	code, out, errOut := hookctl(t, "", "coldstart", "-table", table, bin, "-runs", "3", "-throughput", "5", "-copies", "3", "-concurrency", "2")
	if code != 0 {
		t.Fatalf("coldstart: %d\n%s%s", code, out, errOut)
	}
	t.Log("\n" + out)
	for _, want := range []string{"3 cold starts", "init ", "total ", "handled 3/3 first events", "accepted 5 (want 5), duplicates 10 (want 10)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
	// Each cold run commits two new events (the first and the warm one), then the 5.
	claims := 0
	for _, item := range awstest.Items(t, client, table) {
		if sk, ok := item[dedup.SortKey].(*types.AttributeValueMemberS); ok && sk.Value == dedup.ClaimSK {
			claims++
		}
	}
	if claims != 3*2+5 {
		t.Fatalf("%d claims in the table, want %d", claims, 3*2+5)
	}
}

func TestColdstartRefusesWithoutABootstrapOrATable(t *testing.T) {
	if code, _, errOut := hookctl(t, "", "coldstart", "-table", "t"); code != 1 || !strings.Contains(errOut, "want <bootstrap>") {
		t.Fatalf("no bootstrap: %d %s", code, errOut)
	}
	t.Setenv("TABLE_NAME", "")
	if code, _, errOut := hookctl(t, "", "coldstart", "/bin/true"); code != 1 || !strings.Contains(errOut, "no table") {
		t.Fatalf("no table: %d %s", code, errOut)
	}
	if code, _, errOut := hookctl(t, "", "coldstart", "-table", "t", "/nonexistent/bootstrap"); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("a missing bootstrap: %d %s", code, errOut)
	}
}
