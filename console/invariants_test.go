package console_test

// The console's invariants, each tested over the space around it rather than one case:
//   - nothing is re-driven that the operator was not shown, whichever form is sent again,
//     whenever (invariant 1);
//   - a visitor without access learns nothing of the deployment, on any route, by any method
//     (invariant 2);
//   - no page reads more than its bounds, whatever the index holds (invariant 3).
// The tests beside each subject hold single cases; these hold the spaces around them.

import (
	"context"
	"errors"
	"fmt"
	"html"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/console"
	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// form is a POST form as a page serves it: its fields as a browser sends them with every box
// ticked.
type form struct {
	name   string
	fields url.Values
}

var formRe = regexp.MustCompile(`(?s)<form method="post" action="/redrive"[^>]*>(.*?)</form>`)
var inputRe = regexp.MustCompile(`<input type="(?:hidden|checkbox)" name="([a-z]+)" value="([^"]*)"`)

func forms(name string, page response) []form {
	var out []form
	for i, m := range formRe.FindAllStringSubmatch(page.Body, -1) {
		f := form{name: fmt.Sprintf("%s, form %d", name, i+1), fields: url.Values{}}
		for _, in := range inputRe.FindAllStringSubmatch(m[1], -1) {
			f.fields.Add(in[1], htmlUnescape(in[2]))
		}
		out = append(out, f)
	}
	return out
}

// Invariant 1: every redrive form the console serves (the Parked page's selection and "all
// shown", the event page's button, the confirmation), captured while the intent was parked
// and sent again later, as served and with confirm=yes added, re-drives nothing once the
// intent has moved on: re-driven and pending, run and parked again, its event claimed again
// (another incarnation, parked at the same attempt count as the one shown).
func TestNoReplayOfARedriveFormRedrivesWhatTheOperatorWasNotShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Claims kept an hour, committed three hours ago: expired, so the event can be claimed
	// again now.
	offset := -3 * time.Hour
	store, err := dedup.New(e.client, dedup.Config{Table: e.table, Now: func() time.Time { return time.Now().Add(offset) },
		Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour, Keep: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	e.commit("shop", "evt_replay", false)
	e.down.setRefuse(key("shop", "evt_replay", "email.send"), true)
	e.drain()
	b := e.serve(nil)

	list := b.get("/parked")
	captured := forms("parked page", list)
	captured = append(captured, forms("event page", b.get("/events/shop/evt_replay"))...)
	var selection url.Values
	for _, f := range captured {
		if len(f.fields["ref"]) == 1 && f.fields.Get("confirm") == "" {
			selection = f.fields
		}
	}
	confirm := b.post("/redrive", selection)
	captured = append(captured, forms("confirmation", confirm)...)
	if len(captured) != 4 {
		t.Fatalf("setup: %d forms captured, want the parked page's 2, the event page's and the confirmation's", len(captured))
	}
	// The operator's own confirmation, once.
	var confirmation url.Values
	for _, f := range captured {
		if f.fields.Get("confirm") == "yes" {
			confirmation = f.fields
		}
	}
	mustContain(t, b.post("/redrive", confirmation), "re-driven by ada (test)")

	replayAll := func(when string) {
		t.Helper()
		before := e.claim("shop", "evt_replay")
		for _, f := range captured {
			for _, confirmed := range []bool{false, true} {
				v := url.Values{}
				for k, vs := range f.fields {
					v[k] = slices.Clone(vs)
				}
				if confirmed {
					v.Set("confirm", "yes")
				}
				r := b.post("/redrive", v)
				if r.Status != http.StatusOK {
					t.Fatalf("%s: %s sent again (confirm %v): %d\n%s", when, f.name, confirmed, r.Status, r.Body)
				}
				if strings.Contains(r.Body, `<tr class="ok">`) {
					t.Fatalf("%s: %s sent again (confirm %v) says it re-drove:\n%s", when, f.name, confirmed, results(r))
				}
				if after := e.claim("shop", "evt_replay"); !reflect.DeepEqual(after.Intents, before.Intents) || after.CommitToken != before.CommitToken {
					t.Fatalf("%s: %s sent again (confirm %v) changed the intent:\nbefore %+v\nafter  %+v", when, f.name, confirmed,
						before.Intents["email.send"], after.Intents["email.send"])
				}
			}
		}
	}
	replayAll("re-driven, not yet run")
	e.drain()
	if in := e.claim("shop", "evt_replay").Intents["email.send"]; in.Status != dedup.IntentParked || in.Attempts != 2 {
		t.Fatalf("setup: %+v, want parked again at attempt 2", in)
	}
	replayAll("parked again")

	// The claim expired; the event is claimed again and parks at attempt 1, as first shown.
	offset = 0
	first := e.claim("shop", "evt_replay").CommitToken
	e.commit("shop", "evt_replay", false)
	e.drain()
	again := e.claim("shop", "evt_replay")
	if in := again.Intents["email.send"]; in.Status != dedup.IntentParked || in.Attempts != 1 || again.CommitToken == first {
		t.Fatalf("setup: %+v (incarnation %s), want the new incarnation parked at attempt 1", in, again.CommitToken)
	}
	replayAll("claimed again, parked at the attempt count first shown")
}

// Invariant 2: on every route, by every method, a visitor without access (no token, a wrong
// one, a foreign Host, a remote peer) gets a page with nothing of the deployment on it.
func TestNoRouteTellsAVisitorWithoutAccessAboutTheDeployment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_private", false)
	const table = "Oncehook-OncehookTable-SECRET-STACK"
	mk := func(token string) http.Handler {
		h, err := console.New(console.Config{DynamoDB: e.client, Table: table, Token: token, ReadOnly: true, ShowPayloads: true, Sources: e.file})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	withToken, without := mk("4f1c9a7e2b8d6035e1a9c4f7b2d8e063"), mk("")
	routes := []string{"/", "/events", "/events?source=shop", "/events?id=evt_private", "/events/shop/evt_private", "/events/shop",
		"/parked", "/parked?source=shop", "/redrive", "/backlog", "/audit", "/login", "/nowhere", "/events/nosuch/x"}
	secret := []string{"SECRET-STACK", "read-only", "payloads shown", "shop", "evt_private", "/parked", "/backlog", "gh"}
	visitors := []struct {
		name       string
		h          http.Handler
		host, peer string
		bearer     string
	}{
		{"no token", withToken, "", "", ""},
		{"a wrong bearer", withToken, "", "", "4f1c9a7e2b8d6035e1a9c4f7b2d8e064"},
		{"a foreign host", without, "rebound.attacker.example:8030", "", ""},
		{"a remote peer", without, "localhost:8030", "203.0.113.7:40000", ""},
	}
	for _, v := range visitors {
		for _, route := range routes {
			for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete} {
				req := httptest.NewRequest(method, route, strings.NewReader("ref=s%3Dshop%26e%3Devt_private%26i%3Demail.send&confirm=yes&token=nope"))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if v.host != "" {
					req.Host = v.host
				}
				if v.peer != "" {
					req.RemoteAddr = v.peer
				}
				if v.bearer != "" {
					req.Header.Set("Authorization", "Bearer "+v.bearer)
				}
				rec := httptest.NewRecorder()
				v.h.ServeHTTP(rec, req)
				if rec.Code < 400 && !(route == "/login" && rec.Code == http.StatusOK) {
					t.Errorf("%s: %s %s: %d, want a refusal", v.name, method, route, rec.Code)
				}
				body := rec.Body.String()
				for _, s := range secret {
					if strings.Contains(body, s) {
						t.Errorf("%s: %s %s (%d) shows %q", v.name, method, route, rec.Code, s)
					}
				}
				if c := rec.Header().Values("Set-Cookie"); len(c) != 0 {
					t.Errorf("%s: %s %s sets %v", v.name, method, route, c)
				}
			}
		}
	}
	if in := e.claim("shop", "evt_private").Intents["email.send"]; in.Status != dedup.IntentPending || in.RedrivenBy != "" {
		t.Fatalf("a visitor without access changed an intent: %+v", in)
	}
}

// Invariant 3, the recent events: over random spreads of claims across the shards and sources
// and random bounds, the page reads at most MaxIndexReads entries, lists only the source's
// claims, newest first, and every claim of the source newer than what it says it is complete
// from (all of them, or the 50 newest, when it does not say it stopped).
func TestTheRecentEventsAreTheNewestWhateverTheShardsAndTheBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(26, 3))
	base := time.Now().Add(-48 * time.Hour)
	var at time.Time
	store, err := dedup.New(e.client, dedup.Config{Table: e.table, Now: func() time.Time { return at },
		Sources: map[string]dedup.Retention{"s0": {RetryHorizon: time.Hour}, "s1": {RetryHorizon: time.Hour}, "s2": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	var since map[string]time.Time // pk: when it entered the index, as the index says
	n := 0
	for trial := range 10 {
		// More claims, spread over the last two days, unevenly across the sources.
		for range rng.IntN(120) {
			src := fmt.Sprintf("s%d", min(rng.IntN(4), 2))
			at = base.Add(time.Duration(rng.Int64N(int64(48 * time.Hour))))
			id := fmt.Sprintf("evt_r_%05d", n)
			n++
			e.commit(src, id, false)
		}
		since = map[string]time.Time{}
		for _, item := range scanIndex(t, e.client, e.table) {
			ms, _ := strconv.ParseInt(item[dedup.AttrPendingSince].(*types.AttributeValueMemberN).Value, 10, 64)
			since[item[dedup.AttrPK].(*types.AttributeValueMemberS).Value] = time.UnixMilli(ms)
		}
		maxReads := 5 + rng.IntN(300)
		counter := &scanCounter{Client: e.client}
		h, err := console.New(console.Config{DynamoDB: counter, Table: e.table, MaxIndexReads: maxReads})
		if err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t, serveHandler(t, h))
		b.get("/audit") // the table check
		src := fmt.Sprintf("s%d", rng.IntN(3))
		counter.mu.Lock()
		counter.scanned = 0
		counter.mu.Unlock()
		page := b.get("/events?source=" + src)
		counter.mu.Lock()
		scanned := counter.scanned
		counter.mu.Unlock()
		where := fmt.Sprintf("trial %d (%d claims, MaxIndexReads %d, %s)", trial, len(since), maxReads, src)
		if page.Status != http.StatusOK {
			t.Fatalf("%s: %d", where, page.Status)
		}
		if scanned > maxReads {
			t.Fatalf("%s: read %d index entries", where, scanned)
		}
		var listed []string
		for _, m := range regexp.MustCompile(`href="/events/(s\d)/([^"]+)"`).FindAllStringSubmatch(page.Body, -1) {
			if m[1] != src {
				t.Fatalf("%s: lists %s/%s", where, m[1], m[2])
			}
			listed = append(listed, dedup.ClaimKey(src, m[2]))
		}
		for i := 1; i < len(listed); i++ {
			if since[listed[i]].After(since[listed[i-1]]) {
				t.Fatalf("%s: %s listed after the older %s", where, listed[i], listed[i-1])
			}
		}
		from := time.Time{} // complete for the claims newer than this
		if m := regexp.MustCompile(`id="partial" data-cutoff="(\d*)"`).FindStringSubmatch(page.Body); m != nil {
			if m[1] == "" {
				continue // a shard not read at all: the page claims nothing
			}
			ms, _ := strconv.ParseInt(m[1], 10, 64)
			from = time.UnixMilli(ms)
		}
		if len(listed) == 50 {
			if oldest := since[listed[49]]; oldest.After(from) {
				from = oldest
			}
		}
		for pk, t0 := range since {
			if strings.HasPrefix(pk, dedup.ClaimKey(src, "")) && t0.After(from) && !slices.Contains(listed, pk) {
				t.Fatalf("%s: %s (entered %s) is newer than %s and not listed", where, pk, t0, from)
			}
		}
	}
}

// Invariant 3, the forms: a redrive form, a login form, are read up to a bound, and a larger
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

// scanIndex is every entry of the pending index, read whole (the tests' ground truth).
func scanIndex(t *testing.T, client *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var out []map[string]types.AttributeValue
	due, parked := dedup.ShardNames(dedup.PendingShards)
	for _, shard := range append(due, parked...) {
		p := dynamodb.NewQueryPaginator(client, &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String(dedup.PendingIndex),
			KeyConditionExpression:    aws.String(dedup.AttrPendingShard + " = :s"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: shard}}})
		for p.HasMorePages() {
			page, err := p.NextPage(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page.Items...)
		}
	}
	return out
}

// The redaction hides a target's secrets and nothing a person needs: an error that quotes
// none of them is shown as it was, whatever words it shares with the target's URL's plain
// parts ("hooks", "services", "json").
func TestTheRedactionKeepsAnErrorWithoutSecretsAsItIs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f, err := sources.Parse([]byte(strings.Replace(strings.Replace(testSources, "http://127.0.0.1:1/SECRET-URL-PATH",
		"https://hooks.example.test/services/T0Qz7SECRa?format=json", 1), `"X-Api-Key": "SECRET-HEADER-VALUE"`, `"Accept": "application/json", "X-Env": "prod"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	plain := "http 422: product unknown to the services team (hooks disabled; send json)"
	e.commit("shop", "evt_plain", false)
	exec := outbox.ExecutorFunc(func(context.Context, outbox.Task) error { return outbox.Permanent(errors.New(plain)) })
	if e.worker, err = outbox.New(e.client, outbox.Config{Table: e.table, Executors: map[string]outbox.Executor{"email": exec, "crm": exec},
		Backoff: func(int) time.Duration { return time.Hour }}); err != nil {
		t.Fatal(err)
	}
	e.drain()
	mustContain(t, e.serve(nil).get("/events/shop/evt_plain"), html.EscapeString(plain))
}
