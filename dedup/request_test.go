package dedup

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// nopAPI satisfies API for tests that never reach DynamoDB (building requests, validation).
type nopAPI struct{}

func (nopAPI) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	panic("unexpected call")
}
func (nopAPI) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	panic("unexpected call")
}
func (nopAPI) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	panic("unexpected call")
}
func (nopAPI) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	panic("unexpected call")
}

func testStore(t testing.TB) *Store {
	st, err := New(nopAPI{}, Config{Table: "t", Sources: map[string]Retention{"shop": {RetryHorizon: 3 * day, RedriveWindow: 30 * day}}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func sampleEvent(payload []byte) *Event {
	return &Event{
		Source:     "shop",
		ID:         "evt_8f2c1a",
		Type:       "order.paid",
		DeliveryID: "dlv_5c09e2",
		OccurredAt: time.Date(2026, 8, 25, 9, 14, 3, 0, time.UTC),
		Payload:    payload,
	}
}

func samplePlan() *Plan {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	return &Plan{
		Effects: []Effect{
			PutEffect(map[string]types.AttributeValue{"pk": s("ORDER#ord_4211"), "sk": s("SHIPMENT"), "order_id": s("ord_4211"), "carrier": s("ups")}).
				If(expression.AttributeNotExists(expression.Name("pk"))),
			PutEffect(map[string]types.AttributeValue{"pk": s("ORDER#ord_4211"), "sk": s("STATUS"), "status": s("paid")}),
			UpdateEffect(map[string]types.AttributeValue{"pk": s("CUSTOMER#cus_9"), "sk": s("STATS")},
				expression.Add(expression.Name("orders"), expression.Value(1))),
		},
		Intents: []Intent{
			{Name: "email.send", Target: "email", Payload: []byte(`{"template":"order-paid","to":"cus_9"}`)},
			{Name: "fulfilment.create", Target: "http:fulfilment", Payload: []byte(`{"order_id":"ord_4211"}`)},
		},
	}
}

// TestClaimRoundTrip keeps the hand-built claim item and the Claim struct in step.
func TestClaimRoundTrip(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	now := time.Date(2026, 8, 25, 9, 14, 4, 123456789, time.UTC)
	ev := sampleEvent([]byte(`{"id":"evt_8f2c1a"}`))
	req, err := st.buildRequest(ev, samplePlan(), 47*day, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := UnmarshalClaim(req.claim)
	if err != nil {
		t.Fatal(err)
	}
	want := &Claim{
		PK: "EVT#shop#evt_8f2c1a", SK: ClaimSK, Source: "shop", EventID: "evt_8f2c1a", EventType: "order.paid",
		DeliveryID: "dlv_5c09e2", ReceivedAt: now, OccurredAt: ev.OccurredAt,
		// sha256sum of the body, computed outside the code under test.
		PayloadSHA256: "620020a2907e24bb9a7b4a4b5751be342456a51df777cb7f4e5139cec2f892cb", PayloadBytes: 19,
		ExpiresAt: now.Add(47 * day).Unix(), CommitToken: req.token, Outcome: "accepted",
		Effects: []EffectKey{{PK: "ORDER#ord_4211", SK: "SHIPMENT"}, {PK: "ORDER#ord_4211", SK: "STATUS"}, {PK: "CUSTOMER#cus_9", SK: "STATS"}},
		Intents: map[string]ClaimIntent{
			"email.send":        {Target: "email", Payload: []byte(`{"template":"order-paid","to":"cus_9"}`), Status: IntentPending},
			"fulfilment.create": {Target: "http:fulfilment", Payload: []byte(`{"order_id":"ord_4211"}`), Status: IntentPending},
		},
		// FNV-1a 32 of "EVT#shop#evt_8f2c1a" is 2564234657 (computed in Python), and 2564234657 % 16 = 1.
		PendingShard: "P1", PendingSince: now.UnixMilli(), Wake: now.UnixMilli(),
	}
	if len(req.token) != 32 || strings.Trim(req.token, "0123456789abcdef") != "" {
		t.Fatalf("commit token %q, want 32 hex digits", req.token)
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", c, want)
	}
	if len(req.effects) != 3 || req.effects[0].Put == nil || req.effects[2].Update == nil {
		t.Fatalf("effects %+v: want two puts and an update, in plan order", req.effects)
	}
	if got := req.effects[0].Put.Item[ClaimedByAttribute]; got.(*types.AttributeValueMemberS).Value != c.PK {
		t.Fatal("put effects must carry claimed_by")
	}
}

func TestCommitTokensAreStablePerCallAndDistinctAcrossCalls(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	ev := sampleEvent(nil)
	a, b := commitToken(ev, now, 7), commitToken(ev, now, 7)
	retry := *ev
	retry.DeliveryID = "dlv_other"
	c := commitToken(&retry, now, 7)
	d := commitToken(ev, now.Add(time.Nanosecond), 7)
	same := commitToken(ev, now, 8) // the same delivery id in the same clock tick
	if a != b {
		t.Fatal("one call must derive one token")
	}
	if a == c || a == d || a == same {
		t.Fatal("another delivery of the same event must derive another token")
	}
	if len(a) > 36 || len(requestToken(a, 2)) > 36 || requestToken(a, 1) == requestToken(a, 2) {
		t.Fatal("ClientRequestToken must be at most 36 characters and differ per attempt")
	}
}

func TestClaimKeysCannotCollideAcrossSources(t *testing.T) {
	t.Parallel()
	// "a" + "b#c" and "a#b" + "c" would collide if sources could hold '#'.
	if err := (&Event{Source: "a#b", ID: "c", Type: "t"}).Validate(); err == nil {
		t.Fatal("a source with '#' must be refused")
	}
	if (&Event{Source: "a", ID: "b#c", Type: "t"}).Validate() != nil {
		t.Fatal("'#' is fine inside an event id")
	}
}

func TestPendingShardsSpreadClaims(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for i := range 1600 {
		seen[PendingShard(ClaimKey("shop", "evt_"+strconv.Itoa(i)))]++
	}
	if len(seen) != PendingShards {
		t.Fatalf("%d shards used, want %d", len(seen), PendingShards)
	}
	for shard, n := range seen {
		if n < 50 {
			t.Fatalf("shard %s got %d of 1600 claims: badly skewed", shard, n)
		}
	}
}

func FuzzClaimKeyIsInjective(f *testing.F) {
	f.Add("a", "b#c", "ab", "c")
	f.Add("shop", "evt_1", "shop", "evt_1 ")
	f.Add("github-acme", "d1b9#x", "github", "acme#d1b9#x")
	f.Fuzz(func(t *testing.T, s1, id1, s2, id2 string) {
		e1 := &Event{Source: s1, ID: id1, Type: "t"}
		e2 := &Event{Source: s2, ID: id2, Type: "t"}
		if e1.Validate() != nil || e2.Validate() != nil {
			return
		}
		if (s1 != s2 || id1 != id2) && ClaimKey(s1, id1) == ClaimKey(s2, id2) {
			t.Fatalf("(%q,%q) and (%q,%q) share the key %q", s1, id1, s2, id2, ClaimKey(s1, id1))
		}
		if len(ClaimKey(s1, id1)) > MaxPartitionKeyBytes {
			t.Fatalf("a valid event's claim key is %d bytes", len(ClaimKey(s1, id1)))
		}
	})
}

// BenchmarkBuildRequest measures the CPU side of a commit: validating the event and plan,
// building the claim with its outbox and the effect actions, and checking every limit.
func BenchmarkBuildRequest(b *testing.B) {
	st := testStore(b)
	payload := []byte(`{"id":"evt_8f2c1a","type":"order.paid","data":{"order_id":"ord_4211","amount":4200,"currency":"eur","lines":[` +
		strings.Repeat(`{"sku":"sku_123456","qty":1,"price":1000},`, 45) + `{"sku":"sku_last","qty":1,"price":200}]}}`)
	b.Run("claim with 3 effects and 2 intents (transaction)", func(b *testing.B) {
		ev, plan := sampleEvent(payload), samplePlan()
		now := time.Now()
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if err := ev.Validate(); err != nil {
				b.Fatal(err)
			}
			req, err := st.buildRequest(ev, plan, 47*day, now, nil)
			if err != nil {
				b.Fatal(err)
			}
			_ = req.transactInput(st.tablePtr, 1)
		}
	})
	b.Run("claim with 2 intents (PutItem)", func(b *testing.B) {
		ev, plan := sampleEvent(payload), &Plan{Intents: samplePlan().Intents}
		now := time.Now()
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if err := ev.Validate(); err != nil {
				b.Fatal(err)
			}
			req, err := st.buildRequest(ev, plan, 47*day, now, nil)
			if err != nil {
				b.Fatal(err)
			}
			_ = req.putInput(st.tablePtr)
		}
	})
}
