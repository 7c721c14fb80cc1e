package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/sources"
)

// Search finds an event by its id, with or without its source, and a source alone lists its
// recent events.
func TestSearchFindsAnEventByItsIDWithOrWithoutTheSource(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_1", false)
	b := e.serve(nil)
	for _, q := range []string{"source=shop&id=evt_1", "id=evt_1", "id=+evt_1+"} {
		r := b.get("/events?" + q)
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/events/shop/evt_1" {
			t.Fatalf("%s: %d %q, want a redirect to the event", q, r.Status, r.Header.Get("Location"))
		}
	}
	recent := b.get("/events?source=shop")
	mustContain(t, recent, `href="/events/shop/evt_1"`)
	if r := b.get("/events?id=evt_none"); r.Status != http.StatusNotFound {
		t.Fatalf("an unknown id: %d, want 404", r.Status)
	}
}

// The search page says "Paste the provider's event id, as its dashboard shows it". GitHub's
// dashboard shows a delivery's GUID (X-GitHub-Delivery), but a github source's claim is
// <hook-id>:<GUID> (docs/hookctl.md, GitHub ids), which hookctl inspect finds from the GUID
// alone or with -scope. The console looks the GUID up as it is, finds nothing, and says the
// event "was never accepted, or its claim expired": an operator told that an accepted,
// claimed delivery was lost. The page must find it, or say that the source's ids are scoped
// and how to give the scope.
func TestAGitHubDeliverysGUIDIsNotSaidToHaveNeverBeenAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const guid = "8f2f5c4e-9a4e-11ef-8c6d-1b2c3d4e5f60"
	e.commit("gh", "12345678:"+guid, false)
	b := e.serve(nil)
	for _, q := range []string{"/events?id=" + guid, "/events?source=gh&id=" + guid} {
		r := b.get(q)
		if r.Status == http.StatusSeeOther {
			r = b.get(r.Header.Get("Location"))
		}
		if r.Status == http.StatusOK && strings.Contains(r.Body, "12345678:"+guid) {
			continue // found
		}
		if strings.Contains(r.Body, "never accepted") {
			t.Errorf("%s (%d) says the delivery was never accepted", q, r.Status)
		}
		if !strings.Contains(r.Body, "X-GitHub-Hook-ID") {
			t.Errorf("%s (%d) neither finds the claim nor says its ids are scoped by X-GitHub-Hook-ID:\n%s", q, r.Status, r.Body)
		}
	}
}

// An address whose path is not valid percent-encoding gets 400 ("Unreadable address"); one
// whose query is not is read as if the unreadable parameter were absent: a search for an id
// lists the source's recent events instead, and the Parked page filtered by an unreadable
// source lists every source's parked intents, with "Re-drive all shown" for them, as if no
// filter had been asked for.
func TestAnUnreadableQueryGetsAClearPageNotAnotherOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commit("shop", "evt_1", false)
	b := e.serve(nil)
	for _, p := range []string{"/events?source=shop&id=evt%ZZ1", "/events?id=%ZZ", "/parked?source=sh%ZZop", "/parked?source=shop&error=%G0"} {
		if r := b.get(p); r.Status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", p, r.Status)
		}
	}
}

// The scope the hint asks for finds the delivery with one key lookup.
func TestAScopedSearchFindsAGitHubDeliveryByItsGUID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const guid = "5e2f5c4e-9a4e-11ef-8c6d-1b2c3d4e5f61"
	e.commit("gh", "87654321:"+guid, false)
	b := e.serve(nil)
	r := b.get("/events?source=gh&scope=87654321&id=" + guid)
	if r.Status == http.StatusSeeOther {
		r = b.get(r.Header.Get("Location"))
	}
	if r.Status != http.StatusOK || !strings.Contains(r.Body, "87654321:"+guid) {
		t.Fatalf("a search with the scope: %d, want the event page of 87654321:%s:\n%s", r.Status, guid, r.Body)
	}
}

// Support has the order id, not the provider's event id: an effect's key finds the event that
// wrote it, from the claim every put effect records on its item (claimed_by), in oncehook's
// table and in the application's own tables the sources file names. A key two events wrote
// lists both; a key nothing holds is answered with what the search takes, never "never
// arrived".
func TestAnEffectsKeyFindsTheEventThatWroteIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	orders := awstest.CreateTable(t, e.client, "orders-", &dynamodb.CreateTableInput{BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("order_id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("step"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("order_id"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("step"), KeyType: types.KeyTypeRange}}})
	f, err := sources.Parse([]byte(strings.Replace(testSources, `"targets"`, `"tables": {"orders": {"name": "`+orders+`", "partition_key": "order_id", "sort_key": "step", "actions": ["put"]}},
  "targets"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.file = f
	if e.store, err = dedup.New(e.client, dedup.Config{Table: e.table, Sources: f.Retentions(), Tables: f.DedupTables()}); err != nil {
		t.Fatal(err)
	}
	e.commit("shop", "evt_paid", false) // writes ORDER#evt_paid / PAID in oncehook's table
	shipped := func(id, order string) {
		t.Helper()
		if _, err := e.store.Commit(ctx, dedup.Event{Source: "gh", ID: id, Type: "order.shipped", Payload: []byte(`{}`)}, dedup.Plan{Effects: []dedup.Effect{
			dedup.PutEffect(map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "ORDER#" + order}, "sk": &types.AttributeValueMemberS{Value: "SHIPPED#" + id}}),
			dedup.PutEffect(map[string]types.AttributeValue{"order_id": &types.AttributeValueMemberS{Value: order}, "step": &types.AttributeValueMemberS{Value: id}}).In("orders"),
		}}); err != nil {
			t.Fatal(err)
		}
	}
	shipped("evt_shipped", "evt_paid")
	shipped("evt_only_app", "ord_10484")
	b := e.serve(nil)

	r := b.get("/events?key=" + url.QueryEscape("ORDER#evt_paid"))
	mustContain(t, r, `href="/events/shop/evt_paid"`, `href="/events/gh/evt_shipped"`)
	if r := b.get("/events?key=ord_10484"); r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/events/gh/evt_only_app" {
		t.Fatalf("a key only the application's table holds: %d %q, want a redirect to its event\n%s", r.Status, r.Header.Get("Location"), r.Body)
	}
	none := b.get("/events?key=" + url.QueryEscape("ORDER#ord_nothing"))
	if none.Status != http.StatusNotFound {
		t.Fatalf("a key nothing wrote: %d, want 404", none.Status)
	}
	mustContain(t, none, "effect&#39;s key", "no effect record holds it now")
	mustNotContain(t, none, "never accepted", "never arrived")
	mustContain(t, b.get("/events"), `name="key"`)
	// An id that is no event's (an order number pasted as one) is not said never to have arrived.
	mustNotContain(t, b.get("/events?id=ord_10484"), "never accepted")
}
