package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

func TestConsoleRefusesAnUnsafeAddressOrATableNotOncehooks(t *testing.T) {
	_, table := testTable(t)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"console", "-table", table, "-addr", "0.0.0.0:0"}, "not a loopback address: set a token"},
		{[]string{"console", "-table", table, "-addr", "0.0.0.0:0", "-token", "1234"}, "the token is guessable"},
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

// hookctl redrive records who ran it ($USER) on the intent, as the console does.
func TestRedriveRecordsWhoRanIt(t *testing.T) {
	client, table := testTable(t)
	t.Setenv("USER", "ada")
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := store.Commit(ctx, dedup.Event{Source: "shop", ID: "evt_refused", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.New(client, outbox.Config{Table: table, Executors: map[string]outbox.Executor{
		"email": outbox.ExecutorFunc(func(context.Context, outbox.Task) error { return outbox.Permanent(errors.New("422")) })}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := dedup.GetClaim(ctx, client, table, "shop", "evt_refused")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Process(ctx, c); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := hookctl(t, "", "redrive", "-table", table, "shop", "evt_refused"); code != 0 || !strings.Contains(out, "re-drove email.send") {
		t.Fatalf("redrive: %d %s %s", code, out, errOut)
	}
	c, _ = dedup.GetClaim(ctx, client, table, "shop", "evt_refused")
	if in := c.Intents["email.send"]; in.RedrivenBy != "ada (hookctl redrive)" || in.RedrivenAt == "" {
		t.Fatalf("%+v: want the redrive recorded as ada's", in)
	}
}

func TestOperatorIsBoundedAndPrintable(t *testing.T) {
	for user, want := range map[string]string{"": "operator (x)", "ada\n": "ada (x)", strings.Repeat("é", 40): strings.Repeat("é", 30) + " (x)"} {
		t.Setenv("USER", user)
		if got := operator("x"); got != want || dedup.ValidRedrivenBy(got) != nil {
			t.Errorf("USER %q: %q, want %q", user, got, want)
		}
	}
}

// The console's server bounds how long a client may hold a connection at every stage: its
// headers, its body, the answer, an idle keep-alive, and the size of its headers. Without
// them a client that sends slowly (or not at all) keeps a connection and a goroutine forever.
func TestTheConsolesServerBoundsEveryStageOfAConnection(t *testing.T) {
	srv := consoleServer(http.NotFoundHandler())
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout} {
		if d <= 0 {
			t.Errorf("%s is not set", name)
		}
	}
	if srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > http.DefaultMaxHeaderBytes {
		t.Errorf("MaxHeaderBytes %d, want set, at most the default", srv.MaxHeaderBytes)
	}
}
