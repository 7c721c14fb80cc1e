package launch

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestOneSpansBytesNeverLoseTheBatch: the functions' exporter sends OTLP, whose text fields
// (span names, attribute values, status descriptions, event names) are protobuf strings, which
// must be UTF-8: a collector decoding with the OTLP definitions refuses a request holding one
// that is not, whole. A span's text is not always ours: an application's executor describes its
// failure by its error (an SMTP server's reply in Latin-1, "550 Boîte inconnue"), a planner's
// error, an id a provider sent in a form body ("%E9" decodes to one byte). One such span must
// not take every other span of the invocation (each intent of a stream batch of many events)
// with it: each kind of text below, in one span among others, loses the whole request.
func TestOneSpansBytesNeverLoseTheBatch(t *testing.T) {
	latin1 := "550 Bo\xeete inconnue" // as an SMTP server wrote it
	for name, mark := range map[string]func(tr sdktrace.ReadWriteSpan){
		"status description": func(s sdktrace.ReadWriteSpan) {
			s.SetStatus(codes.Error, errors.New("smtp: "+latin1).Error())
		},
		"attribute":       func(s sdktrace.ReadWriteSpan) { s.SetAttributes(attribute.String("oncehook.event_id", "caf\xe9")) },
		"event":           func(s sdktrace.ReadWriteSpan) { s.AddEvent("reply " + latin1) },
		"event attribute": func(s sdktrace.ReadWriteSpan) { s.RecordError(errors.New(latin1)) },
	} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		tracer := tp.Tracer("github.com/oncehook/oncehook/outbox")
		ctx, batch := tracer.Start(context.Background(), "outbox")
		for _, intent := range []string{"intent slack.post", "intent email.send", "intent crm.sync"} {
			_, s := tracer.Start(ctx, intent)
			if intent == "intent email.send" {
				mark(s.(sdktrace.ReadWriteSpan))
			}
			s.End()
		}
		batch.End()
		sink := newSink(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
		x, err := exporterFromEnv()
		if err != nil {
			t.Fatal(err)
		}
		err = x.ExportSpans(context.Background(), rec.Ended())
		if got := len(sink.spans()); got != 4 || err != nil {
			t.Errorf("%s with a byte that is not UTF-8: the collector took %d of the invocation's 4 spans (export: %v)", name, got, err)
		}
	}
}
