package receiver_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// sendNew delivers n new order.paid events to shop (ids prefix_0..), each checked accepted in
// one request, and returns their requests for redelivery.
func (e *env) sendNew(prefix string, n int) []events.APIGatewayV2HTTPRequest {
	e.t.Helper()
	var reqs []events.APIGatewayV2HTTPRequest
	for i := range n {
		id := fmt.Sprintf("%s_%d", prefix, i)
		req := e.request("shop", orderBody(id, "ord_"+id), nil, id)
		e.counter.Reset()
		if resp := e.post(req); resp.StatusCode != 200 || decode(e.t, resp)["duplicate"] != false || e.counter.Total() != 1 {
			e.t.Fatalf("new event %s: %d %s in %d calls, want accepted in 1", id, resp.StatusCode, resp.Body, e.counter.Total())
		}
		reqs = append(reqs, req)
	}
	return reqs
}

// redeliver sends req again and checks it is answered as a duplicate; it returns the calls it
// cost by operation (GetItem, TransactWriteItems).
func (e *env) redeliver(req events.APIGatewayV2HTTPRequest) (reads, writes int) {
	e.t.Helper()
	e.counter.Reset()
	if resp := e.post(req); resp.StatusCode != 200 || decode(e.t, resp)["duplicate"] != true {
		e.t.Fatalf("redelivery: %d %s, want a duplicate", resp.StatusCode, resp.Body)
	}
	return e.counter.Calls("GetItem"), e.counter.Calls("TransactWriteItems") + e.counter.Calls("PutItem")
}

// TestUnderARedriveADuplicateCostsOneReadAndNoWrite: once duplicates dominate a source's
// deliveries, a duplicate of an event with effects is answered from one read of its claim
// instead of a transaction its claim's condition cancels (4 write units for order.paid).
func TestUnderARedriveADuplicateCostsOneReadAndNoWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew("msg_redrive", 20)
	for range 2 { // the redrive sets in
		for _, req := range reqs {
			e.redeliver(req)
		}
	}
	for i, req := range reqs {
		if reads, writes := e.redeliver(req); reads != 1 || writes != 0 {
			t.Fatalf("duplicate %d under a redrive: %d reads and %d writes, want 1 read and no write", i, reads, writes)
		}
	}
	if n := e.countPrefix("ORDER#"); n != 20 {
		t.Fatalf("%d shipments, want 20", n)
	}
}
