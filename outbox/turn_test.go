package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
)

// TestAnIntentsLogLineNeverHoldsTheWebhooksPathOrTheDownstreamsAnswer: the worker's "intent"
// line goes to CloudWatch Logs, read by more people than the claims table and kept longer. A
// webhook URL's path and query are its secret (Slack's and Discord's incoming webhooks,
// ?token=), and the downstream's answer may echo the request (a customer's e-mail): the line
// describes a failure as its span does, by the URL's scheme and host and the status code,
// keeping what the worker itself says (at-most-once), while the claim's last_error keeps the
// whole error for the console's redacted view.
func TestAnIntentsLogLineNeverHoldsTheWebhooksPathOrTheDownstreamsAnswer(t *testing.T) {
	t.Parallel()
	down := rawServer(t, func(_ int, req *http.Request) string {
		body := "cannot deliver to alice@PIIECHO.example: " + req.URL.String()
		return "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
	})
	for name, amo := range map[string]bool{"retried": false, "at most once": true} {
		e := newEnv(t)
		e.commit(1)
		var logs bytes.Buffer
		w := e.worker(func(c *outbox.Config) {
			c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			var x outbox.Executor = &outbox.HTTPExecutor{URL: "http://" + down + "/services/T000SECRET/B000SECRET?token=QSECRET", Timeout: 2 * time.Second}
			if amo {
				x = outbox.AtMostOnce(x)
			}
			c.Executors["email"], c.Executors["http:fulfilment"] = x, x
		})
		if _, err := w.HandleStream(context.Background(), batch(e.records())); err != nil {
			t.Fatal(err)
		}
		line := logs.String()
		if !strings.Contains(line, `"msg":"intent"`) || !strings.Contains(line, "500") || !strings.Contains(line, "http://"+down) {
			t.Fatalf("%s: log %s: want the intent's line naming the status and the host", name, line)
		}
		if amo && !strings.Contains(line, "at-most-once") {
			t.Errorf("%s: log %s: the worker's own words are lost", name, line)
		}
		for _, secret := range []string{"SECRET", "PIIECHO"} {
			if strings.Contains(line, secret) {
				t.Errorf("%s: the intent's log line holds %s: %s", name, secret, line)
			}
		}
		for _, c := range e.claims() {
			for in, i := range c.Intents {
				if !strings.Contains(i.LastError, "PIIECHO") {
					t.Errorf("%s: %s's last_error %q: the claim keeps the whole error", name, in, i.LastError)
				}
			}
		}
	}
}

// TestEveryAttemptIsInItsIntentsHistory: against a real downstream, an intent retried twice
// (503), parked (400), re-driven by an operator and then done shows each attempt in its
// history, in order, with the status its call got; each done's answer (the other intent's at
// once, this one's at the end) lost and the write sent again by the SDK adds it once. The claim's size after each step is logged with the write
// units a write of it costs (docs/outbox.md, "An intent's history").
func TestEveryAttemptIsInItsIntentsHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	email := dedup.IdempotencyKey("shop", "evt_0000", "email.send")
	e.down.fail = func(_ int, key string) (int, time.Duration) {
		if key != email {
			return 0, 0
		}
		e.down.mu.Lock()
		n := e.down.calls[key] // the downstream's lock is free while fail runs
		e.down.mu.Unlock()
		return map[int]int{1: http.StatusServiceUnavailable, 2: http.StatusServiceUnavailable, 3: http.StatusBadRequest}[n], 0
	}
	lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: 2, Match: dedup.IntentDone}
	w := e.worker(nil, awstest.WithTransport(lose))
	e.commit(1)
	size := func(step string) {
		n := storedSize(e.items()[dedup.ClaimKey("shop", "evt_0000")+"/"+dedup.ClaimSK])
		t.Logf("after %-16s the claim is %4d bytes: %d write units a write", step, n, (n+1023)/1024)
	}
	size("the commit")
	for _, step := range []string{"a 503", "another 503", "a 400"} {
		if _, err := w.Process(context.Background(), e.claim("evt_0000")); err != nil {
			t.Fatal(err)
		}
		size(step)
		e.advance(time.Minute) // past the backoff
	}
	if err := redriveByAt(context.Background(), e.client, e.table, e.claim("evt_0000"), "email.send", e.now(), "ada (test)"); err != nil {
		t.Fatal(err)
	}
	size("the redrive")
	if _, err := w.Process(context.Background(), e.claim("evt_0000")); err != nil {
		t.Fatal(err)
	}
	size("done")
	if lose.Lost() != 2 {
		t.Fatalf("%d done answers lost, want both", lose.Lost())
	}
	if h := e.claim("evt_0000").Intents["fulfilment.create"].History; len(h) != 1 || h[0].Outcome != dedup.IntentDone {
		t.Fatalf("history %+v, want the one done", h)
	}
	var got []string
	for _, h := range e.claim("evt_0000").Intents["email.send"].History {
		got = append(got, fmt.Sprintf("%d %s %d %s", h.Attempt, h.Outcome, h.Code, h.By))
	}
	want := []string{"1 retry 503 ", "2 retry 503 ", "3 parked 400 ", "3 redriven 0 ada (test)", "4 done 0 "}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("history %q, want %q", got, want)
	}
	if calls, _, _ := e.down.snapshot(); calls[email] != 4 {
		t.Fatalf("%d calls, want 4", calls[email])
	}
}
