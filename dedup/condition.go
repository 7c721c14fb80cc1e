package dedup

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Condition returns the effect's own condition as DynamoDB will evaluate it, with its
// expression attribute names and values: "attribute_not_exists(pk)" for IfAbsent, the built
// If expression, or "" when e has none. IfAbsent on an effect In another table tests that
// table's partition key, which e does not know: there Condition returns an *InvalidError
// (field "condition"), and Store.Condition, or receivertest's Recorder.Condition, gives the
// condition Commit sends.
func (e Effect) Condition() (expr string, names map[string]string, values map[string]types.AttributeValue, err error) {
	if e.absent && e.condition == nil && e.table != "" {
		return "", nil, nil, &InvalidError{Field: "condition", Reason: fmt.Sprintf("IfAbsent in table %q tests that table's partition key, which the effect does not know: use Store.Condition", e.table)}
	}
	cond, names, values, err := conditionOf(e, PartitionKey)
	return aws.ToString(cond), names, values, err
}

// Condition returns e's condition as Commit sends it to DynamoDB, with its names and values:
// for an effect In another table, IfAbsent tests that table's partition key (Config.Tables).
// For an update, Commit builds the condition with the update expression, so its placeholders
// (#0, :0) may be numbered otherwise; the condition is the same. An effect In a table the
// store does not have is an *InvalidError (field "table"), as Commit refuses it.
func (s *Store) Condition(e Effect) (expr string, names map[string]string, values map[string]types.AttributeValue, err error) {
	_, pkName, _, err := s.effectTable(e)
	if err != nil {
		return "", nil, nil, err
	}
	cond, names, values, err := conditionOf(e, pkName)
	return aws.ToString(cond), names, values, err
}
