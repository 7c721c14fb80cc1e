package receiver_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

// A typed planner: the verified body is decoded into the team's struct, and a field of the
// wrong JSON type is a 400 naming it (nothing claimed), not a zero value.
func ExampleHandleJSON() {
	type session struct {
		Data struct {
			Object struct {
				ID     string `json:"id"`
				Amount int64  `json:"amount_total"`
			} `json:"object"`
		} `json:"data"`
	}
	type order struct {
		PK     string `dynamodbav:"pk"`
		SK     string `dynamodbav:"sk"`
		Amount int64  `dynamodbav:"amount"`
	}
	register := func(ps *receiver.Planners) {
		receiver.HandleJSON(ps, "stripe", "checkout.session.completed", func(_ context.Context, _ dedup.Event, s session) (dedup.Plan, error) {
			put, err := dedup.PutEffectOf(order{PK: "ORDER#" + s.Data.Object.ID, SK: "CHECKOUT", Amount: s.Data.Object.Amount})
			return dedup.Plan{Effects: []dedup.Effect{put.IfAbsent()}}, err
		})
	}
	f, _ := sources.Parse([]byte(`{"sources": {"stripe": {"scheme": "stripe", "secrets": [{"env": "S"}], "retry_horizon": "3d", "redrive_window": "30d"}}}`))
	h, rec, err := receivertest.NewHandler(f, map[string]string{"stripe": "whsec_test"}, register)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, body := range []string{
		`{"id":"evt_1","type":"checkout.session.completed","data":{"object":{"id":"cs_1","amount_total":1200}}}`,
		`{"id":"evt_2","type":"checkout.session.completed","data":{"object":{"id":"cs_2","amount_total":"1200"}}}`,
	} {
		req, _ := receivertest.Request(f, "stripe", "whsec_test", []byte(body))
		resp, _ := receivertest.Deliver(context.Background(), h, req)
		fmt.Printf("%s %d %q\n", resp.Outcome, resp.Status, resp.Field)
	}
	item := rec.Last().Plan.Effects[0].Item()
	fmt.Println(len(item), rec.Last().Event.ID)
	// Output:
	// accepted 200 ""
	// refused 400 "data.object.amount_total"
	// 3 evt_1
}

// tracedStore is a Committer that says whether a commit ran under a span, as the dedup store
// sees it (the span context it stores on the claim).
type tracedStore struct{ receiver.Committer }

func (s tracedStore) Commit(ctx context.Context, ev dedup.Event, plan dedup.Plan) (dedup.Result, error) {
	fmt.Println("commit under a span:", trace.SpanContextFromContext(ctx).IsValid())
	return s.Committer.Commit(ctx, ev, plan)
}

// With a TracerProvider, each delivery is a trace: a server span with verify, plan and commit
// under it, and the commit's span context is what the store keeps on the claim, where the
// outbox's spans continue it. (launch sets the provider when OTEL_TRACES_EXPORTER is otlp.)
func ExampleConfig_tracerProvider() {
	f, _ := sources.Parse([]byte(`{"sources": {"stripe": {"scheme": "stripe", "secrets": [{"env": "S"}], "retry_horizon": "3d", "redrive_window": "30d"}}}`))
	spans := tracetest.NewSpanRecorder()
	_, rec, err := receivertest.NewHandler(f, map[string]string{"stripe": "whsec_test"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	secrets, _ := sources.NewSecrets(context.Background(), f, &sources.Resolver{Getenv: func(string) string { return "whsec_test" }}, 0)
	h, err := receiver.New(receiver.Config{Sources: f, Secrets: secrets, Store: tracedStore{rec}, Planners: receiver.NewPlanners(),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
	if err != nil {
		fmt.Println(err)
		return
	}
	req, _ := receivertest.Request(f, "stripe", "whsec_test", []byte(`{"id":"evt_1","type":"checkout.session.completed","data":{}}`))
	resp, _ := h.Handle(context.Background(), req)
	fmt.Println(resp.StatusCode)
	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), s.SpanKind())
	}
	// Output:
	// commit under a span: true
	// 200
	// verify internal
	// plan internal
	// commit internal
	// POST /hooks/{source} server
}

// A stack serves each source at its own path, and names the delivery's span by the route.
func ExamplePath() {
	fmt.Println(receiver.Path("shop"))
	fmt.Println(receiver.Route)
	// Output:
	// /hooks/shop
	// /hooks/{source}
}

// countingStore is an application's Committer around the store: it counts what it commits.
// It forwards CommitBatch and ClaimedBatch too, so that the receiver still writes a batch all
// or nothing (receiver.BatchCommitter) and reads the claims of a batch's unplannable events
// together (receiver.BatchClaimReader); a wrapper without them is committed, and read, one
// event at a time.
type countingStore struct {
	*dedup.Store
	events int
}

func (s *countingStore) Commit(ctx context.Context, ev dedup.Event, p dedup.Plan) (dedup.Result, error) {
	s.events++
	return s.Store.Commit(ctx, ev, p)
}

func (s *countingStore) CommitBatch(ctx context.Context, evs []dedup.Event, ps []dedup.Plan) ([]dedup.Result, int, error) {
	s.events += len(evs)
	return s.Store.CommitBatch(ctx, evs, ps)
}

// A store wrapped by the application keeps the receiver's batch paths by forwarding them; here
// ClaimedBatch comes with the embedded *dedup.Store.
func ExampleBatchClaimReader() {
	var store receiver.Committer = &countingStore{}
	_, commitsBatches := store.(receiver.BatchCommitter)
	_, readsBatches := store.(receiver.BatchClaimReader)
	fmt.Println(commitsBatches, readsBatches)
	// Output: true true
}
