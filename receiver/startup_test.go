package receiver_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

func noop(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, nil }

func TestWiringMistakesAreRefusedAtStartWithTheirNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		name     string
		register func(*receiver.Planners)
		want     string
	}{
		{"a planner for a source the file does not have", func(p *receiver.Planners) { p.Handle("stirpe", "charge.succeeded", noop) }, "stirpe charge.succeeded"},
		{"a pair registered twice", func(p *receiver.Planners) { p.Handle("shop", "x", noop); p.Handle("shop", "x", noop) }, "shop x is registered twice"},
		{"a nil planner", func(p *receiver.Planners) { p.Handle("shop", "y", nil) }, "shop y is nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			planners := receiver.NewPlanners()
			c.register(planners)
			_, err := receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: e.store, Planners: planners})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error naming %q", err, c.want)
			}
		})
	}
}

func TestAnIntentForATargetNoExecutorServesIsRefusedBeforeAnyWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	planners := receiver.NewPlanners()
	planners.Handle("shop", "order.paid", func(context.Context, dedup.Event) (dedup.Plan, error) {
		return dedup.Plan{Intents: []dedup.Intent{{Name: "crm.sync", Target: "crm", Payload: []byte(`{}`)}}}, nil
	})
	var logs strings.Builder
	h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: e.store, Planners: planners,
		Targets: []string{"email"}, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := h.Handle(context.Background(), e.request("shop", orderBody("msg_crm", "ord_crm"), nil, "msg_crm"))
	if resp.StatusCode != 500 || !strings.Contains(logs.String(), `target \"crm\", which no executor serves`) {
		t.Fatalf("%d %s\n%s", resp.StatusCode, resp.Body, logs.String())
	}
	if n := e.countPrefix(dedup.ClaimKey("shop", "msg_crm")); n != 0 {
		t.Fatalf("%d items written", n)
	}
	var ute *receiver.UnknownTargetError
	if !errors.As(&receiver.UnknownTargetError{Target: "crm"}, &ute) {
		t.Fatal("UnknownTargetError is a type to match")
	}
}

func TestAnUnplannedTypeIsClaimedOrLeftUnclaimedAsTheSourceSays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// shop claims unknown types (the default); a copy of the file where it ignores them.
	e.file.Sources["shop"].UnknownTypes = sources.UnknownTypesIgnore
	h := e.handlerWith(nil)
	body := `{"type":"order.refunded","data":{}}`
	resp, _ := h.Handle(context.Background(), e.request("shop", body, nil, "msg_unplanned"))
	if resp.StatusCode != 200 || resp.Body != `{"received":true,"ignored":true}` {
		t.Fatalf("ignored: %d %s", resp.StatusCode, resp.Body)
	}
	if n := e.countPrefix(dedup.ClaimKey("shop", "msg_unplanned")); n != 0 {
		t.Fatal("an ignored type was claimed")
	}
	if !strings.Contains(e.metricsText(), `"UnknownType":1`) {
		t.Fatal("UnknownType not counted")
	}
	e.file.Sources["shop"].UnknownTypes = sources.UnknownTypesClaim
	resp, _ = e.handlerWith(nil).Handle(context.Background(), e.request("shop", body, nil, "msg_unplanned"))
	if resp.StatusCode != 200 || resp.Body != `{"received":true,"duplicate":false}` || e.countPrefix(dedup.ClaimKey("shop", "msg_unplanned")) != 1 {
		t.Fatalf("claimed: %d %s", resp.StatusCode, resp.Body)
	}
}

// slowDynamoDB holds every request for a while before sending it: a DynamoDB call that will
// not finish in time.
type slowDynamoDB struct {
	next  http.RoundTripper
	delay time.Duration
}

func (s slowDynamoDB) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case <-time.After(s.delay):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return s.next.RoundTrip(r)
}

// A write that would outlast the provider's delivery timeout is answered 503 before it: the
// provider would count a late 200 as a failure and retry anyway.
func TestASlowWriteIsAnswered503BeforeTheProviderGivesUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withClient(awstest.WithTransport(slowDynamoDB{awstest.BaseTransport(), 10 * time.Second})))
	e.file.Sources["shop"].DeliveryTimeout = sources.Duration(2 * time.Second) // the commit has 1 s
	h := e.handlerWith(nil)
	resp, _ := h.Handle(context.Background(), e.request("shop", orderBody("msg_slow", "ord_slow"), nil, "msg_slow"))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Headers["Retry-After"] == "" {
		t.Fatalf("%d %v %s: want 503 with Retry-After", resp.StatusCode, resp.Headers, resp.Body)
	}
}

// deadlineSeen records the deadline of the DynamoDB calls' contexts, and answers none of them.
type deadlineSeen struct{ seen chan time.Time }

func (d deadlineSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	dl, _ := r.Context().Deadline()
	select {
	case d.seen <- dl:
	default:
	}
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// hangingSecretsManager answers a secret's first read, then records the deadline of each later
// read and holds it until its context ends: Secrets Manager that stopped answering.
type hangingSecretsManager struct {
	value string
	reads *atomic.Int32
	seen  chan time.Time
}

func (s hangingSecretsManager) GetSecretValue(ctx context.Context, _ *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	if s.reads.Add(1) == 1 {
		return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(s.value)}, nil
	}
	dl, _ := ctx.Deadline()
	s.seen <- dl
	<-ctx.Done()
	return nil, ctx.Err()
}

// Every call a delivery makes ends a second before the invocation does, when that comes before
// the provider gives up (a Lambda's timeout is the tightest source's, and this source's is
// longer): an answer after it is no answer (API Gateway's 502), though a write may have landed.
// The stale secrets' re-read has the delivery's time (a revocation must land however slow the
// store): a store that hangs costs that delivery a 503, and the next, which does not read again
// before the secrets' maximum age, is accepted with the secrets held.
func TestEveryCallOfADeliveryEndsASecondBeforeTheInvocationDoes(t *testing.T) {
	t.Parallel()
	invoke := func(t *testing.T, h *receiver.Handler, req events.APIGatewayV2HTTPRequest, seen <-chan time.Time, want int) {
		t.Helper()
		end := time.Now().Add(3 * time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), end)
		defer cancel()
		if resp, _ := h.Handle(ctx, req); resp.StatusCode != want {
			t.Fatalf("%d %s: want %d", resp.StatusCode, resp.Body, want)
		}
		if dl := <-seen; dl.IsZero() || dl.After(end.Add(-time.Second)) {
			t.Fatalf("the call's deadline %v, want a second before the invocation's end %v at the latest", dl, end)
		}
	}
	t.Run("the write", func(t *testing.T) {
		seen := deadlineSeen{make(chan time.Time, 1)}
		e := newEnv(t, withClient(awstest.WithTransport(seen)))
		e.file.Sources["shop"].DeliveryTimeout = sources.Duration(15 * time.Second)
		invoke(t, e.handlerWith(nil), e.request("shop", orderBody("msg_ends", "ord_ends"), nil, "msg_ends"), seen.seen, http.StatusServiceUnavailable)
	})
	t.Run("a failed plan's read of its claim", func(t *testing.T) {
		seen := deadlineSeen{make(chan time.Time, 1)}
		e := newEnv(t, withClient(awstest.WithTransport(seen)))
		e.file.Sources["shop"].DeliveryTimeout = sources.Duration(15 * time.Second)
		h := e.handlerWith(func(p *receiver.Planners) {
			p.Handle("shop", "order.broken", func(context.Context, dedup.Event) (dedup.Plan, error) {
				return dedup.Plan{}, errors.New("the planner failed")
			})
		})
		body := `{"id":"msg_broken","type":"order.broken","timestamp":"2026-08-25T09:14:03Z","data":{"order_id":"o"}}`
		invoke(t, h, e.request("shop", body, nil, "msg_broken"), seen.seen, http.StatusServiceUnavailable)
	})
	t.Run("the stale secrets' re-read", func(t *testing.T) {
		e := newEnv(t)
		e.file.Sources["shop"].DeliveryTimeout = sources.Duration(15 * time.Second)
		req := e.request("shop", orderBody("msg_stale", "ord_stale"), nil, "msg_stale")
		next := e.request("shop", orderBody("msg_stale_next", "ord_stale_next"), nil, "msg_stale_next")
		e.file.Sources["shop"].Secrets = []sources.SecretRef{{SecretsManager: "shop"}}
		var skew atomic.Int64
		sm := hangingSecretsManager{value: e.getenv("SHOP_SECRET"), reads: new(atomic.Int32), seen: make(chan time.Time, 1)}
		secrets, err := sources.NewSecrets(context.Background(), e.file, &sources.Resolver{Getenv: e.getenv, SecretsManager: sm}, 0,
			sources.MaxAge(time.Minute), sources.Clock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
		if err != nil {
			t.Fatal(err)
		}
		skew.Store(int64(2 * time.Minute)) // the secrets are stale: the next delivery re-reads them
		planners := receiver.NewPlanners()
		orders.Register(planners, "shop")
		h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: secrets, Store: e.store, Planners: planners, Now: e.clock})
		if err != nil {
			t.Fatal(err)
		}
		invoke(t, h, req, sm.seen, http.StatusServiceUnavailable)
		if resp, _ := h.Handle(context.Background(), next); resp.StatusCode != http.StatusOK {
			t.Fatalf("the next delivery: %d %s, want 200", resp.StatusCode, resp.Body)
		}
	})
}

// TestAnHMACBlockOnAnotherSchemeIsIgnored: the hmac block configures hmac-sha256 alone, as the
// sources file documents; a file that loads starts a receiver.
func TestAnHMACBlockOnAnotherSchemeIsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withSources(`{"sources": {"stripe": {"scheme": "stripe", "hmac": {"header": "X-Signature"},
  "secrets": [{"env": "STRIPE_SECRET"}], "retry_horizon": "3d", "redrive_window": "30d"}}}`, nil))
	resp, _ := e.handler.Handle(context.Background(), e.request("stripe", `{"id":"evt_hmac","type":"charge.succeeded"}`, nil, "evt_hmac"))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
}
