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
// windowMin of its last windowSlots deliveries in windowSpan, on this instance, were
// duplicates. Counted in deliveries, it turns at any rate; bounded in time, a redrive long
// over does not hold the probe on for a quiet source.
const (
	windowSlots = 64
	windowMin   = 16
	windowSpan  = 10 * time.Second
)

// window is a source's last deliveries, one word each (time in milliseconds, shifted, and a
// duplicate bit), read and written without a lock: a torn read is still one delivery's.
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
// redrive and a read finds its claim: instead of a write the claim's condition would cancel.
// Otherwise the write's condition decides. A batch is not probed: dedup.Store.CommitBatch
// already reads the claims once a chunk finds one taken.
func (h *Handler) probe(ctx context.Context, d *delivery, ev *dedup.Event) bool {
	src := d.src
	if src.window == nil || !src.window.redrive(d.now) {
		return false
	}
	_, known := src.read.planners[ev.Type]
	if !known && src.conf.UnknownTypes == sources.UnknownTypesIgnore {
		return false // never written: nothing to save
	}
	// A quarter of the time left at most (ctx ends at answerBy): a hanging read must leave the
	// write the rest.
	end, _ := ctx.Deadline()
	pctx, cancel := context.WithTimeout(ctx, time.Until(end)/4)
	res, err := h.store.(Prober).Probe(pctx, *ev)
	cancel()
	d.probed = true
	if err != nil || res.Outcome != dedup.OutcomeDuplicate {
		d.probeCalls = res.Calls
		return false
	}
	d.event, d.knownType, d.one[0] = *ev, known, planned{ev: *ev, known: known, result: res}
	return true
}
