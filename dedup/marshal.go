package dedup

import (
	"fmt"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
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
