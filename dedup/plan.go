package dedup

import (
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Plan is what accepting one event does: local effect records written in the same
// transaction as the claim, and intents (external effects) that the claim carries as its
// outbox. A planner builds it from the event alone, so that every delivery of an event
// produces the same plan.
type Plan struct {
	// Effects are the application's own records, committed atomically with the claim.
	Effects []Effect
	// Intents are external effects (an email, a payment call) run later by the outbox
	// worker, each under the downstream idempotency key IdempotencyKey(source, id, name).
	Intents []Intent
}

// Effect is one local record written with the claim: a whole-item Put, an Update of an
// existing item (an account credit, a counter), a Delete, or a Check that writes nothing but
// must hold. Build one with PutEffect, UpdateEffect, DeleteEffect or CheckEffect; by default it
// writes the claims' own table, and In names another.
type Effect struct {
	item      map[string]types.AttributeValue
	key       map[string]types.AttributeValue
	update    *expression.UpdateBuilder
	condition *expression.ConditionBuilder
	absent    bool
	del       bool   // DeleteEffect
	check     bool   // CheckEffect
	table     string // In: another table of Config.Tables
}

// PutEffect writes item, which must hold the table's string keys pk and sk. The claim's key
// is added to it as claimed_by, so an audit can tie every effect record to its event.
func PutEffect(item map[string]types.AttributeValue) Effect {
	return Effect{item: item}
}

// UpdateEffect applies update to the item at key (pk and sk). Updates touch records that many
// events share (a balance, a counter), so no claimed_by is added: the claim lists the key.
func UpdateEffect(key map[string]types.AttributeValue, update expression.UpdateBuilder) Effect {
	return Effect{key: key, update: &update}
}

// DeleteEffect deletes the item at key (a reservation released, a draft discarded). The claim
// lists the key.
func DeleteEffect(key map[string]types.AttributeValue) Effect {
	return Effect{key: key, del: true}
}

// CheckEffect writes nothing: the transaction goes ahead only when cond holds on the item at
// key (a DynamoDB ConditionCheck), for a rule kept in another record (an account is open, a
// product is in stock). When only such conditions fail, the event is absorbed, as with If.
func CheckEffect(key map[string]types.AttributeValue, cond expression.ConditionBuilder) Effect {
	return Effect{key: key, condition: &cond, check: true}
}

// In returns a copy of e that writes table, an application's own table of the same account
// and Region named in Config.Tables with its key schema, in the same transaction as the claim:
// key attributes are the table's own (not pk and sk), IfAbsent tests its partition key, and a
// put item still gets claimed_by, so the record can be traced to its event.
func (e Effect) In(table string) Effect {
	e.table = table
	return e
}

// Table returns the table e writes: "" for the claims' own, or the one In named.
func (e Effect) Table() string { return e.table }

// If returns a copy of e that is written only when cond holds: the business rule that backs
// up the claim (one shipment per order). When only such a condition fails, the event is
// absorbed; see OutcomeAbsorbed for the exact rule.
func (e Effect) If(cond expression.ConditionBuilder) Effect {
	e.condition = &cond
	return e
}

// IfAbsent returns a copy of e that is written only when no item with its key exists: the
// common backstop (one shipment per order), without the expression builder's cost.
func (e Effect) IfAbsent() Effect {
	e.absent = true
	return e
}

// IsUpdate reports whether e updates an item (UpdateEffect) rather than putting a whole one.
func (e Effect) IsUpdate() bool { return e.update != nil }

// IsDelete and IsCheck report a DeleteEffect and a CheckEffect.
func (e Effect) IsDelete() bool { return e.del }
func (e Effect) IsCheck() bool  { return e.check }

// Key returns the pk and sk of the item e writes in the claims' own table ("" when e lacks
// them; Commit refuses it). An effect In another table has that table's key attributes: read
// them from KeyItem.
func (e Effect) Key() (pk, sk string) {
	return attrString(e.KeyItem(), PartitionKey), attrString(e.KeyItem(), SortKey)
}

// KeyItem returns the attributes that hold e's key: the put item's, or the key given to
// UpdateEffect, DeleteEffect or CheckEffect (not a copy: do not modify it).
func (e Effect) KeyItem() map[string]types.AttributeValue {
	if e.item != nil {
		return e.item
	}
	return e.key
}

// Item returns a copy of the item a put effect writes, as the planner built it (Commit adds
// claimed_by); nil for an update.
func (e Effect) Item() map[string]types.AttributeValue {
	return maps.Clone(e.item)
}

// Update returns an update effect's update expression with its names and values ("" for a put).
func (e Effect) Update() (expr string, names map[string]string, values map[string]types.AttributeValue, err error) {
	if e.update == nil {
		return "", nil, nil, nil
	}
	x, err := expression.NewBuilder().WithUpdate(*e.update).Build()
	if err != nil {
		return "", nil, nil, err
	}
	return aws.ToString(x.Update()), x.Names(), x.Values(), nil
}

// Intent is one external effect recorded in the claim's outbox.
type Intent struct {
	// Name is unique within the event ("email.send"); it ends the idempotency key.
	// Letters, digits, '.', '-' and '_', at most MaxIntentNameLen bytes.
	Name string
	// Target selects the executor that runs the intent ("email", "http:fulfilment").
	Target string
	// Payload is handed to the executor as it is (typically a JSON request body).
	Payload []byte
}

// MaxIntentNameLen and MaxIntentTargetLen bound an intent's name and target.
const (
	MaxIntentNameLen   = 64
	MaxIntentTargetLen = 128
)

// IdempotencyKey is the key the outbox worker sends downstream for one intent of one event:
// the same on every attempt and every redelivery, so the downstream's own dedup holds.
func IdempotencyKey(source, eventID, intent string) string {
	return source + ":" + eventID + ":" + intent
}
