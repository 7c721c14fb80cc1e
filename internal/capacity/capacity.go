// Package capacity computes what DynamoDB charges for a request from its published sizing
// rules, for the measurements that count units on an emulator that reports none.
//
// Item sizes ("Item sizes and formats",
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
// an attribute name is its UTF-8 length; a string its UTF-8 length; a number 1 byte per 2
// significant digits plus 1; binary its length; a boolean or null 1 byte; a list or map 3 bytes
// plus 1 per element plus the elements (a map's keys counted as names); a set the sum of its
// elements.
//
// Units (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html):
// a write is one unit per KB, rounded up, and a transactional write two (a prepare and a commit,
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling);
// a strongly consistent read is one unit per 4 KB, rounded up, an eventually consistent read
// half of that, and a read that finds nothing is charged as the smallest item.
package capacity

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize is item's size in bytes by DynamoDB's rules.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v) // Go strings are UTF-8 bytes already
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + len(v.Value) + ItemSize(v.Value)
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	}
	return 0
}

// numberSize: 1 byte per 2 significant digits (leading and trailing zeros are not), plus 1.
func numberSize(s string) int {
	digits := strings.Trim(strings.Replace(strings.TrimLeft(s, "-"), ".", "", 1), "0")
	return (len(digits)+1)/2 + 1
}

// WriteUnits is the charge for writing an item of n bytes: one unit per KB rounded up (at least
// one), two for a transactional write.
func WriteUnits(n int, transactional bool) int {
	u := max(1, (n+1023)/1024)
	if transactional {
		u *= 2
	}
	return u
}

// ReadUnits is the charge for reading an item of n bytes (0: nothing found): one unit per 4 KB
// rounded up (at least one) when strongly consistent, half of that when eventually consistent.
func ReadUnits(n int, consistent bool) float64 {
	u := float64(max(1, (n+4095)/4096))
	if !consistent {
		u /= 2
	}
	return u
}
