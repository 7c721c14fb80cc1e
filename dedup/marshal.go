package dedup

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// PutEffectOf is PutEffect of v marshalled by the AWS SDK's attributevalue.MarshalMap: a
// struct (or a pointer to one) with `dynamodbav` tags, or a map. Nested structs become maps,
// omitempty is honoured and unexported fields are left out, as the SDK does. v must hold the
// table's key attributes (pk and sk, or the keys of the table In names); Commit refuses it
// otherwise. What is not an item (a number, a slice, nil, a struct with nothing to write, a
// field the SDK cannot marshal) is an *InvalidError.
func PutEffectOf(v any) (Effect, error) {
	item, err := itemOf("item", v)
	if err != nil {
		return Effect{}, err
	}
	return PutEffect(item), nil
}

// KeyOf marshals a key struct (or map) for UpdateEffect, DeleteEffect and CheckEffect, as
// PutEffectOf marshals an item.
func KeyOf(v any) (map[string]types.AttributeValue, error) { return itemOf("key", v) }

// UpdateEffectOf is UpdateEffect of the key marshalled by KeyOf and an update that SETs each
// attribute set marshals to (a struct with `dynamodbav` tags, or a map; omitempty leaves a field
// as it is in the item): the record the event changes, written from the team's struct. An
// attribute of set that is also one of key's is refused (DynamoDB cannot update a key), as is
// what KeyOf or PutEffectOf refuse; each an *InvalidError naming key or set. For an update
// that adds, removes or appends, build it with UpdateEffect.
func UpdateEffectOf(key, set any) (Effect, error) {
	k, err := itemOf("key", key)
	if err != nil {
		return Effect{}, err
	}
	m, err := itemOf("set", set)
	if err != nil {
		return Effect{}, err
	}
	var u expression.UpdateBuilder
	for _, name := range slices.Sorted(maps.Keys(m)) { // the same expression on every delivery of the event
		if _, isKey := k[name]; isKey {
			return Effect{}, &InvalidError{Field: "set." + name, Reason: "is a key attribute; DynamoDB cannot update a key"}
		}
		u = u.Set(expression.NameNoDotSplit(name), expression.Value(m[name])) // a name is an attribute, never a path
	}
	return UpdateEffect(k, u), nil
}

func itemOf(field string, v any) (map[string]types.AttributeValue, error) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if k := rv.Kind(); k != reflect.Struct && k != reflect.Map {
		return nil, &InvalidError{Field: field, Reason: fmt.Sprintf("is %T; want a struct or a map", v)}
	}
	m, err := attributevalue.MarshalMap(v)
	if err != nil {
		return nil, &InvalidError{Field: field, Reason: err.Error()}
	}
	if len(m) == 0 {
		return nil, &InvalidError{Field: field, Reason: fmt.Sprintf("%T marshals to no attributes (only exported fields are written)", v)}
	}
	return m, nil
}
