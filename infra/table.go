package infra

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// TableProps override the table's defaults (Props.Table): a new pay-per-request table with
// point-in-time recovery, deletion protection (unless Props.Local), AWS owned encryption and
// the pending index in 16 shards.
type TableProps struct {
	// Encryption and Key choose the table's encryption, as in awsdynamodb.TableProps (claims
	// and effect records hold payload fields): AWS owned by default.
	Encryption awsdynamodb.TableEncryption
	Key        awskms.IKey
	// LogicalID keeps the table's CloudFormation logical id ("WebhooksTable1A2B3C4D") when the
	// construct is renamed or moved, which would otherwise replace it with an empty table.
	LogicalID string
	// PendingShards is the pending index's shard count: raise it with the event rate
	// (docs/capacity.md), never lower it. Default 16.
	PendingShards int
	// Existing adopts a table the construct does not create (another stack's, or one imported
	// with its TableStreamArn): everything is then on it. It must have what oncehook's code
	// needs (adoptedNeeds; docs/stack.md, "Adopting a table"). Not with LogicalID, Encryption or
	// Key.
	Existing awsdynamodb.ITable
}

// adoptedNeeds is what oncehook's code needs of an adopted table (Props.Table.Existing), as
// docs/stack.md lists it for a table the synth cannot read.
const adoptedNeeds = "key pk (string, partition) and sk (string, sort); a stream of NEW_IMAGE or NEW_AND_OLD_IMAGES; TTL on expires_at; " +
	"the pending index (pending_shard string, pending_since number)"

// newTable is the design's table: claims, effect records and the pending index; or
// Props.Table.Existing, once adopt has checked it.
func newTable(c constructs.Construct, stack awscdk.Stack, cfg Props) (awsdynamodb.ITable, error) {
	if cfg.Table.Existing != nil {
		return cfg.Table.Existing, adopt(c, stack, cfg.Table.Existing)
	}
	removal := awscdk.RemovalPolicy_RETAIN
	if cfg.Local {
		removal = awscdk.RemovalPolicy_DESTROY
	}
	table := awsdynamodb.NewTable(c, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(dedup.PartitionKey), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String(dedup.SortKey), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(dedup.TTLAttribute),
		Stream:              awsdynamodb.StreamViewType_NEW_IMAGE,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(!cfg.Local),
		RemovalPolicy:      removal,
		Encryption:         cfg.Table.Encryption,
		EncryptionKey:      cfg.Table.Key,
	})
	if cfg.Table.LogicalID != "" {
		table.Node().DefaultChild().(awsdynamodb.CfnTable).OverrideLogicalId(jsii.String(cfg.Table.LogicalID))
	}
	table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(dedup.PendingIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(dedup.IndexPartitionKey), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String(dedup.IndexSortKey), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})
	return table, nil
}

// checkTable fills in the table's defaults and refuses what cannot work: a logical id
// CloudFormation would refuse, settings of a created table with an adopted one, an adopted
// table without a stream. (The shard count's range is deployment's: checkSettings.)
func checkTable(cfg *Props, _ *sources.File) error {
	cfg.Table.PendingShards = cmp.Or(cfg.Table.PendingShards, dedup.PendingShards)
	if id := cfg.Table.LogicalID; id != "" && !logicalID.MatchString(id) {
		return fmt.Errorf("Props.Table.LogicalID %q: a CloudFormation logical id is 1-255 letters and digits", id)
	}
	if cfg.Table.Existing != nil {
		switch {
		case cfg.Table.LogicalID != "":
			return errors.New("Props.Table.LogicalID: keeps the id of the table the construct creates, and with Props.Table.Existing it creates none")
		case cfg.Table.Encryption != "" || cfg.Table.Key != nil:
			return errors.New("Props.Table.Encryption and Props.Table.Key: configure the table the construct creates, and with Props.Table.Existing it creates none (an imported table's key is given with it: awsdynamodb.TableAttributes.EncryptionKey)")
		case cfg.Table.Existing.TableStreamArn() == nil:
			return errors.New("Props.Table.Existing: has no stream, and the outbox runs on the table's stream: give the table a stream of NEW_IMAGE or NEW_AND_OLD_IMAGES, and import it with awsdynamodb.Table_FromTableAttributes and its TableStreamArn")
		}
	}
	if cfg.Table.Key != nil && cfg.Table.Encryption != awsdynamodb.TableEncryption_CUSTOMER_MANAGED {
		return errors.New("Props.Table.Key: only with Props.Table.Encryption CUSTOMER_MANAGED")
	}
	return nil
}

// adopt checks Props.Table.Existing: in the stack's account and Region, and, when the table is
// defined in the app (its resource is there to read), of the shape the code needs. An imported
// table cannot be read at synth: the synth says so in an info.
func adopt(c constructs.Construct, stack awscdk.Stack, t awsdynamodb.ITable) error {
	if err := placed(c, stack, "Props.Table.Existing", "the outbox's stream mapping and the receiver's transactions need the table in the stack's account and Region",
		true, t.Env(), t.TableArn(), t.TableStreamArn()); err != nil {
		return err
	}
	props, ok := readTable(t)
	if !ok {
		awscdk.Annotations_Of(c).AddInfo(jsii.String("oncehook: Props.Table.Existing is imported, and its settings cannot be read at synth: it must have " + adoptedNeeds + " (docs/stack.md, \"Adopting a table\")"))
		return nil
	}
	if wrong := tableProblems(props); len(wrong) > 0 {
		return fmt.Errorf("Props.Table.Existing %s: oncehook cannot use it: %s (it needs %s)", *t.Node().Path(), strings.Join(wrong, "; "), adoptedNeeds)
	}
	return nil
}

type keyElement struct{ AttributeName, KeyType string }

// tableProps are a table resource's properties as the synth resolves them; get reads one into
// into (an absent one leaves it as it is), false for one set from a token, which the synth
// cannot judge.
type tableProps map[string]json.RawMessage

// readTable reads t's AWS::DynamoDB::Table or GlobalTable (TableV2) when t is defined in the
// app; ok is false for an imported table, whose settings the synth cannot read.
func readTable(t awsdynamodb.ITable) (props tableProps, ok bool) {
	l1, ok := t.Node().DefaultChild().(awscdk.CfnResource)
	if !ok || (*l1.CfnResourceType() != "AWS::DynamoDB::Table" && *l1.CfnResourceType() != "AWS::DynamoDB::GlobalTable") {
		return nil, false
	}
	if b, err := json.Marshal(awscdk.Stack_Of(t).Resolve(l1.CfnProperties())); err != nil || json.Unmarshal(b, &props) != nil {
		return nil, true
	}
	return props, true
}

func (props tableProps) get(name string, into any) bool {
	for k, v := range props {
		if strings.EqualFold(k, name) {
			if strings.Contains(string(v), `"Ref"`) || strings.Contains(string(v), `"Fn::`) {
				return false
			}
			return json.Unmarshal(v, into) == nil
		}
	}
	return props != nil
}

// tableKey is a table's partition and sort key attribute names ("" for no sort key), when the
// synth can read them.
func tableKey(t awsdynamodb.ITable) (partition, sort string, known bool) {
	props, _ := readTable(t)
	var keys []keyElement
	if !props.get("keySchema", &keys) || len(keys) == 0 {
		return "", "", false
	}
	for _, k := range keys {
		switch k.KeyType {
		case "HASH":
			partition = k.AttributeName
		case "RANGE":
			sort = k.AttributeName
		}
	}
	return partition, sort, true
}

// tableProblems lists what the table's resource lacks of oncehook's needs (a property set
// from a token is not judged).
func tableProblems(props tableProps) []string {
	get := props.get
	var (
		keys  []keyElement
		attrs []struct{ AttributeName, AttributeType string }
		gsis  []struct {
			IndexName string
			KeySchema []keyElement
		}
		stream struct{ StreamViewType string }
		ttl    struct {
			AttributeName string
			Enabled       bool
		}
	)
	get("attributeDefinitions", &attrs)
	types := map[string]string{}
	for _, a := range attrs {
		types[a.AttributeName] = a.AttributeType
	}
	keyIs := func(ks []keyElement, hash, hashType, rng, rngType string) bool {
		return len(ks) == 2 && ks[0].KeyType == "HASH" && ks[0].AttributeName == hash && types[hash] == hashType &&
			ks[1].KeyType == "RANGE" && ks[1].AttributeName == rng && types[rng] == rngType
	}
	var wrong []string
	if get("keySchema", &keys) && !keyIs(keys, dedup.PartitionKey, "S", dedup.SortKey, "S") {
		wrong = append(wrong, "its key is not pk (string) and sk (string)")
	}
	if get("streamSpecification", &stream) && stream.StreamViewType != "NEW_IMAGE" && stream.StreamViewType != "NEW_AND_OLD_IMAGES" {
		view := stream.StreamViewType
		if view == "" {
			view = "off"
		}
		wrong = append(wrong, "its stream is "+view+", and the outbox reads each claim's new image")
	}
	if get("timeToLiveSpecification", &ttl) && (ttl.AttributeName != dedup.TTLAttribute || !ttl.Enabled) {
		wrong = append(wrong, "its TTL is not on expires_at, and claims would never expire")
	}
	if get("globalSecondaryIndexes", &gsis) {
		found := false
		for _, g := range gsis {
			if g.IndexName == dedup.PendingIndex {
				found = true
				if !keyIs(g.KeySchema, dedup.IndexPartitionKey, "S", dedup.IndexSortKey, "N") {
					wrong = append(wrong, "its pending index is not keyed pending_shard (string) and pending_since (number)")
				}
			}
		}
		if !found {
			wrong = append(wrong, "it has no pending index, which the sweeper reads stuck work from (add it before infra.New)")
		}
	}
	return wrong
}

// logicalID is a CloudFormation logical id: 1-255 letters and digits.
var logicalID = regexp.MustCompile(`^[A-Za-z0-9]{1,255}$`)
