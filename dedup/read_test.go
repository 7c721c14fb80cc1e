package dedup_test

import (
	"context"
	"errors"
	"testing"

	"github.com/oncehook/oncehook/dedup"
)

func TestGetClaimReadsAClaimByItsKeyAndNamesAMissingOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: "evt/1 é", Type: "order.paid"}, dedup.Plan{}); err != nil {
		t.Fatal(err)
	}
	c, err := dedup.GetClaim(ctx, e.client, e.table, "shop", "evt/1 é")
	if err != nil || c.EventID != "evt/1 é" || c.Source != "shop" {
		t.Fatalf("%+v, %v", c, err)
	}
	_, err = dedup.GetClaim(ctx, e.client, e.table, "other", "evt/1 é")
	var nc *dedup.NoClaimError
	if !errors.Is(err, dedup.ErrNoClaim) || !errors.As(err, &nc) || err.Error() != "no claim for other evt/1 é in "+e.table {
		t.Fatalf("another source's id: %v, want a NoClaimError", err)
	}
}
