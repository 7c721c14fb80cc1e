package receiver

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// Prober is a Committer that can answer a duplicate from a read of its claim, before the event
// is planned (the duplicate probe; see Config.NoDuplicateProbe). *dedup.Store satisfies it: see
// dedup.Store.Probe for when it answers, and why the write's condition still decides otherwise.
type Prober interface {
	Probe(ctx context.Context, ev dedup.Event) (dedup.Result, error)
}

// The duplicate probe's window: a source is in a redrive while at least half of at least
// windowMin of its last windowSlots committed deliveries in the last windowSpan, on this
// instance, were duplicates. Counted in deliveries, so a redrive is noticed within a few dozen
// of them at any rate, and ends as soon as new events are the most again; bounded in time, so
// a redrive long over does not hold the probe on for a quiet source's next events.
const (
	windowSlots = 64
	windowMin   = 16
	windowSpan  = 10 * time.Second
)

// window is a source's last deliveries, each one word (its time in milliseconds, shifted, and
// whether it was a duplicate), so that concurrent deliveries record and read it without a lock:
// a slot read while it is written is one delivery's or the other's, either a fair sample.
type window struct {
	next  atomic.Uint64
	slots [windowSlots]atomic.Int64
}

func (w *window) record(now time.Time, dup bool) {
	v := now.UnixMilli() << 1
	if dup {
		v |= 1
	}
	w.slots[(w.next.Add(1)-1)%windowSlots].Store(v)
}

// redrive reports whether duplicates dominate the source's recent deliveries.
func (w *window) redrive(now time.Time) bool {
	since, n, dups := now.Add(-windowSpan).UnixMilli(), 0, 0
	for i := range w.slots {
		if v := w.slots[i].Load(); v>>1 > since {
			n, dups = n+1, dups+int(v&1)
		}
	}
	return n >= windowMin && 2*dups >= n
}

// probe answers a single event as a duplicate before it is planned, when its source is in a
// redrive and the store finds its claim holding the id: one eventually consistent read instead
// of a write the claim's condition would cancel. Anything else (not in a redrive, no claim seen,
// a failed read) leaves the event to be planned and written, and the write's condition decides.
// A batch is not probed: its redelivery reads the claims after its first chunk finds one taken
// (dedup.Store.CommitBatch), so it already writes little more than its new events.
func (h *Handler) probe(ctx context.Context, d *delivery, ev *dedup.Event) bool {
	src := d.src
	if src.window == nil || !src.window.redrive(d.now) {
		return false
	}
	_, known := src.read.planners[ev.Type]
	if !known && src.conf.UnknownTypes == sources.UnknownTypesIgnore {
		return false // never written: nothing to save
	}
	// A quarter of the time left to answer in, at most: a read that hangs must leave the write
	// the rest, or the delivery it was to save a write for gets a 503.
	pctx, cancel := context.WithTimeout(ctx, time.Until(d.start.Add(src.answerWithin))/4)
	res, err := h.store.(Prober).Probe(pctx, *ev)
	cancel()
	if err != nil || res.Outcome != dedup.OutcomeDuplicate {
		d.probeCalls = res.Calls
		return false
	}
	d.event, d.knownType, d.one[0] = *ev, known, planned{ev: *ev, known: known, result: res}
	return true
}
