package dedup_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// TestAuditTakesKeyNamesWhole: an audited table's key attributes are its own names, taken
// whole. Whatever characters a key attribute's name holds (DynamoDB allows any: dots,
// brackets, which the SDK's expression builder reads as a path and a list index), the audit
// judges exactly the records under the prefixes, and names exactly the ones without
// claimed_by.
func TestAuditTakesKeyNamesWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	admin := awstest.Client(t)
	ctx := context.Background()
	for _, tc := range []struct{ pk, sk string }{
		{"order_id", ""}, {"order.id", ""}, {"order[1]", ""}, {"order[id]", ""}, {"a]b[", ""}, {"x[0].y", ""},
		{"order_id", "line[2]"}, {"order_id", "line.no"},
	} {
		for _, prefixes := range [][]string{{"ORD#"}, nil} {
			t.Run(fmt.Sprintf("pk=%q,sk=%q,prefixes=%v", tc.pk, tc.sk, prefixes), func(t *testing.T) {
				in := &dynamodb.CreateTableInput{
					BillingMode:          types.BillingModePayPerRequest,
					AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(tc.pk), AttributeType: types.ScalarAttributeTypeS}},
					KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(tc.pk), KeyType: types.KeyTypeHash}},
				}
				if tc.sk != "" {
					in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(tc.sk), AttributeType: types.ScalarAttributeTypeS})
					in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(tc.sk), KeyType: types.KeyTypeRange})
				}
				table := awstest.CreateTable(t, admin, "oncehook-test-audit-", in)
				var want []string
				for i, rec := range []struct {
					pk      string
					claimed bool
				}{{"ORD#1", true}, {"ORD#2", false}, {"ORD#3", true}, {"ORD#4", false}, {"OTHER#5", false}, {"OTHER#6", true}} {
					item := map[string]types.AttributeValue{tc.pk: s(rec.pk)}
					if tc.sk != "" {
						item[tc.sk] = s(fmt.Sprintf("L%d", i))
					}
					if rec.claimed {
						item[dedup.ClaimedByAttribute] = s("c#shop#evt")
					}
					if _, err := admin.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
						t.Fatal(err)
					}
					if !rec.claimed && (prefixes == nil || rec.pk[:4] == "ORD#") {
						want = append(want, rec.pk)
					}
				}
				judged := 4
				if prefixes == nil {
					judged = 6
				}
				a := &dedup.Auditor{Client: e.client, Table: e.table, Audited: table, PartitionKey: tc.pk, SortKey: tc.sk, Prefixes: prefixes, Sample: 2}
				var found []string
				effects := 0
				for run := 0; ; run++ {
					if run == 10 {
						t.Fatal("the audit never wrapped")
					}
					rep, err := a.Run(ctx)
					if err != nil {
						t.Fatalf("run %d: %v", run, err)
					}
					effects += rep.Effects
					for _, k := range rep.WithoutClaim {
						found = append(found, k.PK)
						if tc.sk != "" && k.SK == "" {
							t.Errorf("%+v: the sort key %q is not named", k, tc.sk)
						}
					}
					if rep.Wrapped {
						break
					}
				}
				sort.Strings(found)
				if effects != judged || !slices.Equal(found, want) {
					t.Fatalf("judged %d records, found %q; want %d judged and %q", effects, found, judged, want)
				}
			})
		}
	}
}

// TestAuditCursorKeepsTheKeysTypes: the cursor's write (now by the expression builder)
// keeps the last key as the table types it: a binary partition key and a number sort key,
// read one item a run, every item judged once.
func TestAuditCursorKeepsTheKeysTypes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	admin := awstest.Client(t)
	ctx := context.Background()
	table := awstest.CreateTable(t, admin, "oncehook-test-audit-", &dynamodb.CreateTableInput{
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeB},
			{AttributeName: aws.String("seq"), AttributeType: types.ScalarAttributeTypeN}},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("seq"), KeyType: types.KeyTypeRange}},
	})
	for i := range 5 {
		if _, err := admin.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberB{Value: []byte{byte(i % 2), 0xff}}, "seq": &types.AttributeValueMemberN{Value: fmt.Sprint(i * 10)}}}); err != nil {
			t.Fatal(err)
		}
	}
	a := &dedup.Auditor{Client: e.client, Table: e.table, Audited: table, PartitionKey: "id", SortKey: "seq", Sample: 1}
	seen := map[string]bool{}
	for run := 0; ; run++ {
		if run == 10 {
			t.Fatal("never wrapped")
		}
		rep, err := a.Run(ctx)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		for _, k := range rep.WithoutClaim {
			seen[k.PK+"/"+k.SK] = true
		}
		if rep.Wrapped {
			break
		}
	}
	if len(seen) != 5 {
		t.Fatalf("judged %v, want the 5 items", seen)
	}
}
