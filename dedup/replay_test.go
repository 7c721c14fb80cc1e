package dedup_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// guarded is a GitHub-style delivery: the event id is an unsigned header, only the body is
// signed, so the body is claimed with it.
func guarded(id string, body string) dedup.Event {
	return dedup.Event{Source: "shop", ID: id, Type: "push", DeliveryID: id, Payload: []byte(body), GuardBody: true}
}

func TestASignedBodyUnderAForgedIDRunsNothing(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			body := `{"ref":"refs/heads/main","after":"6113728f27ae82c7b1a177c8d03f9e96e0adf246"}`
			res, err := e.store.Commit(context.Background(), guarded("hook1:guid-original", body), p.plan(1))
			if err != nil || res.Outcome != dedup.OutcomeAccepted || res.Calls != 1 {
				t.Fatalf("first delivery: %+v, %v", res, err)
			}
			before := len(e.items(t))
			// The same signed body, replayed under three forged delivery GUIDs.
			for i := range 3 {
				e.counter.Reset()
				res, err := e.store.Commit(context.Background(), guarded(fmt.Sprintf("hook1:forged-%d", i), body), p.plan(1))
				if err != nil || res.Outcome != dedup.OutcomeReplay || res.FirstEventID != "hook1:guid-original" || res.Calls != 1 {
					t.Fatalf("forged replay %d: %+v, %v; want a replay naming the first id, in one call", i, res, err)
				}
				if e.claim(t, "shop", fmt.Sprintf("hook1:forged-%d", i)) != nil {
					t.Fatal("a replay left a claim")
				}
			}
			if after := len(e.items(t)); after != before {
				t.Fatalf("%d items after the replays, %d before: a replay wrote something", after, before)
			}
			// The provider's own redelivery (same id, same body) is still a plain duplicate.
			res, err = e.store.Commit(context.Background(), guarded("hook1:guid-original", body), p.plan(1))
			if err != nil || res.Outcome != dedup.OutcomeDuplicate || res.PayloadMismatch {
				t.Fatalf("legitimate redelivery: %+v, %v", res, err)
			}
			// Another body is another event.
			res, err = e.store.Commit(context.Background(), guarded("hook1:guid-next", body+" "), p.plan(2))
			if err != nil || res.Outcome != dedup.OutcomeAccepted {
				t.Fatalf("a different body: %+v, %v", res, err)
			}
		})
	}
}

func TestABodyGuardExpiresWithItsClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *dedup.Config) {
		c.Sources = map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour, Keep: time.Hour}}
	})
	body := `{"after":"abc"}`
	if res, err := e.store.Commit(context.Background(), guarded("a", body), claimOnly(0)); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatal(res, err)
	}
	guard := findItem(t, e, dedup.ClaimKey("shop", sha256hex(body)), dedup.BodySK)
	claim := e.claim(t, "shop", "a")
	if guard == nil || guard[dedup.TTLAttribute].(*types.AttributeValueMemberN).Value != fmt.Sprint(claim.ExpiresAt) ||
		guard[dedup.ClaimedByAttribute].(*types.AttributeValueMemberS).Value != claim.PK {
		t.Fatalf("guard %v: want the claim's expiry and its key", guard)
	}
	e.clock.Advance(2 * time.Hour) // past the retention: the body can be claimed again
	if res, err := e.store.Commit(context.Background(), guarded("b", body), claimOnly(0)); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatalf("after retention: %+v, %v", res, err)
	}
}

func TestConcurrentForgedIDsOfOneBodyAdmitOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	body := `{"after":"concurrent"}`
	var mu sync.Mutex
	outcomes := map[dedup.Outcome]int{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.store.Commit(context.Background(), guarded(fmt.Sprintf("id-%d", i), body), orderPlan(7))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			outcomes[res.Outcome]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if outcomes[dedup.OutcomeAccepted] != 1 || outcomes[dedup.OutcomeReplay] != 7 {
		t.Fatalf("outcomes %v: want one accepted, seven replays", outcomes)
	}
	if n := e.count(t, "ORDER#ord_000007"); n != 1 {
		t.Fatalf("%d shipments", n)
	}
}

func TestAnAbsorbedGuardedEventStillGuardsItsBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	// The shipment exists already (written under another event): the first delivery is absorbed.
	if _, err := e.store.Commit(context.Background(), orderEvent(9), orderPlan(9)); err != nil {
		t.Fatal(err)
	}
	body := `{"order":"ord_000009","again":true}`
	res, err := e.store.Commit(context.Background(), guarded("x", body), orderPlan(9))
	if err != nil || res.Outcome != dedup.OutcomeAbsorbed {
		t.Fatalf("%+v, %v; want absorbed", res, err)
	}
	res, err = e.store.Commit(context.Background(), guarded("y", body), orderPlan(9))
	if err != nil || res.Outcome != dedup.OutcomeReplay {
		t.Fatalf("%+v, %v; want the absorbed event's body still guarded", res, err)
	}
}

func TestAnUnguardedEventStaysOnePutItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	res, err := e.store.Commit(context.Background(), orderEvent(1), claimOnly(1))
	if err != nil || res.Calls != 1 || e.counter.Calls("PutItem") != 1 || e.counter.Calls("TransactWriteItems") != 0 {
		t.Fatalf("%+v, %v: a claim-only event of a source that signs its id must stay one PutItem", res, err)
	}
	if findItem(t, e, dedup.ClaimKey("shop", sha256hex(string(orderEvent(1).Payload))), dedup.BodySK) != nil {
		t.Fatal("an unguarded event wrote a body guard")
	}
}

func findItem(t *testing.T, e *env, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	for _, it := range e.items(t) {
		if it["pk"].(*types.AttributeValueMemberS).Value == pk && it["sk"].(*types.AttributeValueMemberS).Value == sk {
			return it
		}
	}
	return nil
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
