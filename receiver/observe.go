package receiver

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/emf"
)

// Namespace is the receiver's CloudWatch namespace unless Config.Namespace names another.
const Namespace = emf.DefaultNamespace

// EmittedMetrics is every metric the receiver writes, under each dimension set: a test holds
// the receiver to it, and the stack's dashboard and alarms name only these.
func EmittedMetrics() []emf.Metric {
	var out []emf.Metric
	for _, n := range []string{"Received", "SignatureRejected", "Unavailable", "Failed", "Rejected", "TooOld", "UnknownType",
		"ReplayRefused", "PayloadMismatch", "LostResponseRecovered", "CommitLatency", "SecretRefreshFailed", "Probed"} {
		out = append(out, emf.Metric{Name: n, Dimensions: bySource})
	}
	for _, n := range []string{"Accepted", "Duplicate", "BackstopAbsorbed"} {
		out = append(out, emf.Metric{Name: n, Dimensions: bySource}, emf.Metric{Name: n, Dimensions: byType})
	}
	return out
}

// The dimension sets. An event type is a dimension only when a planner is registered for it
// (otherwise "other"): a sender chooses types, and an unbounded dimension is a cost.
var (
	bySource = []string{"source"}
	byType   = []string{"source", "event_type"}
)

// observe writes the delivery's log line and its EMF metrics, never secrets or payloads.
func (h *Handler) observe(ctx context.Context, d *delivery) {
	res := &d.one[0].result // a single event's commit
	attrs := make([]slog.Attr, 0, 20)
	attrs = append(attrs,
		slog.String("source", d.source),
		slog.Int("status", d.resp.status),
		slog.Float64("latency_ms", ms(d.latency)),
	)
	if d.requestID != "" {
		attrs = append(attrs, slog.String("request_id", d.requestID))
	}
	if d.event.ID != "" {
		attrs = append(attrs,
			slog.String("event_id", d.event.ID),
			slog.String("event_type", d.event.Type),
			slog.String("delivery_id", d.event.DeliveryID),
		)
	}
	if d.batch {
		attrs = append(attrs, d.batchAttrs()...)
		if d.committed {
			attrs = append(attrs, slog.Float64("commit_ms", ms(d.commitTime)))
		}
	} else if d.committed {
		attrs = append(attrs,
			slog.String("outcome", res.Outcome.String()),
			slog.Float64("commit_ms", ms(d.commitTime)),
			slog.Int("dynamodb_calls", res.Calls),
		)
		if res.Outcome == dedup.OutcomeDuplicate {
			attrs = append(attrs, slog.String("first_delivery_id", res.FirstDeliveryID))
		}
		if res.Outcome == dedup.OutcomeReplay {
			attrs = append(attrs, slog.String("first_event_id", res.FirstEventID))
		}
		if res.PayloadMismatch {
			attrs = append(attrs, slog.Bool("payload_mismatch", true))
		}
		if res.Recovered {
			attrs = append(attrs, slog.Bool("recovered_lost_response", true))
		}
		if res.Outcome == dedup.OutcomeAbsorbed {
			attrs = append(attrs, slog.Any("absorbed_effects", res.Absorbed))
		}
		if !d.knownType {
			attrs = append(attrs, slog.Bool("unknown_type", true))
		}
	}
	if d.droppedDeliveryID {
		attrs = append(attrs, slog.Bool("delivery_id_dropped", true))
	}
	if d.probed {
		attrs = append(attrs, slog.Bool("probed", true))
	}
	if d.errKind != "" {
		attrs = append(attrs, slog.String("error_kind", d.errKind))
	}
	if d.err != nil {
		attrs = append(attrs, slog.String("error", d.err.Error()))
	}
	if d.secretRefreshErr != nil {
		attrs = append(attrs, slog.String("secret_refresh_error", d.secretRefreshErr.Error()))
	}
	level, msg := slog.LevelInfo, "delivery"
	switch {
	case d.resp.status >= 500:
		level = slog.LevelError
	case d.resp.status >= 400, res.PayloadMismatch, res.Outcome == dedup.OutcomeReplay, d.secretRefreshErr != nil:
		level = slog.LevelWarn
	}
	h.log.LogAttrs(ctx, level, msg, attrs...)
	if d.batch && h.log.Enabled(ctx, slog.LevelDebug) {
		for _, e := range d.evs.events {
			h.log.LogAttrs(ctx, slog.LevelDebug, "batch event", slog.String("source", d.source), slog.String("request_id", d.requestID),
				slog.String("event_id", e.ev.ID), slog.String("event_type", e.ev.Type), slog.String("outcome", e.result.Outcome.String()))
		}
	}

	doc := documents.Get().(*emf.Document)
	defer documents.Put(doc)
	doc.Reset(h.namespace, time.Now())
	doc.Set("source", d.source)
	typ := "other"
	if d.knownType {
		typ = d.event.Type
	}
	doc.Set("event_type", typ)
	doc.Count("Received", bySource)
	if d.secretRefreshErr != nil {
		doc.Count("SecretRefreshFailed", bySource)
	}
	if d.probed {
		doc.Count("Probed", bySource) // the duplicate probe read its claim: a redrive is on
	}
	switch d.errKind {
	case "signature":
		doc.Count("SignatureRejected", bySource)
	case "unavailable":
		doc.Count("Unavailable", bySource)
	case "internal", "planner":
		doc.Count("Failed", bySource)
	case "too_old":
		doc.Count("Rejected", bySource)
		doc.Count("TooOld", bySource)
	case "ignored":
		doc.Count("UnknownType", bySource)
	case "", "challenge", "head":
	default:
		doc.Count("Rejected", bySource)
	}
	var buf [4]tally // on the stack: a single event's, a batch's usual few types
	byTypes := buf[:0]
	if d.committed {
		byTypes = tallyByType(byTypes, d.events())
		if !d.batch {
			byTypes[0].count(doc) // a single event's outcome goes in its delivery's document
		}
		doc.Add("CommitLatency", ms(d.commitTime), emf.Milliseconds, bySource)
	}
	if d.batch && d.evs.ignored > 0 {
		doc.Add("UnknownType", float64(d.evs.ignored), emf.Count, bySource) // unknown_types "ignore"
	}
	_, _ = doc.WriteTo(h.metrics)
	if !d.batch {
		return
	}
	// A batch's outcomes: a document per type, not per event (which made a 1 MiB SendGrid batch
	// 2.8 MB of EMF).
	for i := range byTypes {
		t := &byTypes[i]
		doc.Reset(h.namespace, time.Now())
		doc.Set("source", d.source)
		doc.Set("event_type", t.typ)
		if t.count(doc); !doc.Empty() {
			_, _ = doc.WriteTo(h.metrics)
		}
	}
}

// tally is the outcomes of a delivery's committed events of one type.
type tally struct {
	typ                                                                 string
	accepted, duplicate, absorbed, replay, mismatch, recovered, unknown int
}

// tallyByType appends evs' tallies to dst, one per type in order of first appearance. Types
// are few (bounded by the planners), so a scan finds each.
func tallyByType(dst []tally, evs []planned) []tally {
	for _, e := range evs {
		res, typ := e.result, "other"
		if e.known {
			typ = e.ev.Type
		}
		i := slices.IndexFunc(dst, func(t tally) bool { return t.typ == typ })
		if i < 0 {
			i, dst = len(dst), append(dst, tally{typ: typ})
		}
		t := &dst[i]
		switch res.Outcome {
		case dedup.OutcomeAccepted:
			t.accepted++
		case dedup.OutcomeDuplicate:
			t.duplicate++
		case dedup.OutcomeAbsorbed:
			t.absorbed++
		case dedup.OutcomeReplay:
			t.replay++
		}
		if res.PayloadMismatch {
			t.mismatch++
		}
		if res.Recovered {
			t.recovered++
		}
		if !e.known {
			t.unknown++
		}
	}
	return dst
}

// count adds the tally's outcomes to doc.
func (t *tally) count(doc *emf.Document) {
	add := func(name string, n int, sets ...[]string) {
		if n > 0 {
			doc.Add(name, float64(n), emf.Count, sets...)
		}
	}
	add("Accepted", t.accepted, bySource, byType)
	add("Duplicate", t.duplicate, bySource, byType)
	add("BackstopAbsorbed", t.absorbed, bySource, byType)
	add("ReplayRefused", t.replay, bySource)
	add("PayloadMismatch", t.mismatch, bySource)
	add("LostResponseRecovered", t.recovered, bySource)
	add("UnknownType", t.unknown, bySource)
}

// batchAttrs summarise a batch for its delivery's log line.
func (d *delivery) batchAttrs() []slog.Attr {
	n, b := d.outcomes(), &d.evs
	return []slog.Attr{
		slog.Int("events", len(b.events)),
		slog.Int("accepted", n[dedup.OutcomeAccepted]),
		slog.Int("duplicates", n[dedup.OutcomeDuplicate]),
		slog.Int("replays", n[dedup.OutcomeReplay]),
		slog.Int("absorbed", n[dedup.OutcomeAbsorbed]),
		slog.Int("ignored", b.ignored),
		slog.Int("dynamodb_calls", b.calls),
	}
}

// documents recycles EMF documents: one is written per delivery.
var documents = sync.Pool{New: func() any { return new(emf.Document) }}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
