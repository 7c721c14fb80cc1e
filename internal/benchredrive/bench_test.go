package main

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// TestEachNewEventIsOneTransactionAndEachDuplicateOneCancelledOne runs the bench at a small
// size against the emulator: every new event with effects is one TransactWriteItems, every
// duplicate one cancelled TransactWriteItems and nothing else (no read), and the units charged
// are the sizing rules' on the items the table holds.
func TestEachNewEventIsOneTransactionAndEachDuplicateOneCancelledOne(t *testing.T) {
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	r, err := Run(context.Background(), awstest.Config(t), table, Config{New: 40, Redrive: 50, Duplicates: 40, Senders: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	first, redNew, redDup := r.Rows[0], r.Rows[1], r.Rows[2]
	for _, c := range []struct {
		row       *Row
		n         int
		outcome   string
		cancelled int
	}{{first, 40, "accepted", 0}, {redNew, 10, "accepted", 0}, {redDup, 40, "duplicate", 40}} {
		name := c.row.Pass + ", " + c.row.Delivery
		if c.row.Deliveries != c.n || c.row.Outcomes[c.outcome] != c.n {
			t.Errorf("%s: %d deliveries, outcomes %v; want %d %s", name, c.row.Deliveries, c.row.Outcomes, c.n, c.outcome)
		}
		if want := map[string]int{"TransactWriteItems": c.n}; !maps.Equal(c.row.Calls, want) || c.row.Requests != c.n {
			t.Errorf("%s: calls %v in %d requests, want %v in %d", name, c.row.Calls, c.row.Requests, want, c.n)
		}
		if c.row.Cancelled != c.cancelled || c.row.ReadUnits != 0 || c.row.Unbilled != 0 || c.row.Unpriced != 0 {
			t.Errorf("%s: %d cancelled, %v read units, %d unbilled, %d unpriced; want %d cancelled and no other", name,
				c.row.Cancelled, c.row.ReadUnits, c.row.Unbilled, c.row.Unpriced, c.cancelled)
		}
	}

	// The new events' units are the transactional rate on the claims and shipments they wrote;
	// each is under 1 KB, so 2 units an item, 4 an event, and as much for a cancelled copy.
	units := 0
	items := awstest.Items(t, client, table)
	for _, item := range items {
		size := dedup.ItemSize(item)
		if size > 1024 {
			t.Errorf("an item of %d bytes: the example's items are each under 1 KB", size)
		}
		units += dedup.WriteUnits(size, true)
	}
	if len(items) != 2*50 || first.WriteUnits+redNew.WriteUnits != units || units != 4*50 {
		t.Errorf("%d items worth %d units; the new events were charged %d, want 100 items, 200 units", len(items), units, first.WriteUnits+redNew.WriteUnits)
	}
	if redDup.WriteUnits != 4*40 {
		t.Errorf("40 duplicates charged %d write units, want 160: 2 items of under 1 KB, transactional", redDup.WriteUnits)
	}
}

// TestAProbeSettingIsRefusedWhileTheReceiverHasNoProbe: the flag names a receiver option that
// does not exist, so it stops the run rather than measure without it.
func TestAProbeSettingIsRefusedWhileTheReceiverHasNoProbe(t *testing.T) {
	for _, p := range []string{"on", "off"} {
		if err := setProbe(nil, p); err == nil || !strings.Contains(err.Error(), "the receiver has no duplicate probe yet") {
			t.Errorf("-probe=%s: %v", p, err)
		}
	}
	if err := setProbe(nil, ""); err != nil {
		t.Errorf("no -probe: %v", err)
	}
}
