package dedup

import (
	"testing"
	"time"
)

// writeUnits is DynamoDB's on-demand charge for writing an item of n bytes: one write unit per
// KB, rounded up; transactional writes cost two per KB.
func writeUnits(n int, transactional bool) int {
	u := (n + 1023) / 1024
	if transactional {
		u *= 2
	}
	return u
}

// TestWriteUnitsPerEvent computes, from DynamoDB's published sizing rules and our item-size
// estimate (limits.go), the write units one new event costs on each path for the sample event
// (2 KB payload hashed, not stored), next to the claim/complete baseline. MiniStack does not
// report consumed capacity, so these are computed, not read back. Run with -v to print them.
func TestWriteUnitsPerEvent(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	ev := sampleEvent(make([]byte, 2048))
	now := time.Now()

	putPlan := &Plan{Intents: samplePlan().Intents}
	put, err := st.buildRequest(ev, putPlan, 47*day, now)
	if err != nil {
		t.Fatal(err)
	}
	fast := writeUnits(itemSize(put.claim), false)

	tx, err := st.buildRequest(ev, samplePlan(), 47*day, now)
	if err != nil {
		t.Fatal(err)
	}
	txUnits := writeUnits(itemSize(tx.claim), true)
	for _, a := range tx.effects {
		if a.Put != nil {
			txUnits += writeUnits(itemSize(a.Put.Item), true)
		} else {
			txUnits += writeUnits(itemSize(a.Update.Key)+itemSize(a.Update.ExpressionAttributeValues), true)
		}
	}
	effects := 0
	for _, a := range tx.effects {
		if a.Put != nil {
			effects += writeUnits(itemSize(a.Put.Item), false)
		} else {
			effects += writeUnits(itemSize(a.Update.Key)+itemSize(a.Update.ExpressionAttributeValues), false)
		}
	}
	// The baseline writes a small INPROGRESS record, updates it to COMPLETED (each at least one
	// unit) and writes the same effects without a transaction, and keeps its outbox elsewhere.
	baseline := 1 + 1 + effects

	t.Logf("claim + 2 intents, PutItem:                    %d write unit(s)", fast)
	t.Logf("claim + 3 effects + 2 intents, transaction:    %d write units", txUnits)
	t.Logf("claim/complete baseline, same effects, no transaction, no outbox: %d write units", baseline)
	if fast != 1 || txUnits != 8 || baseline != 5 {
		t.Fatalf("write units changed: fast %d, transaction %d, baseline %d; update the README", fast, txUnits, baseline)
	}
}
