package dedup

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// AuditAPI is the part of the DynamoDB client an Auditor uses.
type AuditAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Auditor samples effect records for the leak deduplication exists to prevent: an effect
// record written outside a claim's transaction (a code path that bypassed the Store, a second
// writer) has no claimed_by, which every put effect carries (AttrClaimedBy).
//
// Each Run reads the next Sample items of the table, in scan order, from where the previous
// run stopped (a cursor item in the claims' key space), so runs on a schedule cover the whole
// table over and over at a bounded cost per run: Sample items read, one GetItem, one UpdateItem.
// Only records under Prefixes are judged: update effects do not stamp claimed_by, and a
// table may hold the application's own records, so the prefixes name the records that only
// put effects write (ORDER#, SHIPMENT#).
//
// An application's own table (Config.Tables) is audited by naming it in Audited, with its key
// attributes: there every item is judged unless Prefixes narrow it, so audit a table only put
// effects write. The cursor stays in Table, oncehook's, under a key of its own per table.
type Auditor struct {
	Client AuditAPI
	Table  string
	// Prefixes are the partition-key prefixes of records only put effects write: required for
	// oncehook's own table, optional for an Audited one.
	Prefixes []string
	// Sample is how many items a run reads. Default 100.
	Sample int
	// Audited is another table to sample instead of Table (its name or ARN), PartitionKey and
	// SortKey its key attributes ("" for a table without a sort key).
	Audited               string
	PartitionKey, SortKey string
}

// The audit's cursor item: in the claims' key space with an empty source, like the sweeper's
// lock, so no claim or effect record can have its key.
const (
	AuditCursorPK = ClaimPrefix + "#audit"
	AuditCursorSK = "CURSOR"
)

// AuditReport is what one Run read and found.
type AuditReport struct {
	Read    int // items the scan read: the run's cost
	Effects int // records under the prefixes among them
	// WithoutClaim are the records under the prefixes with no claimed_by (the first 20).
	WithoutClaim      []Key
	WithoutClaimCount int
	// Wrapped is true when the run reached the table's end: the next one starts over.
	Wrapped bool
}

// Key is an item's key (as text), with its table when it is not oncehook's.
type Key struct{ Table, PK, SK string }

// Validate reports configuration that cannot work.
func (a *Auditor) Validate() error {
	if a.Audited != "" && a.PartitionKey == "" {
		return &InvalidError{Field: "PartitionKey", Reason: "is required to audit " + a.Audited}
	}
	if len(a.Prefixes) == 0 && a.Audited == "" {
		return &InvalidError{Field: "Prefixes", Reason: "name at least one partition-key prefix of put-effect records"}
	}
	for i, p := range a.Prefixes {
		if p == "" || strings.HasPrefix(p, ClaimPrefix) || strings.HasPrefix(ClaimPrefix, p) {
			return &InvalidError{Field: "Prefixes[" + strconv.Itoa(i) + "]", Reason: fmt.Sprintf("%q is empty or overlaps the claims' %s", p, ClaimPrefix)}
		}
	}
	if a.Sample < 0 || a.Sample > 1000 {
		return &InvalidError{Field: "Sample", Reason: "must be between 1 and 1000"}
	}
	return nil
}

// Run audits the next Sample items.
func (a *Auditor) Run(ctx context.Context) (AuditReport, error) {
	var rep AuditReport
	if err := a.Validate(); err != nil {
		return rep, err
	}
	sample := a.Sample
	if sample == 0 {
		sample = 100
	}
	scanned, pkName, skName, cursorPK := a.Table, AttrPK, AttrSK, AuditCursorPK
	if a.Audited != "" {
		scanned, pkName, skName, cursorPK = a.Audited, a.PartitionKey, a.SortKey, AuditCursorPK+"#"+a.Audited
	}
	cursorKey := map[string]types.AttributeValue{AttrPK: str(cursorPK), AttrSK: str(AuditCursorSK)}
	cur, err := a.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(a.Table), Key: cursorKey})
	if err != nil {
		return rep, fmt.Errorf("audit cursor: %w", err)
	}
	names := map[string]string{"#pk": pkName, "#by": AttrClaimedBy}
	projection := "#pk, #by"
	if skName != "" {
		names["#sk"], projection = skName, "#pk, #sk, #by"
	}
	in := &dynamodb.ScanInput{
		TableName: aws.String(scanned),
		Limit:     aws.Int32(int32(sample)),
		// The filter does not lower the cost (Limit bounds the items read), only what comes back.
		ProjectionExpression:     aws.String(projection),
		ExpressionAttributeNames: names,
	}
	if pk, ok := cur.Item["cursor_pk"]; ok { // the last key read, as the table types it
		in.ExclusiveStartKey = map[string]types.AttributeValue{pkName: pk}
		if sk, ok := cur.Item["cursor_sk"]; ok && skName != "" {
			in.ExclusiveStartKey[skName] = sk
		}
	}
	if len(a.Prefixes) > 0 {
		var filter []string
		values := map[string]types.AttributeValue{}
		for i, p := range a.Prefixes {
			v := ":p" + strconv.Itoa(i)
			filter = append(filter, "begins_with(#pk, "+v+")")
			values[v] = str(p)
		}
		in.FilterExpression = aws.String(strings.Join(filter, " OR "))
		in.ExpressionAttributeValues = values
	}
	out, err := a.Client.Scan(ctx, in)
	if err != nil {
		return rep, fmt.Errorf("audit scan %s: %w", scanned, err)
	}
	rep.Read = int(out.ScannedCount)
	for _, item := range out.Items {
		rep.Effects++
		if _, ok := item[AttrClaimedBy].(*types.AttributeValueMemberS); ok {
			continue
		}
		rep.WithoutClaimCount++
		if len(rep.WithoutClaim) < 20 {
			pk, _ := keyText(item[pkName])
			sk, _ := keyText(item[skName])
			rep.WithoutClaim = append(rep.WithoutClaim, Key{Table: a.Audited, PK: pk, SK: sk})
		}
	}
	move := &dynamodb.UpdateItemInput{TableName: aws.String(a.Table), Key: cursorKey, UpdateExpression: aws.String("REMOVE cursor_pk, cursor_sk")}
	if len(out.LastEvaluatedKey) == 0 {
		rep.Wrapped = true
	} else if sk, ok := out.LastEvaluatedKey[skName]; ok && skName != "" {
		move.UpdateExpression = aws.String("SET cursor_pk = :pk, cursor_sk = :sk")
		move.ExpressionAttributeValues = map[string]types.AttributeValue{":pk": out.LastEvaluatedKey[pkName], ":sk": sk}
	} else {
		move.UpdateExpression = aws.String("SET cursor_pk = :pk REMOVE cursor_sk")
		move.ExpressionAttributeValues = map[string]types.AttributeValue{":pk": out.LastEvaluatedKey[pkName]}
	}
	if _, err := a.Client.UpdateItem(ctx, move); err != nil {
		return rep, fmt.Errorf("audit cursor: %w", err)
	}
	return rep, nil
}
