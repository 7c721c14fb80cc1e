package capacity

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestAnItemsSizeFollowsTheDocumentedRules checks ItemSize on an item worked out by hand.
func TestAnItemsSizeFollowsTheDocumentedRules(t *testing.T) {
	item := map[string]types.AttributeValue{
		"pk":       &types.AttributeValueMemberS{Value: "ORDER#ord_1"}, // 2 + 11 = 13
		"attempts": &types.AttributeValueMemberN{Value: "-1200.0"},     // 8 + (2 significant digits: 1 + 1) = 10
		"ok":       &types.AttributeValueMemberBOOL{Value: true},       // 2 + 1 = 3
		"intents": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{ // 7 + 3
			"a": &types.AttributeValueMemberS{Value: "xyz"}, // 1 + 1 + 3 = 5
		}},
		"tags": &types.AttributeValueMemberL{Value: []types.AttributeValue{ // 4 + 3
			&types.AttributeValueMemberB{Value: []byte{1, 2}}, // 1 + 2 = 3
		}},
	}
	if got, want := ItemSize(item), 13+10+3+(7+3+5)+(4+3+3); got != want {
		t.Fatalf("ItemSize %d, want %d by hand", got, want)
	}
}

// TestUnitsRoundUpPerKBForWritesAnd4KBForReads holds the unit arithmetic at its boundaries.
func TestUnitsRoundUpPerKBForWritesAnd4KBForReads(t *testing.T) {
	for _, c := range []struct {
		n             int
		transactional bool
		want          int
	}{{0, false, 1}, {1024, false, 1}, {1025, false, 2}, {300, true, 2}, {1025, true, 4}} {
		if got := WriteUnits(c.n, c.transactional); got != c.want {
			t.Errorf("WriteUnits(%d, %v) = %d, want %d", c.n, c.transactional, got, c.want)
		}
	}
	for _, c := range []struct {
		n          int
		consistent bool
		want       float64
	}{{0, false, 0.5}, {4096, false, 0.5}, {4097, false, 1}, {300, true, 1}, {4097, true, 2}} {
		if got := ReadUnits(c.n, c.consistent); got != c.want {
			t.Errorf("ReadUnits(%d, %v) = %v, want %v", c.n, c.consistent, got, c.want)
		}
	}
}
