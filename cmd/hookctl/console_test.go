package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
)

func TestConsoleRefusesAnUnsafeAddressOrATableNotOncehooks(t *testing.T) {
	_, table := testTable(t)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"console", "-table", table, "-addr", "0.0.0.0:0"}, "not a loopback address: set a token"},
		{[]string{"console", "-table", "no-such-table-console", "-addr", "127.0.0.1:0"}, "does not exist"},
		{[]string{"console", "-addr", "127.0.0.1:0", "extra"}, "takes no arguments"},
	} {
		code, _, errOut := hookctl(t, "", c.args...)
		if code != 1 || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: %d %q, want it refused saying %q", c.args, code, errOut, c.says)
		}
	}
}

// hookctl console serves the console package over the table, and stops when its context ends.
func TestConsoleServesTheEventPage(t *testing.T) {
	client, table := testTable(t)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_console", Type: "order.paid", Payload: []byte(`{}`)}, dedup.Plan{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	done := make(chan int)
	go func() {
		code := run(ctx, []string{"console", "-table", table, "-sources", "../../localstack/sources.local.json", "-addr", "127.0.0.1:0", "-read-only"}, strings.NewReader(""), outW, io.Discard)
		outW.Close()
		done <- code
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	base := line[strings.Index(line, "http://") : strings.LastIndex(line, "/")+0]
	go io.Copy(io.Discard, outR)
	resp, err := http.Get(base + "/events/shop/evt_console")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "evt_console") || !strings.Contains(string(body), "read-only") {
		t.Fatalf("%d\n%s", resp.StatusCode, body)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after the context ended", code)
	}
}
