package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/receiver"
)

// shopEvent builds the i-th new order.paid event named prefix_i, signed for shop.
func (e *env) shopEvent(prefix string) func(int) events.APIGatewayV2HTTPRequest {
	return func(i int) events.APIGatewayV2HTTPRequest {
		id := fmt.Sprintf("%s_%d", prefix, i)
		return e.request("shop", orderBody(id, "ord_"+id), nil, id)
	}
}

// deliver sends req and returns its answer and the calls it cost: reads (GetItem) and writes.
func (e *env) deliver(req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, reads, writes int) {
	e.t.Helper()
	e.counter.Reset()
	resp = e.post(req)
	return resp, e.counter.Calls("GetItem"), e.counter.Calls("TransactWriteItems") + e.counter.Calls("PutItem")
}

// sendNew delivers n new events built by req, each checked accepted in one request, and returns
// them for redelivery.
func (e *env) sendNew(n int, req func(int) events.APIGatewayV2HTTPRequest) []events.APIGatewayV2HTTPRequest {
	e.t.Helper()
	var reqs []events.APIGatewayV2HTTPRequest
	for i := range n {
		reqs = append(reqs, req(i))
		if resp, reads, writes := e.deliver(reqs[i]); resp.StatusCode != 200 || decode(e.t, resp)["duplicate"] != false || reads+writes != 1 {
			e.t.Fatalf("new event %d: %d %s in %d calls, want accepted in 1", i, resp.StatusCode, resp.Body, reads+writes)
		}
	}
	return reqs
}

// redeliver sends req again and checks it is answered as a duplicate; it returns the calls it
// cost.
func (e *env) redeliver(req events.APIGatewayV2HTTPRequest) (reads, writes int) {
	e.t.Helper()
	resp, reads, writes := e.deliver(req)
	if resp.StatusCode != 200 || decode(e.t, resp)["duplicate"] != true {
		e.t.Fatalf("redelivery: %d %s, want a duplicate", resp.StatusCode, resp.Body)
	}
	return reads, writes
}

// redrive redelivers every one of reqs, written (a redrive sets in: by the end of it, as many
// duplicates as new events), so that the next duplicate is probed.
func (e *env) redrive(reqs []events.APIGatewayV2HTTPRequest) {
	e.t.Helper()
	for i, req := range reqs {
		if reads, writes := e.redeliver(req); reads != 0 || writes != 1 {
			e.t.Fatalf("duplicate %d before the redrive is seen: %d reads and %d writes, want its write alone", i, reads, writes)
		}
	}
}

// TestUnderARedriveADuplicateCostsOneReadAndNoWrite: once duplicates dominate a source's
// deliveries, a duplicate of an event with effects is answered from one read of its claim
// instead of a transaction its claim's condition cancels (4 write units for order.paid).
func TestUnderARedriveADuplicateCostsOneReadAndNoWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew(20, e.shopEvent("msg_redrive"))
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

// TestTheProbeTurnsOnInARedriveAndOffWhenNewEventsDominateAgain: new events outside a redrive
// are one request each; the probe starts once duplicates are half of the source's recent
// deliveries, and stops once new events are the most again.
func TestTheProbeTurnsOnInARedriveAndOffWhenNewEventsDominateAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_window"))
	e.redrive(reqs)
	for i, req := range reqs {
		if reads, writes := e.redeliver(req); reads != 1 || writes != 0 || e.lastLogLine()["dynamodb_calls"] != 1.0 {
			t.Fatalf("duplicate %d under the redrive: %d reads and %d writes (logged %v), want 1 read and no write", i, reads, writes, e.lastLogLine()["dynamodb_calls"])
		}
	}
	// New events under the redrive are probed, then written; once they dominate, written alone.
	more, off := e.shopEvent("msg_after"), -1
	for i := range receiver.WindowSlots {
		resp, reads, writes := e.deliver(more(i))
		if resp.StatusCode != 200 || decode(t, resp)["duplicate"] != false || writes != 1 || reads > 1 || reads == 1 && off >= 0 {
			t.Fatalf("new event %d (probe off since %d): %d %s in %d reads and %d writes", i, off, resp.StatusCode, resp.Body, reads, writes)
		}
		if logged := e.lastLogLine()["dynamodb_calls"]; logged != float64(reads+writes) {
			t.Fatalf("new event %d: logged %v calls, made %d", i, logged, reads+writes)
		}
		if reads == 0 && off < 0 {
			off = i
		}
	}
	if off < 0 {
		t.Fatalf("%d new events after the redrive are all probed", receiver.WindowSlots)
	}
}

// TestTheProbeStopsWhenTheRedriveIsOlderThanItsWindow: duplicates older than the window's span
// do not keep the probe on.
func TestTheProbeStopsWhenTheRedriveIsOlderThanItsWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_span"))
	e.redrive(reqs)
	e.advance(receiver.WindowSpan + time.Second)
	if reads, writes := e.redeliver(reqs[0]); reads != 0 || writes != 1 {
		t.Fatalf("a duplicate after the redrive's window: %d reads and %d writes, want its write alone", reads, writes)
	}
}

// TestWithTheProbeOffADuplicateIsWrittenUnderARedrive: Config.NoDuplicateProbe.
func TestWithTheProbeOffADuplicateIsWrittenUnderARedrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutProbe())
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_off"))
	for range 3 {
		e.redrive(reqs)
	}
}

// TestUnderARedriveAnExpiredClaimIsLeftToTheWrite: a claim past its expiry, not yet deleted by
// TTL, is no duplicate for the probe: the write re-admits the event, as it does without one
// (absorbed here, in two writes: the first delivery's shipment still stands).
func TestUnderARedriveAnExpiredClaimIsLeftToTheWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_expired"))
	e.redrive(reqs)
	ret, _ := e.store.Retention("shop")
	e.mu.Lock()
	e.ahead = ret.Effective() + time.Hour
	e.mu.Unlock()
	resp, reads, writes := e.deliver(reqs[0])
	if resp.StatusCode != 200 || decode(t, resp)["duplicate"] != false || reads != 1 || writes != 2 {
		t.Fatalf("past its claim's expiry: %d %s in %d reads and %d writes, want re-admitted by the write after the probe's read", resp.StatusCode, resp.Body, reads, writes)
	}
	claim, err := dedup.GetClaim(context.Background(), e.client, e.table, "shop", "msg_expired_0")
	if err != nil || claim.Outcome != dedup.OutcomeAbsorbed.String() || claim.ExpiresAt < e.storeClock().Add(ret.Effective()-time.Minute).Unix() {
		t.Fatalf("the claim after: %+v, %v; want absorbed, expiring a retention from the store's now", claim, err)
	}
}

// githubEvent is GitHub's delivery i of body i, under delivery GUID id (the event id, unsigned).
func (e *env) githubEvent(id string, i int) events.APIGatewayV2HTTPRequest {
	body := fmt.Sprintf(`{"action":"opened","data":{"order_id":"ord_gh_%d"}}`, i)
	return e.request("github", body, http.Header{"X-Github-Delivery": {id}, "X-Github-Hook-Id": {"292430182"}, "X-Github-Event": {"order.paid"}}, "")
}

// TestUnderARedriveAForgedIdIsStillRefusedByTheBodyGuard: GitHub's id is not signed, so a
// captured body re-sent under a forged id finds no claim to probe: the write's body guard
// refuses it, as it does outside a redrive.
func TestUnderARedriveAForgedIdIsStillRefusedByTheBodyGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := e.sendNew(receiver.WindowMin, func(i int) events.APIGatewayV2HTTPRequest {
		return e.githubEvent(fmt.Sprintf("72d3162e-cc78-11e3-81ab-%012d", i), i)
	})
	e.redrive(reqs)
	forged := "00000000-0000-0000-0000-000000000001"
	resp, reads, writes := e.deliver(e.githubEvent(forged, 0))
	if resp.StatusCode != 200 || decode(t, resp)["duplicate"] != true || reads != 1 || writes != 1 || e.lastLogLine()["outcome"] != "replay" {
		t.Fatalf("a forged id: %d %s in %d reads and %d writes (%v), want the guard's refusal after the probe's read", resp.StatusCode, resp.Body, reads, writes, e.lastLogLine()["outcome"])
	}
	if _, err := dedup.GetClaim(context.Background(), e.client, e.table, "github", "292430182:"+forged); !errors.Is(err, dedup.ErrNoClaim) {
		t.Fatalf("the forged id's claim: %v, want none", err)
	}
}

// staleReads answers every eventually consistent GetItem with nothing, as a read from a replica
// the claim has not reached yet.
func staleReads(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("staleReads", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if g, ok := in.Parameters.(*dynamodb.GetItemInput); ok && !aws.ToBool(g.ConsistentRead) {
				return middleware.InitializeOutput{Result: &dynamodb.GetItemOutput{}}, middleware.Metadata{}, nil
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	})
}

// TestAProbeThatMissesAClaimFallsBackToTheWrite: an eventually consistent read that does not see
// a claim just written leaves the duplicate to the write's condition.
func TestAProbeThatMissesAClaimFallsBackToTheWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withClient(staleReads))
	reqs := e.sendNew(receiver.WindowMin, e.shopEvent("msg_stale"))
	e.redrive(reqs)
	if reads, writes := e.redeliver(reqs[0]); reads != 1 || writes != 1 {
		t.Fatalf("a duplicate the probe missed: %d reads and %d writes, want the probe's read and the write that answers it", reads, writes)
	}
	if n := e.countPrefix("ORDER#"); n != receiver.WindowMin {
		t.Fatalf("%d shipments, want %d", n, receiver.WindowMin)
	}
}
