package main

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver"
)

// TestWithoutTheProbeEachNewEventIsOneTransactionAndEachDuplicateOneCancelledOne runs the bench
// at a small size against the emulator, the receiver's duplicate probe off: every new event
// with effects is one TransactWriteItems, every duplicate one cancelled TransactWriteItems and
// nothing else (no read), and the units charged are the sizing rules' on the items the table
// holds.
func TestWithoutTheProbeEachNewEventIsOneTransactionAndEachDuplicateOneCancelledOne(t *testing.T) {
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	r, err := Run(context.Background(), awstest.Config(t), table, Config{New: 40, Redrive: 50, Duplicates: 40, Senders: 8, Seed: 1, Probe: "off"})
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

// TestWithTheProbeARedrivesDuplicatesAreReadNotWritten: with the receiver's default, the
// first pass's new events are one TransactWriteItems each, no read; once the redrive sets in
// (within the receiver's window of 64 deliveries), each duplicate is one eventually consistent
// GetItem (half a read unit) and no write, each new event a GetItem and its transaction.
func TestWithTheProbeARedrivesDuplicatesAreReadNotWritten(t *testing.T) {
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	r, err := Run(context.Background(), awstest.Config(t), table, Config{New: 200, Redrive: 250, Duplicates: 200, Senders: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	first, redNew, redDup := r.Rows[0], r.Rows[1], r.Rows[2]
	if want := map[string]int{"TransactWriteItems": 200}; first.Outcomes["accepted"] != 200 || !maps.Equal(first.Calls, want) || first.Requests != 200 || first.ReadUnits != 0 {
		t.Errorf("first pass: outcomes %v, calls %v in %d requests, %v read units; want 200 accepted, one transaction each", first.Outcomes, first.Calls, first.Requests, first.ReadUnits)
	}
	if redNew.Outcomes["accepted"] != 50 || redNew.Calls["TransactWriteItems"] != 50 || redNew.Cancelled != 0 || redNew.Calls["GetItem"] > 50 {
		t.Errorf("redrive, new: outcomes %v, calls %v; want 50 accepted, each one transaction and at most one read", redNew.Outcomes, redNew.Calls)
	}
	written, read := redDup.Calls["TransactWriteItems"], redDup.Calls["GetItem"]
	if redDup.Outcomes["duplicate"] != 200 || written+read != 200 || redDup.Cancelled != written || written > 64 ||
		redDup.ReadUnits != float64(read)/2 || redDup.WriteUnits != 4*written || len(redDup.Calls) > 2 {
		t.Errorf("redrive, duplicates: outcomes %v, calls %v (%d cancelled), %d write and %v read units; want 200 duplicates, each one read (half a unit) or, before the redrive is seen (at most 64), one cancelled transaction",
			redDup.Outcomes, redDup.Calls, redDup.Cancelled, redDup.WriteUnits, redDup.ReadUnits)
	}
}

// TestAProbeSettingIsOnOrOff: the flag sets the receiver's option; another value stops the run.
func TestAProbeSettingIsOnOrOff(t *testing.T) {
	for p, off := range map[string]bool{"": false, "on": false, "off": true} {
		var cfg receiver.Config
		if setProbe(&cfg, p); cfg.NoDuplicateProbe != off || (Config{Senders: 1, Probe: p}).validate() != nil {
			t.Errorf("-probe=%q: NoDuplicateProbe %v, want %v", p, cfg.NoDuplicateProbe, off)
		}
	}
	if err := (Config{Senders: 1, Probe: "yes"}).validate(); err == nil || !strings.Contains(err.Error(), "want on or off") {
		t.Errorf("-probe=yes: %v", err)
	}
}
