package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/webhook"
)

// TestABatchThroughTheDeployedStack posts a batch to the local stack's "shop-batch" source (an
// array of order events, as SendGrid posts its events), then the provider's next batch, which
// repeats two of them: each event ships and emails exactly once.
func TestABatchThroughTheDeployedStack(t *testing.T) {
	s := deployed(t)
	run := runID(3)
	url := strings.TrimSuffix(s.sender.URL, "/shop") + "/shop-batch"
	scheme, err := webhook.New(webhook.HMACSHA256, webhook.Options{Header: "X-Shop-Signature", Prefix: "sha256="})
	if err != nil {
		t.Fatal(err)
	}
	event := func(i int) string {
		return fmt.Sprintf(`{"id":"bat_%s_%d","type":"order.paid","data":{"order_id":"ord_%s_b%d","customer_email":"c%d@example.com"}}`, run, i, run, i, i)
	}
	post := func(events ...int) string {
		t.Helper()
		parts := make([]string, len(events))
		for i, e := range events {
			parts[i] = event(e)
		}
		body := []byte("[" + strings.Join(parts, ",") + "]")
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if err := scheme.Sign(req.Header, body, demoSecret, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := s.sender.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("batch %v: %d %s", events, resp.StatusCode, b)
		}
		return string(b)
	}
	if got := post(0, 1, 2); got != `{"received":true,"events":3,"duplicates":0,"ignored":0}` {
		t.Fatalf("first batch: %s", got)
	}
	if got := post(1, 2, 3); got != `{"received":true,"events":3,"duplicates":2,"ignored":0}` {
		t.Fatalf("the overlapping batch: %s", got)
	}
	if n := s.count(t, "ORDER#ord_"+run+"_b"); n != 4 {
		t.Fatalf("%d shipments, want 4: one per event", n)
	}
	eventually(t, "one downstream call per batch event", func() (bool, string) {
		keys, calls := s.down.Seen("shop-batch:bat_" + run + "_")
		return keys == 4 && calls == 4, fmt.Sprintf("%d keys / %d calls", keys, calls)
	})
}
