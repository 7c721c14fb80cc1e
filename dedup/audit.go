package dedup

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DefaultAuditSample is Auditor.Sample's default.
const DefaultAuditSample = 100

// AuditAPI is the part of the DynamoDB client an Auditor uses.
type AuditAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Auditor samples effect records for the leak deduplication exists to prevent: an effect
// record written outside a claim's transaction (a code path that bypassed the Store, a second
// writer) has no claimed_by, which every put effect carries (ClaimedByAttribute).
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
	// Sample is how many items a run reads. Default DefaultAuditSample.
	Sample int
	// Audited is another table to sample instead of Table (its name or ARN), PartitionKey and
	// SortKey its key attributes ("" for a table without a sort key).
	Audited               string
	PartitionKey, SortKey string
	// Now is the clock the recorded result is stamped with (LastAudit). Default time.Now.
	Now func() time.Time
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
type Key struct {
	Table string `dynamodbav:"-"` // not recorded: LastAudit sets it from the audited table
	PK    string `dynamodbav:"pk"`
	SK    string `dynamodbav:"sk"`
}

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
	sample := cmp.Or(a.Sample, DefaultAuditSample)
	scanned, pkName, skName := a.Table, PartitionKey, SortKey
	if a.Audited != "" {
		scanned, pkName, skName = a.Audited, a.PartitionKey, a.SortKey
	}
	cursorKey := auditCursorKey(a.Audited)
	cur, err := a.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(a.Table), Key: cursorKey})
	if err != nil {
		return rep, fmt.Errorf("audit cursor: %w", err)
	}
	names := map[string]string{"#pk": pkName, "#by": ClaimedByAttribute}
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
		if _, ok := item[ClaimedByAttribute].(*types.AttributeValueMemberS); ok {
			continue
		}
		rep.WithoutClaimCount++
		if len(rep.WithoutClaim) < 20 {
			pk, _ := keyText(item[pkName])
			sk, _ := keyText(item[skName])
			rep.WithoutClaim = append(rep.WithoutClaim, Key{Table: a.Audited, PK: pk, SK: sk})
		}
	}
	// The cursor moves, and records this run's result for readers (LastAudit), in one write.
	var set, remove []string
	values := map[string]types.AttributeValue{}
	if len(out.LastEvaluatedKey) == 0 {
		rep.Wrapped = true
		remove = []string{"cursor_pk", "cursor_sk"}
	} else if sk, ok := out.LastEvaluatedKey[skName]; ok && skName != "" {
		set = append(set, "cursor_pk = :pk", "cursor_sk = :sk")
		values[":pk"], values[":sk"] = out.LastEvaluatedKey[pkName], sk
	} else {
		set = append(set, "cursor_pk = :pk")
		values[":pk"] = out.LastEvaluatedKey[pkName]
		remove = []string{"cursor_sk"}
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	keys := rep.WithoutClaim
	if keys == nil {
		keys = []Key{} // an empty list, as it has always been stored, not NULL
	}
	rec, _ := attributevalue.MarshalMap(AuditRecord{At: now().UTC().Truncate(time.Second), Read: rep.Read, Effects: rep.Effects,
		WithoutClaim: rep.WithoutClaimCount, Keys: keys, Wrapped: rep.Wrapped}) // cannot fail: strings, numbers, a time
	for _, name := range slices.Sorted(maps.Keys(rec)) {
		set = append(set, name+" = :"+name)
		values[":"+name] = rec[name]
	}
	move := &dynamodb.UpdateItemInput{TableName: aws.String(a.Table), Key: cursorKey, UpdateExpression: aws.String(updateExpression(set, remove)), ExpressionAttributeValues: values}
	if _, err := a.Client.UpdateItem(ctx, move); err != nil {
		return rep, fmt.Errorf("audit cursor: %w", err)
	}
	return rep, nil
}

// auditCursorKey is the key of the cursor of the audit of audited ("": oncehook's own table).
func auditCursorKey(audited string) map[string]types.AttributeValue {
	pk := AuditCursorPK
	if audited != "" {
		pk += "#" + audited
	}
	return map[string]types.AttributeValue{PartitionKey: str(pk), SortKey: str(AuditCursorSK)}
}

// AuditRecord is the result of an Auditor's last run, as it recorded it on its cursor (each
// field in the attribute its tag names).
type AuditRecord struct {
	// Audited is the audited table ("" for oncehook's own).
	Audited string    `dynamodbav:"-"`
	At      time.Time `dynamodbav:"last_run_at"` // whole seconds
	Read    int       `dynamodbav:"last_read"`
	Effects int       `dynamodbav:"last_effects"`
	// WithoutClaim counts the run's records without a claim; Keys are the first 20.
	WithoutClaim int   `dynamodbav:"last_without_claim"`
	Keys         []Key `dynamodbav:"last_keys"`
	Wrapped      bool  `dynamodbav:"last_wrapped"`
}

// LastAudit reads the last result an Auditor recorded for a table (audited: "" for oncehook's
// own, else the Auditor's Audited), by the cursor's key in table: one GetItem. It returns nil
// and no error when no audit has run there.
func LastAudit(ctx context.Context, api GetItemAPI, table, audited string) (*AuditRecord, error) {
	key := auditCursorKey(audited)
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key})
	if err != nil {
		return nil, err
	}
	if _, ok := out.Item["last_run_at"]; !ok {
		return nil, nil
	}
	rec := AuditRecord{Audited: audited}
	if err := attributevalue.UnmarshalMap(out.Item, &rec); err != nil {
		return nil, fmt.Errorf("audit record %s: %w", attrString(key, PartitionKey), err)
	}
	for i := range rec.Keys {
		rec.Keys[i].Table = audited
	}
	return &rec, nil
}
