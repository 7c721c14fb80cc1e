package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

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

// A source with '#' and an id could name another event's claim (source "shop#a", id "b" is the
// key of source "shop", id "a#b"): GetClaim refuses what no event can have, naming the field,
// before it reads.
func TestGetClaimRefusesASourceOrIdNoEventCanHave(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: "a#b", Type: "order.paid"}, dedup.Plan{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ source, id, field string }{
		{"shop#a", "b", "source"},
		{"Shop", "a#b", "source"},
		{"", "a#b", "source"},
		{"shop", "", "event_id"},
		{"shop", "a#b\n", "event_id"},
		{"shop", strings.Repeat("x", dedup.MaxEventIDBytes+1), "event_id"},
	} {
		cl, err := dedup.GetClaim(ctx, e.client, e.table, c.source, c.id)
		if inv, ok := errors.AsType[*dedup.InvalidError](err); !ok || inv.Field != c.field {
			t.Errorf("GetClaim(%q, %q): %+v, %v; want an InvalidError naming %s", c.source, c.id, cl, err, c.field)
		}
	}
}

// GetClaims reads every claim asked for, past BatchGetItem's 100 keys and with repeats, and
// leaves out the keys that have no claim.
func TestGetClaimsReadsEveryClaimOnceAndLeavesOutTheMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	var pks []string
	for i := range 130 {
		id := fmt.Sprintf("evt_%03d", i)
		if i%2 == 0 {
			if _, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: id, Type: "order.paid"}, dedup.Plan{}); err != nil {
				t.Fatal(err)
			}
		}
		pks = append(pks, dedup.ClaimKey("shop", id), dedup.ClaimKey("shop", id))
	}
	items, err := dedup.GetClaims(ctx, e.client, e.table, pks, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 65 {
		t.Fatalf("%d claims read, want the 65 committed", len(items))
	}
	for i := 0; i < 130; i += 2 {
		c, err := dedup.UnmarshalClaim(items[dedup.ClaimKey("shop", fmt.Sprintf("evt_%03d", i))])
		if err != nil || c.EventID != fmt.Sprintf("evt_%03d", i) {
			t.Fatalf("evt_%03d: %+v, %v", i, c, err)
		}
	}
}

// unprocessedBatches leaves every key unprocessed, as a table throttling its reads does.
type unprocessedBatches struct{ calls int }

func (u *unprocessedBatches) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	u.calls++
	return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
}

// Keys left unprocessed are asked again, at most rounds calls, then GetClaims says so.
func TestGetClaimsGivesUpAfterItsRoundsOfUnprocessedKeys(t *testing.T) {
	t.Parallel()
	api := &unprocessedBatches{}
	_, err := dedup.GetClaims(context.Background(), api, "webhooks", []string{dedup.ClaimKey("shop", "evt_1")}, 3)
	if !errors.Is(err, dedup.ErrUnprocessed) || api.calls != 3 {
		t.Fatalf("%v after %d calls, want ErrUnprocessed after 3", err, api.calls)
	}
}
