package dedup

import (
	"fmt"
	"math/rand/v2"
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

// request is one delivery's write, built and checked before any call is made.
type request struct {
	claim   map[string]types.AttributeValue
	token   string
	now     int64 // :now, epoch seconds
	expires time.Time
	effects []types.TransactWriteItem // nil for the single-PutItem path
}

// buildRequest turns an event and its plan into the write, checking every DynamoDB limit it
// could hit so that a refusal costs no round trip and leaves nothing written.
func (s *Store) buildRequest(ev *Event, plan *Plan, keep time.Duration, now time.Time) (*request, error) {
	pk := ClaimKey(ev.Source, ev.ID) // at most 4+64+1+512 bytes: validation keeps it under 2048
	if n := 1 + len(plan.Effects); n > MaxTransactionActions {
		return nil, &LimitError{Limit: "transaction actions", What: "plan", Got: n, Max: MaxTransactionActions}
	}
	expires := now.Add(keep)
	token := commitToken(ev, now, rand.Uint64())
	claim := make(map[string]types.AttributeValue, 16) // every attribute a claim can have
	claim[AttrPK] = str(pk)
	claim[AttrSK] = str(ClaimSK)
	claim[AttrSource] = str(ev.Source)
	claim[AttrEventID] = str(ev.ID)
	claim[AttrEventType] = str(ev.Type)
	claim[AttrReceivedAt] = str(now.UTC().Format(time.RFC3339Nano))
	claim[AttrPayloadSHA256] = str(payloadHash(ev.Payload))
	claim[AttrPayloadBytes] = num(int64(len(ev.Payload)))
	claim[AttrExpiresAt] = num(expires.Unix())
	claim[AttrCommitToken] = str(token)
	claim[AttrOutcome] = str(OutcomeAccepted.String())
	if ev.DeliveryID != "" {
		claim[AttrDeliveryID] = str(ev.DeliveryID)
	}
	if !ev.OccurredAt.IsZero() {
		claim[AttrOccurredAt] = str(ev.OccurredAt.UTC().Format(time.RFC3339Nano))
	}
	if len(plan.Intents) > 0 {
		intents, err := intentsValue(plan.Intents)
		if err != nil {
			return nil, err
		}
		claim[AttrIntents] = intents
		claim[AttrPendingShard] = str(PendingShard(pk))
		claim[AttrPendingSince] = num(now.UnixMilli())
	}
	req := &request{claim: claim, token: token, now: now.Unix(), expires: expires}
	if len(plan.Effects) > 0 {
		effects, keys, size, err := s.effectItems(pk, plan.Effects)
		if err != nil {
			return nil, err
		}
		claim[AttrEffects] = keys
		req.effects = effects
		size += itemSize(claim)
		if size > MaxTransactionBytes {
			return nil, &LimitError{Limit: "transaction size", What: "plan", Got: size, Max: MaxTransactionBytes}
		}
	}
	if n := itemSize(claim); n > MaxItemBytes {
		return nil, &LimitError{Limit: "item size", What: "claim", Got: n, Max: MaxItemBytes}
	}
	return req, nil
}

func intentsValue(intents []Intent) (types.AttributeValue, error) {
	m := make(map[string]types.AttributeValue, len(intents))
	for i, in := range intents {
		field := "intents[" + strconv.Itoa(i) + "]"
		if err := validIntentName(field+".name", in.Name); err != nil {
			return nil, err
		}
		if _, dup := m[in.Name]; dup {
			return nil, &InvalidError{Field: field + ".name", Reason: fmt.Sprintf("%q is used by an earlier intent", in.Name)}
		}
		if err := validText(field+".target", in.Target, MaxIntentTargetLen, true); err != nil {
			return nil, err
		}
		payload := in.Payload
		if payload == nil {
			payload = []byte{} // DynamoDB refuses a null B; keep the attribute present
		}
		m[in.Name] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			AttrIntentTarget:   str(in.Target),
			AttrIntentPayload:  &types.AttributeValueMemberB{Value: payload},
			AttrIntentStatus:   str(IntentPending),
			AttrIntentAttempts: num(0),
		}}
	}
	return &types.AttributeValueMemberM{Value: m}, nil
}

// validIntentName allows letters, digits, '.', '-' and '_': the name is a map key in the claim
// and the last part of the downstream idempotency key.
func validIntentName(field, s string) error {
	if s == "" {
		return &InvalidError{Field: field, Reason: "is empty"}
	}
	if len(s) > MaxIntentNameLen {
		return &InvalidError{Field: field, Reason: fmt.Sprintf("is %d bytes, limit is %d", len(s), MaxIntentNameLen)}
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return &InvalidError{Field: field, Reason: fmt.Sprintf("has %q; use letters, digits, '.', '-' and '_'", r)}
		}
	}
	return nil
}

// effectItems builds the transaction's effect actions. It returns them, the list of their
// keys for the claim, and their size for the transaction limit.
func (s *Store) effectItems(claimPK string, effects []Effect) ([]types.TransactWriteItem, types.AttributeValue, int, error) {
	items := make([]types.TransactWriteItem, 0, len(effects))
	keys := make([]types.AttributeValue, 0, len(effects))
	seen := make(map[[2]string]int, len(effects))
	total := 0
	for i, e := range effects {
		what := "effects[" + strconv.Itoa(i) + "]"
		src := e.item
		if e.update != nil {
			src = e.key
		}
		if (e.item == nil) == (e.update == nil) {
			return nil, nil, 0, &InvalidError{Field: what, Reason: "must be built with PutEffect or UpdateEffect"}
		}
		if e.absent && e.condition != nil {
			return nil, nil, 0, &InvalidError{Field: what + ".condition", Reason: "IfAbsent and If cannot be combined; put both in one If"}
		}
		pk, sk, err := effectKey(what, src)
		if err != nil {
			return nil, nil, 0, err
		}
		if j, dup := seen[[2]string{pk, sk}]; dup {
			return nil, nil, 0, &InvalidError{Field: what, Reason: fmt.Sprintf("writes the same item as effects[%d]; a transaction may touch an item once", j)}
		}
		seen[[2]string{pk, sk}] = i
		keys = append(keys, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{AttrPK: str(pk), AttrSK: str(sk)}})

		var cond *string
		var names map[string]string
		var values map[string]types.AttributeValue
		if e.update == nil {
			item := make(map[string]types.AttributeValue, len(e.item)+1)
			for k, v := range e.item {
				item[k] = v
			}
			item[AttrClaimedBy] = str(claimPK)
			if n := itemSize(item); n > MaxItemBytes {
				return nil, nil, 0, &LimitError{Limit: "item size", What: what, Got: n, Max: MaxItemBytes}
			}
			total += itemSize(item)
			if e.absent {
				cond = absentCondition
			}
			if e.condition != nil {
				expr, err := expression.NewBuilder().WithCondition(*e.condition).Build()
				if err != nil {
					return nil, nil, 0, &InvalidError{Field: what + ".condition", Reason: err.Error()}
				}
				cond, names, values = expr.Condition(), expr.Names(), expr.Values()
			}
			items = append(items, types.TransactWriteItem{Put: &types.Put{
				TableName:                 s.tablePtr,
				Item:                      item,
				ConditionExpression:       cond,
				ExpressionAttributeNames:  names,
				ExpressionAttributeValues: values,
			}})
			continue
		}
		b := expression.NewBuilder().WithUpdate(*e.update)
		if e.absent {
			b = b.WithCondition(expression.AttributeNotExists(expression.Name(AttrPK)))
		}
		if e.condition != nil {
			b = b.WithCondition(*e.condition)
		}
		expr, err := b.Build()
		if err != nil {
			return nil, nil, 0, &InvalidError{Field: what + ".update", Reason: err.Error()}
		}
		total += itemSize(e.key) + itemSize(expr.Values())
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                 s.tablePtr,
			Key:                       map[string]types.AttributeValue{AttrPK: str(pk), AttrSK: str(sk)},
			UpdateExpression:          expr.Update(),
			ConditionExpression:       expr.Condition(),
			ExpressionAttributeNames:  expr.Names(),
			ExpressionAttributeValues: expr.Values(),
		}})
	}
	return items, &types.AttributeValueMemberL{Value: keys}, total, nil
}

var absentCondition = aws.String("attribute_not_exists(pk)")

// effectKey checks an effect's key: string pk and sk within DynamoDB's key limits, and never in
// the claims' key space, so a planner cannot overwrite or forge a claim.
func effectKey(what string, item map[string]types.AttributeValue) (pk, sk string, err error) {
	pk, ok := keyString(item, AttrPK)
	if !ok {
		return "", "", &InvalidError{Field: what + ".pk", Reason: "must be a non-empty string"}
	}
	sk, ok = keyString(item, AttrSK)
	if !ok {
		return "", "", &InvalidError{Field: what + ".sk", Reason: "must be a non-empty string"}
	}
	if strings.HasPrefix(pk, ClaimPrefix) {
		return "", "", &InvalidError{Field: what + ".pk", Reason: "starts with " + ClaimPrefix + ", which is reserved for claims"}
	}
	if len(pk) > MaxPartitionKeyBytes {
		return "", "", &LimitError{Limit: "partition key size", What: what, Got: len(pk), Max: MaxPartitionKeyBytes}
	}
	if len(sk) > MaxSortKeyBytes {
		return "", "", &LimitError{Limit: "sort key size", What: what, Got: len(sk), Max: MaxSortKeyBytes}
	}
	return pk, sk, nil
}

func (r *request) putInput(table *string) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                           table,
		Item:                                r.claim,
		ConditionExpression:                 claimConditionPtr,
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": num(r.now)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

func (r *request) transactInput(table *string, attempt int) *dynamodb.TransactWriteItemsInput {
	items := make([]types.TransactWriteItem, 0, 1+len(r.effects))
	items = append(items, types.TransactWriteItem{Put: &types.Put{
		TableName:                           table,
		Item:                                r.claim,
		ConditionExpression:                 claimConditionPtr,
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": num(r.now)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})
	items = append(items, r.effects...)
	return &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(requestToken(r.token, attempt)),
	}
}
