package console_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/ops/console"
	"github.com/oncehook/oncehook/sources"
)

func TestTheBacklogCountsDueIntentsAndTheOldestPerTarget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 3 {
		e.commit("shop", fmt.Sprintf("evt_due_%d", i), false) // the stream never ran: all due
	}
	b := e.serve(nil)
	page := b.get("/backlog")
	for _, target := range []string{"email", "crm"} {
		row := regexp.MustCompile(`data-target="` + target + `"><td>` + target + `</td><td class="num">(\d+)</td>`).FindStringSubmatch(page.Body)
		if row == nil || row[1] != "3" {
			t.Fatalf("%s: %v, want 3 due\n%s", target, row, page.Body)
		}
	}
	mustContain(t, page, "evt_due_0")
	e.drain()
	mustContain(t, b.get("/backlog"), `data-target="email"><td>email</td><td class="num">0</td>`)
}

func TestTheOverviewChartsTheIndexWithoutMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_a", false)
	e.commit("shop", "evt_b", false)
	e.commit("gh", "evt_c", false)
	e.down.setRefuse(key("shop", "evt_a", "crm.update"), true)
	e.drain()
	e.commit("shop", "evt_d", false) // due, not run
	page := e.serve(nil).get("/")
	if page.Status != http.StatusOK || strings.Count(page.Body, "<svg") != 2 {
		t.Fatalf("%d, want two charts:\n%s", page.Status, page.Body)
	}
	// crm: evt_d due, evt_a parked; email: evt_d due.
	mustContain(t, page, `data-label="crm"`, `>1 / 0 / 0 / 1</text>`, `data-label="email"`, `>1 / 0 / 0 / 0</text>`)
	// Per source: shop has evt_a (parked) and evt_d (due) in the index, gh nothing.
	mustContain(t, page, `data-label="shop"`, `>2 / 0 / 0</text>`, `data-label="gh"`, `>0 / 0 / 0</text>`)
}

// fixedMetrics answers Sums from a map of "Name/Value" to a total.
type fixedMetrics map[string]float64

func (m fixedMetrics) Sums(_ context.Context, start, end time.Time, qs []console.MetricQuery) ([]float64, error) {
	out := make([]float64, len(qs))
	scale := 1.0
	if end.Sub(start) > time.Hour {
		scale = 10 // the day has ten times the hour
	}
	for i, q := range qs {
		out[i] = m[q.Name+"/"+q.Value] * scale
	}
	return out, nil
}

func TestTheOverviewChartsTheStacksMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := fixedMetrics{"Accepted/shop": 40, "Duplicate/shop": 7, "ReplayRefused/shop": 1, "Failed/shop": 2, "Unavailable/shop": 3, "IntentsDone/email": 39, "IntentsParked/email": 1}
	page := e.serve(func(c *console.Config) { c.Metrics = m }).get("/")
	mustContain(t, page, "Deliveries per source, last hour", `>40 / 7 / 1 / 5</text>`, `>400 / 70 / 10 / 50</text>`, "Intents per target, last day", `>390 / 0 / 10</text>`)
}

func TestTheAuditPageShowsTheLastRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.serve(nil)
	mustContain(t, b.get("/audit"), "no audit has run")
	ctx := context.Background()
	if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "ORDER#rogue"}, "sk": &types.AttributeValueMemberS{Value: "PAID"}}}); err != nil {
		t.Fatal(err)
	}
	e.commit("shop", "evt_1", false)
	a := &dedup.Auditor{Client: e.client, Table: e.table, Prefixes: []string{"ORDER#"}}
	if _, err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	page := b.get("/audit")
	mustContain(t, page, `class="leak"`, `<td class="num">2</td><td class="num">1</td>`, "ORDER#rogue / PAID")
}

func TestATableThatIsNotOncehooksGetsAClearPage(t *testing.T) {
	t.Parallel()
	client := awstest.Client(t)
	ctx := context.Background()
	other := awstest.CreateTable(t, client, "not-oncehook-", &dynamodb.CreateTableInput{BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}}})
	for table, want := range map[string]int{other: http.StatusInternalServerError, "no-such-table-" + other: http.StatusBadGateway} {
		h, err := console.New(console.Config{DynamoDB: client, Table: table, Token: testToken})
		if err != nil {
			t.Fatal(err)
		}
		b := signedIn(t, h)
		r := b.get("/events/shop/evt_1")
		if r.Status != want || !strings.Contains(r.Body, table) {
			t.Errorf("%s: %d, want %d naming the table:\n%s", table, r.Status, want, r.Body)
		}
		if err := console.CheckTable(ctx, client, table); err == nil {
			t.Errorf("CheckTable(%s) passed", table)
		}
	}
}

// Event ids are any printable UTF-8: generated ones, with the characters that matter in a URL
// and in HTML, are committed, found by search, and shown on their page, escaped.
func TestAnyEventIDIsFoundAndShownEscaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(26, 1))
	alphabet := []rune("ab/%?#&=+ .-_~<>\"'\\é日🙂;:@!$*()[]{}|^`")
	ids := []string{"..", ".", "a/../b", "/lead", "trail/", "%2F", "a//b", "<script>x</script>", "a b"}
	for range 40 {
		var sb strings.Builder
		for range 1 + rng.IntN(24) {
			sb.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		ids = append(ids, sb.String())
	}
	for _, id := range ids {
		e.commit("shop", id, false)
	}
	b := e.serve(nil)
	for _, id := range ids {
		r := b.get("/events?source=shop&id=" + url.QueryEscape(id))
		if r.Status != http.StatusSeeOther {
			t.Fatalf("search %q: %d\n%s", id, r.Status, r.Body)
		}
		page := b.get(r.Header.Get("Location"))
		if page.Status != http.StatusOK {
			t.Fatalf("%q at %s: %d\n%s", id, r.Header.Get("Location"), page.Status, page.Body)
		}
		shown := regexp.MustCompile(`id="event-id">([^<]*)<`).FindStringSubmatch(page.Body)
		if shown == nil || htmlUnescape(shown[1]) != id || !utf8.ValidString(shown[1]) {
			t.Fatalf("%q at %s shown as %v\n%s", id, r.Header.Get("Location"), shown, page.Body[:min(len(page.Body), 3000)])
		}
		mustNotContain(t, page, "<script>x")
	}
}

// No page shows a secret reference, a target's URL or a header, whatever it lists.
func TestNoPageRendersASecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_1", false)
	e.down.setRefuse(key("shop", "evt_1", "email.send"), true)
	e.drain()
	b := e.serve(func(c *console.Config) { c.ShowPayloads = true })
	for _, p := range []string{"/", "/events", "/events?source=shop", "/events/shop/evt_1", "/parked", "/backlog", "/audit", "/events/nosuch/x"} {
		r := b.get(p)
		for _, s := range neverRendered {
			if strings.Contains(r.Body, s) {
				t.Errorf("%s shows %q", p, s)
			}
		}
	}
}

// TestABoundTableTheConsoleCannotNameIsNotShownAsOncehooks: a sources file's audited table that
// is "bound" has no name until a deployment binds it (the functions' ONCEHOOK_BINDINGS); the
// console, which is not given the bindings, must not read it as oncehook's own table's audit.
func TestABoundTableTheConsoleCannotNameIsNotShownAsOncehooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f, err := sources.Parse([]byte(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"30d"}},
	  "tables":{"customers":{"bound":true,"partition_key":"email","actions":["update"],"audit":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	page := e.serve(func(c *console.Config) { c.Sources = f }).get("/audit")
	if n := strings.Count(page.Body, "oncehook's</td>"); n != 1 {
		t.Fatalf("oncehook's own table is listed %d times:\n%s", n, page.Body)
	}
}

// CheckTable reads a table as oncehook's only when it is keyed as dedup.CreateTableInput keys
// it, the pending index included. A table keyed by numbers under those names (another
// application's, or a copy made by hand), or whose pending index lacks its pending_since sort
// key, would otherwise pass, so hookctl console starts on it, and its pages then answer 502
// "DynamoDB did not answer" (DynamoDB refuses the key's type, or a time window's BETWEEN on a
// sort key the index does not have): not the clear "not oncehook's" page a table that is not
// oncehook's gets.
func TestATableNotKeyedAsOncehooksIsNotTakenForOncehooks(t *testing.T) {
	t.Parallel()
	client := awstest.Client(t)
	ctx := context.Background()
	typed := func(attr string, typ types.ScalarAttributeType) func(*dynamodb.CreateTableInput) {
		return func(in *dynamodb.CreateTableInput) {
			for i, d := range in.AttributeDefinitions {
				if aws.ToString(d.AttributeName) == attr {
					in.AttributeDefinitions[i].AttributeType = typ
				}
			}
		}
	}
	for _, c := range []struct {
		name  string
		table func(*dynamodb.CreateTableInput) // changes dedup.CreateTableInput's table
		names string                           // what the refusal names
	}{
		{"its keys are numbers", func(in *dynamodb.CreateTableInput) {
			typed(dedup.PartitionKey, types.ScalarAttributeTypeN)(in)
			typed(dedup.SortKey, types.ScalarAttributeTypeN)(in)
		}, dedup.PartitionKey},
		{"its pending index has no sort key", func(in *dynamodb.CreateTableInput) {
			in.AttributeDefinitions = slices.DeleteFunc(in.AttributeDefinitions, func(d types.AttributeDefinition) bool {
				return aws.ToString(d.AttributeName) == dedup.IndexSortKey
			})
			in.GlobalSecondaryIndexes[0].KeySchema = in.GlobalSecondaryIndexes[0].KeySchema[:1]
		}, dedup.IndexSortKey},
		{"its pending index's sort key is a string", typed(dedup.IndexSortKey, types.ScalarAttributeTypeS), dedup.IndexSortKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := dedup.CreateTableInput("")
			c.table(in)
			name := awstest.CreateTable(t, client, "not-keyed-", in)
			if err := console.CheckTable(ctx, client, name); !errors.Is(err, console.ErrNotOncehookTable) || !strings.Contains(err.Error(), c.names) {
				t.Errorf("CheckTable(%s) = %v, want it refused as not oncehook's, naming %s", name, err, c.names)
			}
			h, err := console.New(console.Config{DynamoDB: client, Table: name, Token: testToken})
			if err != nil {
				t.Fatal(err)
			}
			b := signedIn(t, h)
			for _, p := range []string{"/events/shop/evt_1", "/parked", "/events?source=shop&since=2h"} {
				r := b.get(p)
				if r.Status != http.StatusInternalServerError || !strings.Contains(r.Body, "not an oncehook table") {
					t.Errorf("%s: %d, want 500 saying the table is not an oncehook table:\n%s", p, r.Status, r.Body)
				}
			}
		})
	}
}

// "What failed most today": the overview counts failed attempts (retried or parked) per target
// and per source over the last hour and the last day, those of intents that later succeeded
// included, from the histories of the claims in the pending index (due and parked), as lower
// bounds ("≥ N"): an event whose intents all succeeded in the end left the index. With metrics
// the targets' counts are the metrics', exact.
func TestTheOverviewCountsWhatFailedMostToday(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	real := time.Now()
	now := real.Add(-30 * time.Hour)
	turn := e.at(&now)
	fail := func(source, id, intent string, unavailable int, refuse bool) {
		e.down.setUnavailable(key(source, id, intent), unavailable)
		e.down.setRefuse(key(source, id, intent), refuse)
	}
	// Before the day: email retried then done, crm parked; in the parked index since then.
	e.commit("shop", "evt_old", false)
	fail("shop", "evt_old", "email.send", 1, false)
	fail("shop", "evt_old", "crm.update", 0, true)
	turn("shop", "evt_old")
	turn("shop", "evt_old")
	// In the day, before the hour: email retried once then done, crm retried twice and due.
	now = real.Add(-3 * time.Hour)
	e.commit("gh", "evt_day", false)
	fail("gh", "evt_day", "email.send", 1, false)
	fail("gh", "evt_day", "crm.update", 5, false)
	turn("gh", "evt_day")
	turn("gh", "evt_day")
	// In the hour: email retried twice then done, crm parked.
	now = real.Add(-20 * time.Minute)
	e.commit("shop", "evt_hour", false)
	fail("shop", "evt_hour", "email.send", 2, false)
	fail("shop", "evt_hour", "crm.update", 0, true)
	for range 3 {
		turn("shop", "evt_hour")
	}
	// In the hour, retried once and then done with its other intent: its claim left the index.
	e.commit("gh", "evt_settled", false)
	fail("gh", "evt_settled", "email.send", 1, false)
	turn("gh", "evt_settled")
	turn("gh", "evt_settled")
	if cl := e.claim("gh", "evt_settled"); cl.PendingShard != "" || len(cl.Intents["email.send"].History) != 2 {
		t.Fatalf("evt_settled: shard %q, history %+v: want it out of the index after a retry", cl.PendingShard, cl.Intents["email.send"].History)
	}

	rows := func(page response, of string) []string {
		body := regexp.MustCompile(`(?s)<tbody id="failed-` + of + `">.*?</tbody>`).FindString(page.Body)
		var out []string
		for _, m := range regexp.MustCompile(`<tr data-failed="(\w+)"><td>\w+</td><td class="num">([^<]+)</td><td class="num">([^<]+)</td></tr>`).FindAllStringSubmatch(body, -1) {
			out = append(out, strings.Join(m[1:], " "))
		}
		return out
	}
	check := func(page response, of string, want ...string) {
		t.Helper()
		if got := rows(page, of); strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("failed %s: %q, want %q\n%s", of, got, want, page.Body)
		}
	}
	page := e.serve(nil).get("/")
	// email: evt_hour's 2 in the hour, evt_day's 1 in the day (evt_settled's is gone with its
	// claim from the index, evt_old's before the day); crm: evt_hour's park, evt_day's 2.
	check(page, "targets", "email ≥ 2 ≥ 3", "crm ≥ 1 ≥ 3")
	check(page, "sources", "shop ≥ 3 ≥ 3", "gh ≥ 0 ≥ 3")
	mustContain(t, page, "the 3 claims", "run with -metrics for exact figures")

	m := fixedMetrics{"IntentsRetried/email": 4, "IntentsRetried/crm": 2, "IntentsParked/crm": 3}
	page = e.serve(func(c *console.Config) { c.Metrics = m }).get("/")
	check(page, "targets", "crm 5 50", "email 4 40")
	check(page, "sources", "shop ≥ 3 ≥ 3", "gh ≥ 0 ≥ 3")
	mustContain(t, page, "exact, from the stack's metrics")
}
