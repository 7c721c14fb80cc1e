package receiver_test

import (
	"context"
	"github.com/aws/aws-lambda-go/events"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

// noIO answers every DynamoDB call at once with success, so the benchmark measures the
// receiver's own work: verify, parse, plan, build the request, log and count.
type noIO struct{}

func (noIO) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, nil
}
func (noIO) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return &dynamodb.TransactWriteItemsOutput{}, nil
}
func (noIO) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}
func (noIO) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return &dynamodb.BatchGetItemOutput{}, nil
}

// BenchmarkHandle is the receiver's hot path without I/O for a 2 KB Standard Webhooks
// delivery: header conversion, signature verification, locating id and type, planning,
// building the DynamoDB request, the log line and the EMF document (both to io.Discard).
// The "unobserved" case leaves out the log line and the EMF document: verify + parse + plan +
// build the request, the path the goal of 20 µs was set for.
func BenchmarkHandle(b *testing.B) {
	file, err := sources.Parse([]byte(testSourcesJSON))
	if err != nil {
		b.Fatal(err)
	}
	secrets, err := sources.NewSecrets(context.Background(), file, &sources.Resolver{Getenv: func(k string) string { return testSecrets[k] }}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	store, err := dedup.New(noIO{}, dedup.Config{Table: "t", Sources: file.Retentions()})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name                      string
		planned, observed, traced bool
	}{
		{"order.paid: claim + shipment + email intent (transaction)", true, true, false},
		{"order.paid unobserved: verify + parse + plan + build request", true, false, false},
		{"unplanned type: claim only (PutItem)", false, true, false},
		// Tracing on: the delivery's four spans recorded by the SDK and batched to an exporter
		// that drops them (the export itself runs off the hot path, in the batch's goroutine).
		{"order.paid traced: the above with its spans recorded", true, true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			planners := receiver.NewPlanners()
			if c.planned {
				orders.Register(planners, "shop")
			}
			var tp trace.TracerProvider
			if c.traced {
				sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
				tp = sdk
			}
			h, err := receiver.New(receiver.Config{Sources: file, Secrets: secrets, Store: store, Planners: planners,
				Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: io.Discard, Now: func() time.Time { return fixtureTime },
				TracerProvider: tp})
			if err != nil {
				b.Fatal(err)
			}
			body := `{"type":"order.paid","timestamp":"2026-08-25T09:14:03Z","data":{"order_id":"ord_4211","customer_email":"ada@example.com","lines":[` +
				strings.Repeat(`{"sku":"sku_123456","qty":1,"price":1000},`, 42) + `{"sku":"sku_last","qty":1,"price":200}]}}`
			scheme, _ := webhook.New("standard-webhooks", webhook.Options{})
			hdr := http.Header{}
			if err := scheme.Sign(hdr, []byte(body), testSecrets["SHOP_SECRET"], "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", fixtureTime); err != nil {
				b.Fatal(err)
			}
			req := apigw("shop", body, hdr)
			ctx := context.Background()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			handle := func() events.APIGatewayV2HTTPResponse { resp, _ := h.Handle(ctx, req); return resp }
			if !c.observed {
				handle = func() events.APIGatewayV2HTTPResponse { return h.HandleUnobserved(ctx, req) }
			}
			for b.Loop() {
				resp := handle()
				if resp.StatusCode != 200 {
					b.Fatalf("%d %s", resp.StatusCode, resp.Body)
				}
			}
		})
	}
}
