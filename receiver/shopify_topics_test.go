package receiver_test

import (
	"fmt"
	"testing"
)

// TestAShopifyBodyIsClaimedOncePerPlannedTopic: Shopify's topic header is unsigned, so the
// body+type guard keys by the topic only when a planner is registered for it: a captured body
// re-sent under forged ids and invented topics claims one event at most (every unplanned
// topic shares one guard, and its claim runs nothing), so a body is claimed at most once per planned topic, plus once unplanned.
func TestAShopifyBodyIsClaimedOncePerPlannedTopic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	captured := loadFixture(t, "shopify-orders-paid.json")
	if resp := e.post(captured); resp.StatusCode != 200 || resp.Body != `{"received":true,"duplicate":false}` {
		t.Fatalf("the original delivery: %d %s", resp.StatusCode, resp.Body)
	}
	const copies = 25
	newClaims := 0
	for i := range copies {
		forged := withHeaders(captured,
			"x-shopify-webhook-id", fmt.Sprintf("00000000-0000-0000-0000-%012d", i),
			"x-shopify-topic", fmt.Sprintf("invented/topic-%d", i))
		if resp := e.post(forged); resp.StatusCode == 200 && resp.Body == `{"received":true,"duplicate":false}` {
			newClaims++
		}
	}
	if newClaims > 1 { // the one for every unplanned topic
		t.Fatalf("one captured Shopify delivery re-sent under %d invented topics claimed %d new events (%d claims of source shopify in the table): not bounded by the number of topics",
			copies, newClaims, e.claims("shopify"))
	}
}
