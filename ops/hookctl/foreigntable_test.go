package main

import (
	"strings"
	"testing"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/internal/awstest"
)

// A foreign table's attribute names are its owner's text: hookctl console, refusing the
// table, must not write them to the operator's terminal raw (an escape sequence retitles the
// window, clears the screen, or forges a line), as hookctl prints every stored text (printable).
func TestConsoleRefusingAForeignTablePrintsNoTerminalControl(t *testing.T) {
	client, _ := testTable(t)
	hostile := "id\x1b]0;owned\x07\x1b[2J\rhookctl console: listening"
	for _, in := range []*dynamodb.CreateTableInput{
		{ // keyed by a hostile hash key alone
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(hostile), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(hostile), KeyType: types.KeyTypeHash}},
		},
		{ // keyed as oncehook's, its pending index keyed by a hostile attribute
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: aws.String(hostile), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
			GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("pending"),
				KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String(hostile), KeyType: types.KeyTypeHash}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}},
		},
	} {
		name := awstest.CreateTable(t, client, "foreign-ctl-", in)
		code, _, stderr := hookctl(t, "", "console", "-table", name, "-addr", "127.0.0.1:0")
		if code == 0 || !strings.Contains(stderr, name) {
			t.Fatalf("console on %s: exit %d, stderr %q; want it refused naming the table", name, code, stderr)
		}
		for _, r := range strings.TrimSuffix(stderr, "\n") {
			if !unicode.IsPrint(r) {
				t.Errorf("console on %s wrote %U to the terminal raw: %q", name, r, stderr)
				break
			}
		}
	}
}
