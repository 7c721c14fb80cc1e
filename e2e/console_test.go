package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/harness"
	"github.com/oncehook/oncehook/ops/console"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// chromium finds Debian's Chromium ($CONSOLE_CHROMIUM, or chromium on PATH). Without one the
// browser test skips with the command that installs it, unless CONSOLE_BROWSER=required (CI).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CONSOLE_CHROMIUM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	const install = "no Chromium: install Debian's with localstack/browser (apt-get, as root), or set CONSOLE_CHROMIUM"
	if os.Getenv("CONSOLE_BROWSER") == "required" {
		t.Fatal(install)
	}
	t.Skip(install)
	return ""
}

// The console in a real browser, over the deployed stack: an event sent through the stack is
// found from the search box with its intent done, and from its effect's key; an intent parked
// by the downstream's refusal is re-driven from the Parked page and the downstream applies it
// once; another is re-driven by query; a third is resolved with a reason; the overview's chart
// shows the index's numbers and its Failures section the refused target; the target is paused
// and resumed from the overview. CONSOLE_SCREENSHOTS=dir saves the pages as PNGs (docs/console).
func TestTheConsoleInABrowser(t *testing.T) {
	s := deployed(t)
	exe := chromium(t)
	file, err := sources.Load(filepath.Join("..", "localstack", "sources.local.json"))
	if err != nil {
		t.Fatal(err)
	}
	token := console.NewToken()
	h, err := console.New(console.Config{DynamoDB: s.db, Table: s.table, Sources: file, Operator: "e2e (browser)", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1200, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 5*time.Minute) // a hung browser ends the test, not the suite
	defer cancel()
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			dir := os.Getenv("CONSOLE_SCREENSHOTS")
			if dir == "" {
				return nil
			}
			var png []byte
			if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
		})
	}

	run := runID(0)
	// 1. An event through the stack, found from the search box, its intent done, and its
	// history's newest row the attempt that did it.
	id, body := harness.Order(run, 1)
	if status, resp, err := s.sender.Send(context.Background(), id, body, false); err != nil || status != 200 {
		t.Fatalf("send: %d %s %v", status, resp, err)
	}
	s.waitIntent(t, id, dedup.IntentDone)
	var status, newest string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(srv.URL+"/login?token="+token), // the sign-in link hookctl console prints
		chromedp.Navigate(srv.URL+"/events"),
		chromedp.SendKeys(`#id`, id, chromedp.ByQuery),
		chromedp.Click(`#find`, chromedp.ByQuery),
		chromedp.WaitVisible(`[id="intent-email.send"]`, chromedp.ByQuery),
		chromedp.AttributeValue(`[id="intent-email.send"]`, "data-status", &status, nil, chromedp.ByQuery),
		chromedp.AttributeValue(`[id="intent-email.send"] tr.attempt`, "data-outcome", &newest, nil, chromedp.ByQuery),
		shot("event"),
	); err != nil {
		t.Fatal(err)
	}
	if status != dedup.IntentDone || newest != dedup.IntentDone {
		t.Fatalf("the event page shows the intent %q, its newest attempt %q, want both done", status, newest)
	}
	// The same event from its effect's key, as support has it (the order, not the event id).
	var found string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(srv.URL+"/events"),
		chromedp.SendKeys(`#key`, "ORDER#"+harness.OrderID(run, 1), chromedp.ByQuery),
		chromedp.Click(`#find-key`, chromedp.ByQuery),
		chromedp.WaitVisible(`#event-id`, chromedp.ByQuery),
		chromedp.Text(`#event-id`, &found, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if found != id {
		t.Fatalf("the effect's key ORDER#%s found %q, want %s", harness.OrderID(run, 1), found, id)
	}

	// 2. An intent the downstream refuses is parked; the overview charts it.
	parkedID, body := harness.Order(run, 2)
	key := dedup.IdempotencyKey("shop", parkedID, "email.send")
	s.down.Refuse(key, true)
	if status, resp, err := s.sender.Send(context.Background(), parkedID, body, false); err != nil || status != 200 {
		t.Fatalf("send: %d %s %v", status, resp, err)
	}
	s.waitIntent(t, parkedID, dedup.IntentParked)
	parkedEmail := 0
	for c, err := range outbox.ParkedClaims(context.Background(), s.db, s.table, dedup.PendingShards) {
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range c.Intents {
			if in.Target == "email" && in.Status == dedup.IntentParked {
				parkedEmail++
			}
		}
	}
	var chart, failed string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(`svg.chart`, chromedp.ByQuery),
		chromedp.OuterHTML(`g.row[data-label="email"]`, &chart, chromedp.ByQuery),
		chromedp.Text(`#failed-targets tr[data-failed="email"]`, &failed, chromedp.ByQuery),
		shot("overview"),
	); err != nil {
		t.Fatal(err)
	}
	// due / waiting / running / parked
	if m := regexp.MustCompile(`>(\d+) / (\d+) / (\d+) / (\d+)</text>`).FindStringSubmatch(chart); m == nil || m[4] != fmt.Sprint(parkedEmail) {
		t.Fatalf("the email row %q, want %d parked", chart, parkedEmail)
	}
	// Failures lists the email target, with the parked attempt in its last hour and day.
	if m := regexp.MustCompile(`^email\s+(?:≥ )?(\d+)\s+(?:≥ )?(\d+)`).FindStringSubmatch(strings.TrimSpace(failed)); m == nil || m[1] == "0" || m[2] == "0" {
		t.Fatalf("the Failures section's email row %q, want at least one failure in the hour and the day", failed)
	}

	// 3. Re-driven from the Parked page, through the confirmation; then applied once.
	s.down.Refuse(key, false)
	var result string
	box := fmt.Sprintf(`input[name="ref"][value*="e=%s&"]`, parkedID)
	if err := chromedp.Run(ctx,
		chromedp.Navigate(srv.URL+"/parked?source=shop"),
		chromedp.WaitVisible(box, chromedp.ByQuery),
		shot("parked"),
		chromedp.Click(box, chromedp.ByQuery),
		chromedp.Click(`#redrive-selected`, chromedp.ByQuery),
		chromedp.WaitVisible(`#confirm-redrive`, chromedp.ByQuery),
		chromedp.Click(`#confirm-redrive`, chromedp.ByQuery),
		chromedp.WaitVisible(`#results`, chromedp.ByQuery),
		chromedp.Text(`#results`, &result, chromedp.ByQuery),
		shot("redriven"),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(result, parkedID) || !strings.Contains(result, "re-driven by e2e (browser)") {
		t.Fatalf("results: %s", result)
	}
	s.waitIntent(t, parkedID, dedup.IntentDone)
	eventually(t, "the re-driven intent applied once", func() (bool, string) {
		st := s.down.Stats(key)
		return st.Applied == 1 && st.Repeats == 0, fmt.Sprintf("%+v", st)
	})
	c, err := dedup.GetClaim(context.Background(), s.db, s.table, "shop", parkedID)
	if err != nil || c.Intents["email.send"].RedrivenBy != "e2e (browser)" {
		t.Fatalf("%+v %v: want the redrive recorded", c, err)
	}

	// 4. Re-driven by query: every intent of shop parked since a moment ago, in rounds.
	thirdID, body := harness.Order(run, 3)
	key = dedup.IdempotencyKey("shop", thirdID, "email.send")
	s.down.Refuse(key, true)
	from := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	if status, resp, err := s.sender.Send(context.Background(), thirdID, body, false); err != nil || status != 200 {
		t.Fatalf("send: %d %s %v", status, resp, err)
	}
	s.waitIntent(t, thirdID, dedup.IntentParked)
	s.down.Refuse(key, false)
	if err := chromedp.Run(ctx,
		chromedp.Navigate(srv.URL+"/parked?source=shop&from="+url.QueryEscape(from)),
		chromedp.WaitVisible(`#redrive-query`, chromedp.ByQuery),
		chromedp.Click(`#redrive-query`, chromedp.ByQuery),
		chromedp.WaitVisible(`#next-round`, chromedp.ByQuery),
		chromedp.Click(`#next-round`, chromedp.ByQuery),
		chromedp.WaitVisible(`#summary`, chromedp.ByQuery),
		chromedp.Text(`#results`, &result, chromedp.ByQuery),
		shot("redriven-by-query"),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(result, thirdID) || !strings.Contains(result, "re-driven by e2e (browser)") {
		t.Fatalf("results of the redrive by query: %s", result)
	}
	s.waitIntent(t, thirdID, dedup.IntentDone)

	// 5. Resolved from the Parked page, with a reason, through the confirmation.
	fourthID, body := harness.Order(run, 4)
	key = dedup.IdempotencyKey("shop", fourthID, "email.send")
	s.down.Refuse(key, true)
	defer s.down.Refuse(key, false)
	if status, resp, err := s.sender.Send(context.Background(), fourthID, body, false); err != nil || status != 200 {
		t.Fatalf("send: %d %s %v", status, resp, err)
	}
	s.waitIntent(t, fourthID, dedup.IntentParked)
	box = fmt.Sprintf(`input[name="ref"][value*="e=%s&"]`, fourthID)
	if err := chromedp.Run(ctx,
		chromedp.Navigate(srv.URL+"/parked?source=shop"),
		chromedp.WaitVisible(box, chromedp.ByQuery),
		chromedp.Click(box, chromedp.ByQuery),
		chromedp.SendKeys(`#resolve-why`, "e2e: sent by hand", chromedp.ByQuery),
		chromedp.Click(`#resolve-selected`, chromedp.ByQuery),
		chromedp.WaitVisible(`#confirm-resolve`, chromedp.ByQuery),
		chromedp.Click(`#confirm-resolve`, chromedp.ByQuery),
		chromedp.WaitVisible(`#results`, chromedp.ByQuery),
		chromedp.Text(`#results`, &result, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(result, fourthID) || !strings.Contains(result, "resolved by e2e (browser): e2e: sent by hand") {
		t.Fatalf("results of the resolve: %s", result)
	}
	c, err = dedup.GetClaim(context.Background(), s.db, s.table, "shop", fourthID)
	if err != nil {
		t.Fatal(err)
	}
	if in := c.Intents["email.send"]; in.Status != dedup.IntentResolved || in.ResolvedBy != "e2e (browser)" || in.Resolution != "e2e: sent by hand" {
		t.Fatalf("%+v: want the resolve recorded", in)
	}

	// 6. The email target paused from the overview, through the confirmation, then resumed:
	// recorded with the operator's name, and left paused by nothing, however the test ends.
	targets := &outbox.Targets{API: s.db, Table: s.table}
	defer targets.Resume(context.Background(), "email")
	var pausedRow string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.SetValue(`#pause-target`, "email", chromedp.ByQuery),
		chromedp.SendKeys(`#pause-why`, "e2e: the downstream's maintenance", chromedp.ByQuery),
		chromedp.Click(`#pause`, chromedp.ByQuery),
		chromedp.WaitVisible(`#confirm-pause`, chromedp.ByQuery),
		chromedp.Click(`#confirm-pause`, chromedp.ByQuery),
		chromedp.WaitVisible(`tr[data-paused="email"]`, chromedp.ByQuery),
		chromedp.Text(`tr[data-paused="email"]`, &pausedRow, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if p, err := targets.Paused(context.Background()); err != nil || p["email"].By != "e2e (browser)" || !strings.Contains(pausedRow, "e2e (browser)") {
		t.Fatalf("paused from the console: %+v %v; the overview's row %q", p, err, pausedRow)
	}
	if err := chromedp.Run(ctx,
		chromedp.Click(`#resume-email`, chromedp.ByQuery),
		chromedp.WaitVisible(`#confirm-pause`, chromedp.ByQuery),
		chromedp.Click(`#confirm-pause`, chromedp.ByQuery),
		chromedp.WaitVisible(`#paused-targets`, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if p, err := targets.Paused(context.Background()); err != nil || len(p) != 0 {
		t.Fatalf("resumed from the console: %+v %v", p, err)
	}
}

// waitIntent waits until the event's email intent has the status.
func (s *stack) waitIntent(t *testing.T, id, status string) {
	t.Helper()
	eventually(t, id+" email.send "+status, func() (bool, string) {
		c, err := dedup.GetClaim(context.Background(), s.db, s.table, "shop", id)
		if err != nil {
			return false, err.Error()
		}
		return c.Intents["email.send"].Status == status, c.Intents["email.send"].Status
	})
}
