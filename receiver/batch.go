package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// BatchCommitter is a Committer that writes a batch's events together, as *dedup.Store does
// (see dedup.Store.CommitBatch). With a store that is not one, the receiver commits a batch's
// events one Commit at a time.
type BatchCommitter interface {
	CommitBatch(ctx context.Context, evs []dedup.Event, plans []dedup.Plan) ([]dedup.Result, int, error)
}

// batchResult is what one batch delivery did, for its log line and metrics.
type batchResult struct {
	events  []dedup.Event
	known   []bool
	results []dedup.Result
	ignored int // events of a type without a planner, with unknown_types "ignore"
	calls   int
}

// handleBatch answers a delivery whose verified body is an array of events (a "batch" source):
// every event is located, checked and planned before anything is written, so one bad event
// leaves the whole batch unwritten (400 naming it) rather than half of it claimed.
func (h *Handler) handleBatch(ctx context.Context, d *delivery, src *source, hdr http.Header, raw []byte, now, start time.Time) events.APIGatewayV2HTTPResponse {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		d.err, d.errKind = err, "bad_request"
		return reply(http.StatusBadRequest, "body is not a JSON array of events", "body")
	}
	if limit := src.conf.MaxBatchEvents; limit > 0 && len(elems) > limit {
		d.errKind = "batch_too_large"
		return reply(http.StatusRequestEntityTooLarge, fmt.Sprintf("batch of %d events; this source accepts at most %d (max_batch_events)", len(elems), limit), "body")
	}
	b := &batchResult{}
	d.batch = b
	// b.events, b.known and b.results are in the batch's order; the events to write, with
	// their plans, are listed with their place in it.
	var toWrite []dedup.Event
	var plans []dedup.Plan
	var places []int
	var at [maxPaths]span
	pctx, planning := h.startStep(ctx, SpanPlan, trace.SpanKindInternal) // one span for the batch's events
	defer func() { planning.end(d.err) }()                               // on a refusal; ended before the commit otherwise
	defer planning.endPanicked()
	for i, elem := range elems {
		ev, err := src.read.extract(src.name, hdr, elem, "", at[:], nil)
		if resp, ok := h.admit(d, src, &ev, err, now, "events["+strconv.Itoa(i)+"]."); !ok {
			return resp
		}
		plan, known, err := src.read.plan(pctx, ev, "", at[:], nil)
		if err != nil {
			d.event = ev
			if resp := h.planError(ctx, d, err); resp.StatusCode != http.StatusOK {
				return resp
			}
			// Claimed before: a duplicate, whatever its planner says now. Left out of the write.
			d.err, d.committed = nil, false
			b.events, b.known, b.results = append(b.events, ev), append(b.known, known), append(b.results, dedup.Result{Outcome: dedup.OutcomeDuplicate})
			continue
		}
		if !known && src.conf.UnknownTypes == sources.UnknownTypesIgnore {
			b.ignored++
			continue
		}
		if h.targets != nil {
			for _, in := range plan.Intents {
				if !h.targets[in.Target] {
					d.event = ev
					return h.planError(ctx, d, &UnknownTargetError{Source: ev.Source, EventType: ev.Type, Intent: in.Name, Target: in.Target})
				}
			}
		}
		places = append(places, len(b.events))
		b.events, b.known, b.results = append(b.events, ev), append(b.known, known), append(b.results, dedup.Result{})
		toWrite, plans = append(toWrite, ev), append(plans, plan)
	}
	d.event = dedup.Event{}
	if planning.recording() {
		planning.span.SetAttributes(AttrEvents.Int(len(elems)))
	}
	planning.end(nil)
	planning = step{}

	commitStart := time.Now()
	cctx, cancel := context.WithDeadline(ctx, start.Add(src.answerWithin))
	cctx, committing := h.startStep(cctx, SpanCommit, trace.SpanKindInternal) // its context is the claims'
	defer committing.endPanicked()                                            // a store's panic
	results, calls, err := h.commitBatch(cctx, toWrite, plans)
	if committing.recording() {
		committing.end(err, AttrEvents.Int(len(toWrite)), AttrDynamoDBCalls.Int(calls))
	}
	cancel()
	d.commitTime = time.Since(commitStart)
	b.calls = calls
	for i, r := range results {
		b.results[places[i]] = r
	}
	if err != nil {
		if errors.Is(err, dedup.ErrInvalid) || errors.Is(err, dedup.ErrLimit) {
			return h.planError(ctx, d, err)
		}
		return h.commitError(d, err)
	}
	d.committed = true
	dups := 0
	for _, r := range b.results {
		if r.Outcome == dedup.OutcomeDuplicate || r.Outcome == dedup.OutcomeReplay {
			dups++
		}
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: okHeaders,
		Body: fmt.Sprintf(`{"received":true,"events":%d,"duplicates":%d,"ignored":%d}`, len(b.results), dups, b.ignored)}
}

// commitBatch commits through the store's CommitBatch when it has one.
func (h *Handler) commitBatch(ctx context.Context, evs []dedup.Event, plans []dedup.Plan) ([]dedup.Result, int, error) {
	if len(evs) == 0 {
		return nil, 0, nil
	}
	if bc, ok := h.store.(BatchCommitter); ok {
		return bc.CommitBatch(ctx, evs, plans)
	}
	results := make([]dedup.Result, 0, len(evs))
	calls := 0
	for i := range evs {
		r, err := h.store.Commit(ctx, evs[i], plans[i])
		calls += r.Calls
		if err != nil {
			return results, calls, err
		}
		results = append(results, r)
	}
	return results, calls, nil
}
