package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// auditCalls counts the auditor's DynamoDB calls.
type auditCalls struct {
	dedup.AuditAPI
	mu    sync.Mutex
	calls map[string]int
}

func (c *auditCalls) add(op string) { c.mu.Lock(); c.calls[op]++; c.mu.Unlock() }

func (c *auditCalls) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.add("Scan")
	return c.AuditAPI.Scan(ctx, in, o...)
}

func (c *auditCalls) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.add("GetItem")
	return c.AuditAPI.GetItem(ctx, in, o...)
}

func (c *auditCalls) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.add("UpdateItem")
	return c.AuditAPI.UpdateItem(ctx, in, o...)
}

// TestTheAuditFindsEveryRecordWrittenOutsideAClaimAtABoundedCostPerRun: 30 events commit an
// order (a put effect) and credit an account (an update effect, which carries no claimed_by);
// three order records are written behind the Store's back. Runs of 7 items each cover the
// whole table, find exactly the three, never judge the account records, cost one Scan of at
// most 7 items, one GetItem and one UpdateItem each, and start over after the end.
func TestTheAuditFindsEveryRecordWrittenOutsideAClaimAtABoundedCostPerRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	for i := range 30 {
		plan := dedup.Plan{Effects: []dedup.Effect{
			dedup.PutEffect(map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("ORDER#%d", i)}, "sk": &types.AttributeValueMemberS{Value: "ORDER"},
			}),
			dedup.UpdateEffect(map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("ACCT#%d", i%4)}, "sk": &types.AttributeValueMemberS{Value: "BALANCE"},
			}, expression.Add(expression.Name("credits"), expression.Value(1))),
		}}
		if res, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: fmt.Sprintf("evt_%d", i), Type: "order.paid"}, plan); err != nil || res.Outcome != dedup.OutcomeAccepted {
			t.Fatalf("commit %d: %+v, %v", i, res, err)
		}
	}
	var rogue []string
	for i := range 3 {
		pk := fmt.Sprintf("ORDER#rogue-%d", i)
		rogue = append(rogue, pk)
		if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "ORDER"},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	total := len(e.items(t))

	calls := &auditCalls{AuditAPI: e.client, calls: map[string]int{}}
	a := &dedup.Auditor{Client: calls, Table: e.table, Prefixes: []string{"ORDER#"}, Sample: 7}
	for pass := range 2 {
		var found []string
		read, effects, runs := 0, 0, 0
		for {
			rep, err := a.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			runs++
			if rep.Read > 7 {
				t.Fatalf("a run read %d items, over its sample of 7", rep.Read)
			}
			read += rep.Read
			effects += rep.Effects
			for _, k := range rep.WithoutClaim {
				found = append(found, k.PK)
			}
			if rep.WithoutClaimCount != len(rep.WithoutClaim) {
				t.Fatalf("count %d, listed %d", rep.WithoutClaimCount, len(rep.WithoutClaim))
			}
			if rep.Wrapped {
				break
			}
			if runs > total {
				t.Fatal("the audit never reached the table's end")
			}
		}
		sort.Strings(found)
		if strings.Join(found, ",") != strings.Join(rogue, ",") {
			t.Errorf("pass %d found %v, want exactly %v", pass, found, rogue)
		}
		// The cursor item is written by the first run, so the first pass may read it or not.
		if read < total || read > total+1 || effects != 33 {
			t.Errorf("pass %d read %d items (the table has %d) and judged %d records, want every item once and the 33 orders", pass, read, total, effects)
		}
		if calls.calls["Scan"] != runs || calls.calls["GetItem"] != runs || calls.calls["UpdateItem"] != runs {
			t.Errorf("pass %d: %d runs made %v, want one Scan, one GetItem and one UpdateItem each", pass, runs, calls.calls)
		}
		calls.calls = map[string]int{}
	}
}

func TestAnAuditThatCannotWorkIsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a     dedup.Auditor
		field string
	}{
		{dedup.Auditor{}, "Prefixes"},
		{dedup.Auditor{Prefixes: []string{""}}, "Prefixes[0]"},
		{dedup.Auditor{Prefixes: []string{"ORDER#", "EVT#shop"}}, "Prefixes[1]"},
		{dedup.Auditor{Prefixes: []string{"EV"}}, "Prefixes[0]"},
		{dedup.Auditor{Prefixes: []string{"ORDER#"}, Sample: 5000}, "Sample"},
	} {
		var inv *dedup.InvalidError
		if err := c.a.Validate(); !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%+v: got %v, want an InvalidError naming %s", c.a, err, c.field)
		}
	}
}

// Each audit run records its result on its cursor, in the cursor's own write, for readers
// (LastAudit): what it read, judged and found, and when.
func TestAnAuditRunRecordsItsResultForReaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	if rec, err := dedup.LastAudit(ctx, e.client, e.table, ""); rec != nil || err != nil {
		t.Fatalf("before any run: %+v, %v; want none", rec, err)
	}
	for _, pk := range []string{"ORDER#rogue-1", "ORDER#rogue-2"} {
		if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "ORDER"}}}); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	calls := &auditCalls{AuditAPI: e.client, calls: map[string]int{}}
	a := &dedup.Auditor{Client: calls, Table: e.table, Prefixes: []string{"ORDER#"}, Sample: 100, Now: func() time.Time { return at }}
	rep, err := a.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if calls.calls["UpdateItem"] != 1 {
		t.Fatalf("calls %v: the record rides the cursor's one write", calls.calls)
	}
	rec, err := dedup.LastAudit(ctx, e.client, e.table, "")
	if err != nil || rec == nil {
		t.Fatalf("%+v, %v", rec, err)
	}
	if !rec.At.Equal(at) || rec.Read != rep.Read || rec.Effects != 2 || rec.WithoutClaim != 2 || len(rec.Keys) != 2 || rec.Keys[0].SK != "ORDER" || !rec.Wrapped {
		t.Fatalf("recorded %+v, want the run's %+v at %s", rec, rep, at)
	}
	if rec, err := dedup.LastAudit(ctx, e.client, e.table, "AppTable"); rec != nil || err != nil {
		t.Fatalf("another table's record: %+v, %v; want none", rec, err)
	}
}

// A run that finds no record without a claim records its keys as an empty list on the cursor,
// as every run records them: the attribute is a list whatever the run found, never NULL.
func TestAnAuditRunThatFindsNothingRecordsAnEmptyListOfKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	a := &dedup.Auditor{Client: e.client, Table: e.table, Prefixes: []string{"ORDER#"}, Sample: 100}
	if rep, err := a.Run(ctx); err != nil || rep.WithoutClaimCount != 0 {
		t.Fatalf("%+v, %v; want a run finding nothing", rep, err)
	}
	out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dedup.AuditCursorPK}, "sk": &types.AttributeValueMemberS{Value: dedup.AuditCursorSK}}})
	if err != nil {
		t.Fatal(err)
	}
	if keys, ok := out.Item["last_keys"].(*types.AttributeValueMemberL); !ok || len(keys.Value) != 0 {
		t.Fatalf("last_keys is %#v, want an empty list", out.Item["last_keys"])
	}
}
