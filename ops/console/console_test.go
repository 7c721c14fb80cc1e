package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/ops/console"
)

func TestTheEventPageTellsTheClaimEffectsIntentsAndGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("gh", "dlv-1", true)
	e.down.setRefuse(key("gh", "dlv-1", "crm.update"), true)
	e.drain()
	b := e.serve(nil)
	page := b.get("/events/gh/dlv-1")
	if page.Status != http.StatusOK {
		t.Fatalf("%d\n%s", page.Status, page.Body)
	}
	cl := e.claim("gh", "dlv-1")
	mustContain(t, page, "order.paid", cl.CommitToken, cl.PayloadSHA256, "ORDER#dlv-1", "PAID",
		`id="intent-email.send" data-status="done"`, `id="intent-crm.update" data-status="parked"`,
		html.EscapeString(key("gh", "dlv-1", "email.send")), "422", "order unknown to the warehouse",
		"held by this event", dedup.ClaimKey("gh", cl.BodyGuard))
	// Payloads and effect values are hidden by default; a parked intent has its action.
	mustNotContain(t, page, "PAYLOAD-VALUE")
	mustContain(t, page, `action="/redrive"`)
	for _, s := range neverRendered {
		mustNotContain(t, page, s)
	}

	shown := e.serve(func(c *console.Config) { c.ShowPayloads = true }).get("/events/gh/dlv-1")
	mustContain(t, shown, "PAYLOAD-VALUE-ada@example.com", "PAYLOAD-VALUE-total-4200")
}

func TestBadInputGetsAClearPageWithTheRightStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.serve(nil)
	cases := []struct {
		path   string
		status int
		says   string
	}{
		{"/events/nosuch/evt_1", http.StatusNotFound, "not in the sources file"},
		{"/events/Not%20A%20Source/evt_1", http.StatusBadRequest, "a source is 1 to"},
		{"/events/shop/evt%0A1", http.StatusBadRequest, "event_id"},
		{"/events/shop/evt%001", http.StatusBadRequest, "event_id"},
		{"/events/shop/" + strings.Repeat("x", 600), http.StatusBadRequest, "event_id"},
		{"/events/shop/evt_missing", http.StatusNotFound, "no claim"},
		{"/events?source=shop&id=a%07b", http.StatusBadRequest, "event_id"},
		{"/parked?source=NOPE", http.StatusBadRequest, "a source is 1 to"},
		{"/nowhere", http.StatusNotFound, "no page"},
		{"/redrive", http.StatusMethodNotAllowed, "POST only"},
	}
	for _, c := range cases {
		r := b.get(c.path)
		if r.Status != c.status || !strings.Contains(r.Body, c.says) || !strings.Contains(r.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %q, want %d saying %q", c.path, r.Status, r.Header.Get("Content-Type"), c.status, c.says)
		}
		if strings.Contains(r.Body, "goroutine") || strings.Contains(r.Body, ".go:") {
			t.Errorf("%s: a stack trace on the page", c.path)
		}
	}
}

func TestEveryPageCarriesTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.serve(nil)
	for _, p := range []string{"/", "/events", "/parked", "/backlog", "/audit", "/events/shop/none", "/nowhere"} {
		r := b.get(p)
		csp := r.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") || r.Header.Get("X-Frame-Options") != "DENY" || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", p, r.Header)
		}
		if strings.Contains(r.Body, "<script") {
			t.Errorf("%s has a script", p)
		}
	}
}

func TestTheStylesheetIsServedWholeWhateverRangeIsAsked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.serve(nil)
	whole := b.get("/static/console.css")
	if whole.Status != http.StatusOK || !strings.HasPrefix(whole.Body, "/* oncehook console") {
		t.Fatalf("the stylesheet: %d %q", whole.Status, whole.Body)
	}
	for _, rng := range []string{"bytes=0-9", "bytes=99999-"} {
		req, err := http.NewRequest(http.MethodGet, b.base+"/static/console.css", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Range", rng)
		r := b.do(req)
		if r.Status != http.StatusOK || r.Body != whole.Body || r.Header.Get("Content-Type") != "text/css; charset=utf-8" ||
			r.Header.Get("Cache-Control") != "max-age=300" || r.Header.Get("Accept-Ranges") != "" {
			t.Errorf("Range %s: %d, headers %v, %d bytes; want 200, the whole stylesheet as text/css, max-age=300, no Accept-Ranges", rng, r.Status, r.Header, len(r.Body))
		}
	}
}

// No unbounded read, the forms: a redrive form, a login form, are read up to a bound, and a larger
// one is refused with a page.
func TestNoFormIsReadPastItsBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.serve(func(c *console.Config) { c.Token = "4f1c9a7e2b8d6035e1a9c4f7b2d8e063" })
	if r := b.post("/login", url.Values{"token": {strings.Repeat("x", 8<<10)}}); r.Status != http.StatusBadRequest {
		t.Fatalf("a login form of 8 KiB: %d, want 400", r.Status)
	}
	mustContain(t, b.post("/login", url.Values{"token": {"4f1c9a7e2b8d6035e1a9c4f7b2d8e063"}}), "")
	page := b.get("/parked")
	if r := b.post("/redrive", url.Values{"csrf": {csrf(t, page)}, "ref": {strings.Repeat("s=shop&e=x&i=y", 400_000)}}); r.Status != http.StatusBadRequest {
		t.Fatalf("a redrive form of 5 MB: %d, want 400", r.Status)
	}
}

// An attempt recorded after its lease was taken over (its call was made, beside the attempt
// that took over) is marked late on the event page.
func TestTheEventPageMarksALateAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_late", false)
	hist, err := attributevalue.Marshal([]dedup.Attempt{
		{At: time.Now().UnixMilli(), Attempt: 1, Outcome: dedup.AttemptRetried, Code: 500, Error: "POST failed", Late: true},
		{At: time.Now().UnixMilli(), Attempt: 2, Outcome: dedup.IntentDone},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: &e.table,
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dedup.ClaimKey("shop", "evt_late")}, "sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK}},
		UpdateExpression:          aws.String("SET intents.#n.history = :h"),
		ExpressionAttributeNames:  map[string]string{"#n": "email.send"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": hist}}); err != nil {
		t.Fatal(err)
	}
	page := e.serve(nil).get("/events/shop/evt_late")
	rows := regexp.MustCompile(`(?s)<tr class="attempt".*?</tr>`).FindAllString(regexp.MustCompile(`(?s)id="intent-email.send".*?</table>`).FindString(page.Body), -1)
	if len(rows) != 2 || strings.Contains(rows[0], `class="late"`) || !strings.Contains(rows[1], `class="late"`) {
		t.Fatalf("history rows, newest first:\n%s\nwant the first attempt (listed last) marked late, and it alone", strings.Join(rows, "\n"))
	}
}

// Every attempt of an intent is on its event page, newest first: two 503s, the 422 that parked
// it, the operator's redrive and the attempt that succeeded, each with its code, and its error
// redacted as the last error is (the target's URL by its host only).
func TestTheEventPageShowsEveryAttemptNewestFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now().Add(-time.Hour)
	turn := e.at(&now)
	e.commit("shop", "evt_h", false)
	email := key("shop", "evt_h", "email.send")
	e.down.setUnavailable(email, 2)
	e.down.setRefuse(email, true)
	for range 3 {
		turn("shop", "evt_h")
	}
	claims := &dedup.Claims{API: e.client, Table: e.table, Now: func() time.Time { return now }}
	if err := claims.RedriveBy(context.Background(), e.claim("shop", "evt_h"), "email.send", "bob (hookctl)"); err != nil {
		t.Fatal(err)
	}
	e.down.setRefuse(email, false)
	turn("shop", "evt_h")
	page := e.serve(nil).get("/events/shop/evt_h")
	intent := regexp.MustCompile(`(?s)id="intent-email.send".*?</table>`).FindString(page.Body)
	var got []string
	for _, m := range regexp.MustCompile(`(?s)<tr class="attempt" data-outcome="(\w+)">.*?<td class="num">(\d+)</td><td>\w+</td><td class="num">([-\d]+)</td><td>(.*?)</td></tr>`).FindAllStringSubmatch(intent, -1) {
		shown := htmlUnescape(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[4], ""))
		got = append(got, strings.Join(m[1:4], " ")+" "+strings.ReplaceAll(shown, e.down.URL, "DOWN"))
	}
	want := []string{"done 4 - ", "redriven 3 - by bob (hookctl)",
		`parked 3 422 permanent: POST DOWN/… 422 Unprocessable Entity: "order unknown to the warehouse\n"`,
		`retry 2 503 POST DOWN/… 503 Service Unavailable: "warehouse busy\n"`, `retry 1 503 POST DOWN/… 503 Service Unavailable: "warehouse busy\n"`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history shown:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range neverRendered {
		mustNotContain(t, page, s)
	}
	mustNotContain(t, page, "not every attempt", "SECRET-URL-QUERY")
	mustContain(t, page, "last 10 attempts")
}
