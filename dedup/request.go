package dedup

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// claimCondition is the whole dedup rule. A claim may be written when none exists, or when the
// one that exists has expired: TTL deletion lags expiry by up to days, and an expired claim must
// behave exactly like a deleted one rather than depend on when the sweeper of TTL got to it.
const claimCondition = "attribute_not_exists(pk) OR expires_at < :now"

var claimConditionPtr = aws.String(claimCondition) // shared: the SDK only reads it

// holds is the claim condition read back: whether item, a claim as stored (nil: none), holds
// its event id at now, so that a write of the claim would fail its condition. A claim holds
// until expires_at < now, compared as DynamoDB compares numbers (exactly: an expiry another
// writer stored as 1767225600.5 or -1 is read as the condition reads it), and one without
// expires_at (not ours to judge) always does.
func holds(item map[string]types.AttributeValue, now int64) bool {
	if item[PartitionKey] == nil {
		return false
	}
	n, ok := item[TTLAttribute].(*types.AttributeValueMemberN)
	if !ok {
		return true
	}
	exp, ok := new(big.Rat).SetString(n.Value)
	// Not a number DynamoDB stores: said not to hold, so the write's condition decides.
	return ok && exp.Cmp(new(big.Rat).SetInt64(now)) >= 0
}

// request is one delivery's write, built and checked before any call is made.
type request struct {
	claim   map[string]types.AttributeValue
	token   string
	nowVals map[string]types.AttributeValue // {":now": epoch seconds}, for the claim condition
	expires time.Time
	effects []types.TransactWriteItem // nil for the single-PutItem path
	guard   *types.Put                // the body guard, for Event.GuardBody: always a transaction
	bytes   int                       // the claim's and the effects' size, for packing a batch
	touched []string                  // itemID of each effect's item, for packing a batch
}

// bodyGuard is the item that claims the body for ev (guarded: the hex SHA-256 of Event.Guard,
// or of the payload): its key, the event id holding it, the claim's expiry (TTL) and the claim
// it belongs to. It is written under the claim's rule: no unexpired guard holds the body. (A
// redelivery of the same event finds its claim taken first: index 0 answers duplicate whatever
// the guard says.)
func bodyGuard(table *string, ev *Event, claimPK, guarded, expiresAt string, now map[string]types.AttributeValue) *types.Put {
	return claimPut(table, map[string]types.AttributeValue{
		PartitionKey:       str(ClaimKey(ev.Source, guarded)),
		SortKey:            str(BodySK),
		attrEventID:        str(ev.ID),
		TTLAttribute:       &types.AttributeValueMemberN{Value: expiresAt},
		ClaimedByAttribute: str(claimPK),
	}, now)
}

// claimPut is the Put of item under the claim's rule (claimCondition, now its values), whose
// refusal returns the item that holds the key.
func claimPut(table *string, item, now map[string]types.AttributeValue) *types.Put {
	return &types.Put{
		TableName:                           table,
		Item:                                item,
		ConditionExpression:                 claimConditionPtr,
		ExpressionAttributeValues:           now,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// values hands out a request's attribute values from one allocation per kind instead of one
// per value: a claim with its outbox has a dozen or more, and allocating them one by one was
// the larger part of building it. Each slice is sized up front; were one to grow, the values
// handed out before would stay valid (nothing writes to them after).
type values struct {
	s []types.AttributeValueMemberS
	n []types.AttributeValueMemberN
	m []types.AttributeValueMemberM
}

func (v *values) str(s string) types.AttributeValue {
	v.s = append(v.s, types.AttributeValueMemberS{Value: s})
	return &v.s[len(v.s)-1]
}

// num takes a formatted number.
func (v *values) num(n string) types.AttributeValue {
	v.n = append(v.n, types.AttributeValueMemberN{Value: n})
	return &v.n[len(v.n)-1]
}

func (v *values) mapOf(m map[string]types.AttributeValue) types.AttributeValue {
	v.m = append(v.m, types.AttributeValueMemberM{Value: m})
	return &v.m[len(v.m)-1]
}

// claimText is the strings a claim formats: written into one buffer, they cost one allocation
// between them instead of one each.
type claimText struct {
	pk, receivedAt, occurredAt, payloadSHA256, payloadBytes, expiresAt, token, pendingSince string
}

func formatClaim(ev *Event, now, expires time.Time, nonce uint64) claimText {
	var scratch [512]byte // a claim key is at most 581 bytes; most fit here, and append grows otherwise
	var ends [8]int
	b := appendClaimKey(scratch[:0], ev.Source, ev.ID)
	ends[0] = len(b)
	b = now.UTC().AppendFormat(b, time.RFC3339Nano)
	ends[1] = len(b)
	if !ev.OccurredAt.IsZero() {
		b = ev.OccurredAt.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	ends[2] = len(b)
	b = appendPayloadHash(b, ev.Payload)
	ends[3] = len(b)
	b = strconv.AppendInt(b, int64(len(ev.Payload)), 10)
	ends[4] = len(b)
	b = strconv.AppendInt(b, expires.Unix(), 10)
	ends[5] = len(b)
	b = appendCommitToken(b, ev, now, nonce)
	ends[6] = len(b)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	ends[7] = len(b)
	all, at := string(b), 0
	next := func(i int) string { s := all[at:ends[i]]; at = ends[i]; return s }
	return claimText{pk: next(0), receivedAt: next(1), occurredAt: next(2), payloadSHA256: next(3),
		payloadBytes: next(4), expiresAt: next(5), token: next(6), pendingSince: next(7)}
}

// nowValues is the claim condition's {":now": epoch seconds}, shared by every request in the
// same second: the SDK only reads it.
type nowValues struct {
	unix int64
	vals map[string]types.AttributeValue
}

func (s *Store) nowValues(now time.Time) map[string]types.AttributeValue {
	unix := now.Unix()
	if nv := s.nowVals.Load(); nv != nil && nv.unix == unix {
		return nv.vals
	}
	nv := &nowValues{unix: unix, vals: map[string]types.AttributeValue{":now": num(unix)}}
	s.nowVals.Store(nv)
	return nv.vals
}

// buildRequest turns an event and its plan into the write, checking every DynamoDB limit it
// could hit so that a refusal costs no round trip and leaves nothing written. tc is the trace
// context to store on a claim with intents (traceValue; nil for none).
func (s *Store) buildRequest(ev *Event, plan *Plan, keep time.Duration, now time.Time, tc []byte) (*request, error) {
	guarded := 0
	if ev.GuardBody {
		guarded = 1
	}
	if n := 1 + guarded + len(plan.Effects); n > MaxTransactionActions {
		return nil, &LimitError{Limit: "transaction actions", What: "plan", Got: n, Max: MaxTransactionActions}
	}
	// A retention from receipt, or from the event's own time when that is ahead (a provider's
	// skew): a receiver refuses an event as too old a retention after its time, and the claim
	// must hold until then, or a replay of it between the two is claimed again.
	expires := now.Add(keep)
	if ev.OccurredAt.After(now) {
		expires = ev.OccurredAt.Add(keep)
	}
	t := formatClaim(ev, now, expires, rand.Uint64())
	pk := t.pk // at most 4+64+1+512 bytes: validation keeps it under 2048
	// 13 strings, 4 numbers and a map at most in the claim itself; 2 strings, a number and a
	// map per intent; 4 strings and a map at most per effect.
	vals := &values{
		s: make([]types.AttributeValueMemberS, 0, 13+2*len(plan.Intents)+4*len(plan.Effects)),
		n: make([]types.AttributeValueMemberN, 0, 4+len(plan.Intents)),
		m: make([]types.AttributeValueMemberM, 0, 1+len(plan.Intents)+len(plan.Effects)),
	}
	claim := make(map[string]types.AttributeValue, 20) // every attribute a claim can have
	// Sized as it is built: iterating the map again to size it cost more.
	claimSize := 0
	set := func(name string, v types.AttributeValue) {
		claim[name] = v
		claimSize += len(name) + valueSize(v)
	}
	set(PartitionKey, vals.str(pk))
	set(SortKey, vals.str(ClaimSK))
	set(attrSource, vals.str(ev.Source))
	set(attrEventID, vals.str(ev.ID))
	set(attrEventType, vals.str(ev.Type))
	set(attrReceivedAt, vals.str(t.receivedAt))
	set(attrPayloadSHA256, vals.str(t.payloadSHA256))
	set(attrPayloadBytes, vals.num(t.payloadBytes))
	set(TTLAttribute, vals.num(t.expiresAt))
	set(attrCommitToken, vals.str(t.token))
	set(attrOutcome, vals.str(OutcomeAccepted.String()))
	if ev.DeliveryID != "" {
		set(attrDeliveryID, vals.str(ev.DeliveryID))
	}
	if t.occurredAt != "" {
		set(attrOccurredAt, vals.str(t.occurredAt))
	}
	if len(plan.Intents) > 0 {
		if len(plan.Intents) > MaxIntents {
			return nil, &LimitError{Limit: "intents per event", What: "plan", Got: len(plan.Intents), Max: MaxIntents}
		}
		intents, err := intentsValue(vals, plan.Intents)
		if err != nil {
			return nil, err
		}
		set(attrIntents, intents)
		set(IndexPartitionKey, vals.str(DueShard(pk, s.cfg.PendingShards)))
		set(IndexSortKey, vals.num(t.pendingSince))
		set(attrWake, vals.num(t.pendingSince))
		// Its room is counted whether or not there is a context to store: see TraceContextBytes.
		if tc != nil {
			set(attrTrace, &types.AttributeValueMemberB{Value: tc})
		} else {
			claimSize += TraceContextBytes
		}
	}
	req := &request{claim: claim, token: t.token, expires: expires, nowVals: s.nowValues(now)}
	if ev.GuardBody {
		guarded := t.payloadSHA256
		if ev.Guard != nil {
			guarded = payloadHash(ev.Guard)
		}
		// The claim names its guard: what the guard hashes (Event.Guard) is not stored, so
		// a reader could not find the guard item from the claim otherwise.
		set(attrBodyGuard, vals.str(guarded))
		req.guard = bodyGuard(s.tablePtr, ev, pk, guarded, t.expiresAt, req.nowVals)
	}
	size := 0
	if len(plan.Effects) > 0 {
		effects, keys, ids, n, err := s.effectItems(vals, pk, plan.Effects)
		if err != nil {
			return nil, err
		}
		req.touched = ids
		set(attrEffects, keys)
		req.effects = effects
		size = n
	}
	req.bytes = size + claimSize
	if req.guard != nil {
		req.bytes += ItemSize(req.guard.Item)
	}
	if req.effects != nil && size+claimSize > MaxTransactionBytes {
		return nil, &LimitError{Limit: "transaction size", What: "plan", Got: size + claimSize, Max: MaxTransactionBytes}
	}
	// The worker's bookkeeping must fit in the item later: see IntentBookkeepingBytes.
	if reserved := claimSize + len(plan.Intents)*IntentBookkeepingBytes; reserved > MaxItemBytes {
		what := "claim"
		if len(plan.Intents) > 0 {
			what = "claim with room for the outbox's bookkeeping"
		}
		return nil, &LimitError{Limit: "item size", What: what, Got: reserved, Max: MaxItemBytes}
	}
	return req, nil
}

func intentsValue(vals *values, intents []Intent) (types.AttributeValue, error) {
	m := make(map[string]types.AttributeValue, len(intents))
	for i, in := range intents {
		field := func(name string) string { return "intents[" + strconv.Itoa(i) + "]." + name } // on errors only
		if err := validIntentName(field, in.Name); err != nil {
			return nil, err
		}
		if _, dup := m[in.Name]; dup {
			return nil, &InvalidError{Field: field("name"), Reason: fmt.Sprintf("%q is used by an earlier intent", in.Name)}
		}
		if err := ValidateTargetName(in.Target); err != nil {
			return nil, under("intents["+strconv.Itoa(i)+"]", err) // named here: formatting it up front cost every request
		}
		payload := in.Payload
		if payload == nil {
			payload = []byte{} // DynamoDB refuses a null B; keep the attribute present
		}
		m[in.Name] = vals.mapOf(map[string]types.AttributeValue{
			attrIntentTarget:   vals.str(in.Target),
			attrIntentPayload:  &types.AttributeValueMemberB{Value: payload},
			attrIntentStatus:   vals.str(IntentPending),
			attrIntentAttempts: vals.num("0"),
		})
	}
	return vals.mapOf(m), nil
}

// validIntentName allows letters, digits, '.', '-' and '_': the name is a map key in the claim
// and the last part of the downstream idempotency key.
func validIntentName(field func(string) string, s string) error {
	if s == "" {
		return &InvalidError{Field: field("name"), Reason: "is empty"}
	}
	if len(s) > MaxIntentNameLen {
		return &InvalidError{Field: field("name"), Reason: fmt.Sprintf("is %d bytes, limit is %d", len(s), MaxIntentNameLen)}
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return &InvalidError{Field: field("name"), Reason: fmt.Sprintf("has %q; use letters, digits, '.', '-' and '_'", r)}
		}
	}
	return nil
}

// effectItems builds the transaction's effect actions. It returns them, the list of their
// keys for the claim, the items they touch (itemID) and their size for the transaction limit.
func (s *Store) effectItems(vals *values, claimPK string, effects []Effect) ([]types.TransactWriteItem, types.AttributeValue, []string, int, error) {
	items := make([]types.TransactWriteItem, 0, len(effects))
	keys := make([]types.AttributeValue, 0, len(effects))
	ids := make([]string, 0, len(effects)) // a plan has a few effects: a scan beats a map
	total := 0
	for i, e := range effects {
		what := func() string { return "effects[" + strconv.Itoa(i) + "]" } // on errors only
		kinds := 0
		for _, k := range []bool{e.item != nil, e.update != nil, e.del, e.check} {
			if k {
				kinds++
			}
		}
		switch {
		case kinds != 1 || (e.item == nil && e.key == nil):
			return nil, nil, nil, 0, &InvalidError{Field: what(), Reason: "must be built with PutEffect, UpdateEffect, DeleteEffect or CheckEffect"}
		case e.absent && e.condition != nil && !e.check:
			return nil, nil, nil, 0, &InvalidError{Field: what() + ".condition", Reason: "IfAbsent and If cannot be combined; put both in one If"}
		case e.check && e.condition == nil:
			return nil, nil, nil, 0, &InvalidError{Field: what() + ".condition", Reason: "a check needs a condition"}
		}
		table, pkName, skName, err := s.effectTable(e)
		if err != nil {
			return nil, nil, nil, 0, under(what(), err)
		}
		src := e.KeyItem()
		pk, sk, err := effectKey(what, src, pkName, skName, e.table == "")
		if err != nil {
			return nil, nil, nil, 0, err
		}
		// One item however its key is written ("1" and "1.0") and whichever name its table has.
		id := itemID(aws.ToString(table), src[pkName], src[skName])
		if j := slices.Index(ids, id); j >= 0 {
			return nil, nil, nil, 0, &InvalidError{Field: what(), Reason: fmt.Sprintf("writes the same item as effects[%d]; a transaction may touch an item once", j)}
		}
		ids = append(ids, id)
		recorded := map[string]types.AttributeValue{PartitionKey: vals.str(pk), SortKey: vals.str(sk)}
		if e.table != "" {
			recorded[attrEffectTable] = vals.str(e.table)
		}
		keys = append(keys, vals.mapOf(recorded))
		// The key alone, as Update, Delete and ConditionCheck take it.
		itemKey := map[string]types.AttributeValue{pkName: src[pkName]}
		if skName != "" {
			itemKey[skName] = src[skName]
		}
		// An update builds its condition with its update expression, below.
		var cond *string
		var names map[string]string
		var values map[string]types.AttributeValue
		if e.update == nil {
			if cond, names, values, err = conditionOf(e, pkName); err != nil {
				return nil, nil, nil, 0, &InvalidError{Field: what() + ".condition", Reason: err.Error()}
			}
			if why := checkValue(&types.AttributeValueMemberM{Value: values}); why != "" { // each value
				return nil, nil, nil, 0, &InvalidError{Field: what() + ".condition", Reason: why}
			}
		}
		var act types.TransactWriteItem
		switch {
		case e.item != nil:
			item := make(map[string]types.AttributeValue, len(e.item)+1)
			n := 0 // sized in the copy rather than by iterating it again
			for k, v := range e.item {
				if why := checkValue(v); why != "" {
					return nil, nil, nil, 0, &InvalidError{Field: what() + "." + k, Reason: why}
				}
				item[k] = v
				n += len(k) + valueSize(v)
			}
			item[ClaimedByAttribute] = vals.str(claimPK)
			n += len(ClaimedByAttribute) + len(claimPK)
			if n > MaxItemBytes {
				return nil, nil, nil, 0, &LimitError{Limit: "item size", What: what(), Got: n, Max: MaxItemBytes}
			}
			total += n
			act.Put = &types.Put{TableName: table, Item: item, ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: values}
		case e.del:
			total += ItemSize(itemKey) + ItemSize(values)
			act.Delete = &types.Delete{TableName: table, Key: itemKey, ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: values}
		case e.check:
			total += ItemSize(itemKey) + ItemSize(values)
			act.ConditionCheck = &types.ConditionCheck{TableName: table, Key: itemKey, ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: values}
		default:
			b := expression.NewBuilder().WithUpdate(*e.update)
			if c := builtCondition(e, pkName); c != nil {
				b = b.WithCondition(*c)
			}
			expr, err := b.Build()
			if err != nil {
				return nil, nil, nil, 0, &InvalidError{Field: what() + ".update", Reason: err.Error()}
			}
			if why := checkValue(&types.AttributeValueMemberM{Value: expr.Values()}); why != "" { // each value
				return nil, nil, nil, 0, &InvalidError{Field: what() + ".update", Reason: why}
			}
			total += ItemSize(itemKey) + ItemSize(expr.Values())
			act.Update = &types.Update{TableName: table, Key: itemKey, UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
				ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}
		}
		items = append(items, act)
	}
	return items, &types.AttributeValueMemberL{Value: keys}, ids, total, nil
}

// effectTable is where e goes: its table, the claims' own or the one In names (an *InvalidError
// naming "table" when the store has none by that name), and the attributes of its key there
// (skName "" for none).
func (s *Store) effectTable(e Effect) (table *string, pkName, skName string, err error) {
	if e.table == "" {
		return s.tablePtr, PartitionKey, SortKey, nil
	}
	t, ok := s.tables[e.table]
	if !ok {
		return nil, "", "", &InvalidError{Field: "table", Reason: fmt.Sprintf("%q is not one of the store's tables (Config.Tables)", e.table)}
	}
	return t.name, t.PartitionKey, t.SortKey, nil
}

// conditionOf is e's condition, IfAbsent testing pkName, built alone.
func conditionOf(e Effect, pkName string) (cond *string, names map[string]string, values map[string]types.AttributeValue, err error) {
	if e.absent && e.condition == nil && pkName == PartitionKey {
		return absentCondition, nil, nil, nil // the common case, without the builder's cost
	}
	c := builtCondition(e, pkName)
	if c == nil {
		return nil, nil, nil, nil
	}
	expr, err := expression.NewBuilder().WithCondition(*c).Build()
	if err != nil {
		return nil, nil, nil, err
	}
	return expr.Condition(), expr.Names(), expr.Values(), nil
}

// builtCondition is e's condition as a builder: IfAbsent on pkName, or If's.
func builtCondition(e Effect, pkName string) *expression.ConditionBuilder {
	if e.absent && e.condition == nil {
		c := expression.AttributeNotExists(expression.Name(pkName))
		return &c
	}
	return e.condition
}

var absentCondition = aws.String("attribute_not_exists(pk)")

// effectKey checks an effect's key and returns it as text, for the claim's list. In the claims'
// own table (own) pk and sk are non-empty strings, and pk is never in the claims' key space, so a
// planner cannot overwrite or forge a claim; in another, the table's key attributes (skName ""
// for none) are non-empty scalars. Both are within DynamoDB's key limits.
func effectKey(what func() string, item map[string]types.AttributeValue, pkName, skName string, own bool) (pk, sk string, err error) {
	part := func(name, which string, max int) (string, error) {
		v, ok := keyText(item[name])
		if own {
			v, ok = keyString(item, name)
		}
		switch {
		case !ok && own:
			return "", &InvalidError{Field: what() + "." + name, Reason: "must be a non-empty string"}
		case !ok:
			return "", &InvalidError{Field: what() + "." + name, Reason: "must be a non-empty string, number or binary (the table's " + which + " key)"}
		case len(v) > max:
			return "", &LimitError{Limit: which + " key size", What: what(), Got: len(v), Max: max}
		}
		return v, nil
	}
	if pk, err = part(pkName, "partition", MaxPartitionKeyBytes); err != nil {
		return "", "", err
	}
	if own && strings.HasPrefix(pk, ClaimPrefix) {
		return "", "", &InvalidError{Field: what() + ".pk", Reason: "starts with " + ClaimPrefix + ", which is reserved for claims"}
	}
	if skName != "" {
		sk, err = part(skName, "sort", MaxSortKeyBytes)
	}
	return pk, sk, err
}

// keyText is a key attribute's value as text: a string as it is, a number as written, binary
// in base64.
func keyText(v types.AttributeValue) (string, bool) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value, v.Value != ""
	case *types.AttributeValueMemberN:
		return v.Value, v.Value != ""
	case *types.AttributeValueMemberB:
		return base64.StdEncoding.EncodeToString(v.Value), len(v.Value) > 0
	}
	return "", false
}

func (r *request) putInput(table *string) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                           table,
		Item:                                r.claim,
		ConditionExpression:                 claimConditionPtr,
		ExpressionAttributeValues:           r.nowVals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

func (r *request) transactInput(table *string, attempt int) *dynamodb.TransactWriteItemsInput {
	items := make([]types.TransactWriteItem, 0, 2+len(r.effects))
	items = append(items, types.TransactWriteItem{Put: claimPut(table, r.claim, r.nowVals)})
	if r.guard != nil {
		items = append(items, types.TransactWriteItem{Put: r.guard})
	}
	items = append(items, r.effects...)
	return &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(requestToken(r.token, attempt)),
	}
}

// itemID identifies an item as DynamoDB does: its table by name (an ARN reduced to it) and its
// key's values by type, a number by its value ("1", "1.0", "10E-1" and "+1" are one key).
func itemID(table string, pk, sk types.AttributeValue) string {
	return tableName(table) + "\x00" + keyID(pk) + "\x00" + keyID(sk)
}

func keyID(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S" + v.Value
	case *types.AttributeValueMemberN:
		return "N" + canonicalNumber(v.Value)
	case *types.AttributeValueMemberB:
		return "B" + string(v.Value)
	}
	return ""
}

// canonicalNumber writes a DynamoDB number one way: its significant digits and exponent
// ("1.20e1" and "012" are both "12e0"). Text that is not a number is kept as it is (DynamoDB
// refuses it anyway).
func canonicalNumber(s string) string {
	digits, exp, ok := significand(s)
	switch {
	case !ok:
		return s
	case digits == "":
		return "0"
	case strings.HasPrefix(s, "-"):
		digits = "-" + digits
	}
	return digits + "e" + strconv.Itoa(exp)
}

// significand reads a DynamoDB number as its significant digits, without leading or trailing
// zeros ("" for zero), and the power of ten that scales them: "1.20e1" and "012" are both
// ("12", 0). ok is false for text that is not a number.
func significand(s string) (digits string, exp int, ok bool) {
	m := strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(m, "eE"); i >= 0 {
		e, err := strconv.Atoi(m[i+1:])
		if err != nil {
			return "", 0, false
		}
		m, exp = m[:i], e
	}
	if i := strings.IndexByte(m, '.'); i >= 0 {
		exp -= len(m) - i - 1
		m = m[:i] + m[i+1:]
	}
	if strings.ContainsFunc(m, func(c rune) bool { return c < '0' || c > '9' }) {
		return "", 0, false
	}
	m = strings.TrimLeft(m, "0")
	digits = strings.TrimRight(m, "0")
	return digits, exp + len(m) - len(digits), true
}
