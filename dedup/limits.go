package dedup

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's limits that a single Commit can reach. They are checked before any call, so an
// oversized plan fails with a *LimitError naming the limit instead of a ValidationException
// after a round trip (and, in a transaction, instead of a cancellation that says little).
const (
	MaxTransactionActions = 100
	MaxTransactionBytes   = 4 * 1024 * 1024
	MaxItemBytes          = 400 * 1024
	MaxPartitionKeyBytes  = 2048
	MaxSortKeyBytes       = 1024
)

// ItemSize is an item's size the way DynamoDB bills and limits it ("Item sizes and formats",
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
// attribute names plus values, with DynamoDB's per-type overheads. Numbers are rounded up, so
// the estimate errs on the side of refusing an item DynamoDB might just accept. Commit checks
// every item against the 400 KB limit with it; WriteUnits and ReadUnits price it.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

// WriteUnits is DynamoDB's charge for writing an item of n bytes, a failed conditional write
// included: one unit per KB, rounded up, and two for a transactional write (its prepare and
// its commit; https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html).
func WriteUnits(n int, transactional bool) int {
	u := max(1, (n+1023)/1024)
	if transactional {
		u *= 2
	}
	return u
}

// ReadUnits is DynamoDB's charge for reading an item of n bytes (0: nothing found, charged as
// the smallest item): one unit per 4 KB, rounded up, when strongly consistent, and half of
// that when eventually consistent.
func ReadUnits(n int, consistent bool) float64 {
	u := float64(max(1, (n+4095)/4096))
	if !consistent {
		u /= 2
	}
	return u
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
	case *types.AttributeValueMemberSS:
		return sizeOf(v.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sizeOf(v.Value, numberSize)
	case *types.AttributeValueMemberBS:
		return sizeOf(v.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberL:
		// 3 bytes for the list, 1 per element.
		return 3 + sizeOf(v.Value, func(e types.AttributeValue) int { return 1 + valueSize(e) })
	case *types.AttributeValueMemberM:
		// 3 bytes for the map, 1 per element.
		return 3 + len(v.Value) + ItemSize(v.Value)
	}
	return 0
}

// sizeOf is the sum of size over a set's or a list's elements.
func sizeOf[T any](elems []T, size func(T) int) int {
	n := 0
	for _, e := range elems {
		n += size(e)
	}
	return n
}

// numberSize is 1 byte per two significant digits plus 1, as DynamoDB documents it.
func numberSize(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i] // the exponent costs nothing, even one DynamoDB would refuse (refused for that)
	}
	digits, _, ok := significand(s)
	if !ok {
		digits = s // not a number, which DynamoDB refuses: sized by its text, erring large
	}
	return (len(digits)+1)/2 + 1
}

// number is DynamoDB's number syntax: digits, an optional point and fraction, an exponent.
var number = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// checkValue is why DynamoDB would refuse v ("" for none), which it does with the whole request
// (a claim's transaction, and with it the read that tells a duplicate): a number it cannot
// hold (38 significant digits, a magnitude from 1E-130 to under 1E+126), an empty set, a set
// holding a member twice.
func checkValue(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberN:
		return checkNumber(v.Value)
	case *types.AttributeValueMemberNS:
		return checkSet(v.Value, canonicalNumber, checkNumber)
	case *types.AttributeValueMemberSS:
		return checkSet(v.Value, func(s string) string { return s }, nil)
	case *types.AttributeValueMemberBS:
		return checkSet(v.Value, func(b []byte) string { return string(b) }, nil)
	case *types.AttributeValueMemberL:
		for _, e := range v.Value {
			if why := checkValue(e); why != "" {
				return why
			}
		}
	case *types.AttributeValueMemberM:
		for _, e := range v.Value {
			if why := checkValue(e); why != "" {
				return why
			}
		}
	}
	return ""
}

func checkNumber(s string) string {
	digits, exp, ok := significand(s)
	switch magnitude := exp + len(digits) - 1; {
	case !ok || !number.MatchString(s):
		return fmt.Sprintf("%q is not a number", s)
	case len(digits) > 38:
		return fmt.Sprintf("%s has more than 38 significant digits", s)
	case digits != "" && (magnitude < -130 || magnitude > 125):
		return fmt.Sprintf("%s is outside DynamoDB's numbers (1E-130 to under 1E+126)", s)
	}
	return ""
}

// checkSet is why DynamoDB would refuse a set whose members are keyed by key (as it compares
// them), each checked by check (nil: none).
func checkSet[T any](members []T, key func(T) string, check func(T) string) string {
	if len(members) == 0 {
		return "is an empty set"
	}
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		if check != nil {
			if why := check(m); why != "" {
				return why
			}
		}
		if k := key(m); seen[k] {
			return fmt.Sprintf("is a set holding %q twice", k)
		} else {
			seen[k] = true
		}
	}
	return ""
}

// keyString returns the string value of a key attribute, and whether it is a non-empty string.
func keyString(item map[string]types.AttributeValue, name string) (string, bool) {
	s, ok := item[name].(*types.AttributeValueMemberS)
	if !ok || s.Value == "" {
		return "", false
	}
	return s.Value, true
}
