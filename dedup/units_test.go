package dedup

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// documentedSize is an item's size by DynamoDB's published rules ("Item sizes and formats",
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html),
// written here apart from the code's own itemSize so that each checks the other: a name is its
// UTF-8 length; a string its UTF-8 length; a number 1 byte per 2 significant digits plus 1;
// binary its length; a boolean or null 1 byte; a list or map 3 bytes plus 1 per element plus
// the elements (a map's keys counted as names).
func documentedSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += utf8Len(k) + documentedValue(v)
	}
	return n
}

func utf8Len(s string) int { return len(s) } // Go strings are UTF-8 bytes already

func documentedValue(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return utf8Len(v.Value)
	case *types.AttributeValueMemberN:
		digits := strings.TrimLeft(strings.Replace(strings.TrimLeft(v.Value, "-"), ".", "", 1), "0")
		digits = strings.TrimRight(digits, "0")
		return (utf8.RuneCountInString(digits)+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + documentedValue(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + utf8Len(k) + documentedValue(e)
		}
		return n
	}
	panic("a type the claim does not use")
}

// TestTheSizeRulesWorkedByHand checks documentedSize on an item worked out by hand.
func TestTheSizeRulesWorkedByHand(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"pk":       &types.AttributeValueMemberS{Value: "ORDER#ord_1"}, // 2 + 11 = 13
		"attempts": &types.AttributeValueMemberN{Value: "1200"},        // 8 + (2 significant digits: 1 + 1) = 10
		"ok":       &types.AttributeValueMemberBOOL{Value: true},       // 2 + 1 = 3
		"intents": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{ // 7 + 3
			"a": &types.AttributeValueMemberS{Value: "xyz"}, // 1 + 1 + 3 = 5
		}},
	}
	if got, want := documentedSize(item), 13+10+3+(7+3+5); got != want {
		t.Fatalf("documentedSize %d, want %d by hand", got, want)
	}
	if ItemSize(item) < documentedSize(item) {
		t.Fatalf("the code's estimate %d is under DynamoDB's rule %d: it would let an item over the limit through", ItemSize(item), documentedSize(item))
	}
}

// TestANumberIsSizedByItsSignificantDigitsWhateverItsExponent: a number's size counts its
// significant digits only, its exponent left out, even an exponent DynamoDB would refuse (too
// large to read, or missing its digits): the item is refused for that, not for its size.
func TestANumberIsSizedByItsSignificantDigitsWhateverItsExponent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    string
		want int
	}{
		{"12e99999999999999999999", 1 + 2}, // "n", then 2 digits: 1 byte, plus 1
		{"-1200e", 1 + 2},
		{"1234e", 1 + 3},
		{"1.5e+-3", 1 + 2},
	} {
		if got := ItemSize(map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: c.n}}); got != c.want {
			t.Errorf("ItemSize of the number %q: %d, want %d", c.n, got, c.want)
		}
	}
}

// writeUnits is DynamoDB's on-demand charge for writing an item of n bytes: one write unit per
// KB, rounded up; transactional writes cost two per KB.
func writeUnits(n int, transactional bool) int {
	u := (n + 1023) / 1024
	if transactional {
		u *= 2
	}
	return u
}

// TestWriteUnitsPerEvent computes, from DynamoDB's published sizing rules (documentedSize, not
// the code's own estimate), the write units one new event costs on each path for the sample
// event (2 KB payload hashed, not stored), next to the claim/complete baseline. MiniStack does
// not report consumed capacity, so these are computed, not read back (README, Measured). An
// update effect is charged on the item after the update; here that item holds only its key and
// the updated attributes. Run with -v to print them.
func TestWriteUnitsPerEvent(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	ev := sampleEvent(make([]byte, 2048))
	now := time.Now()

	putPlan := &Plan{Intents: samplePlan().Intents}
	put, err := st.buildRequest(ev, putPlan, 47*day, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	fast := writeUnits(documentedSize(put.claim), false)

	tx, err := st.buildRequest(ev, samplePlan(), 47*day, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	txUnits := writeUnits(documentedSize(tx.claim), true)
	for _, a := range tx.effects {
		if a.Put != nil {
			txUnits += writeUnits(documentedSize(a.Put.Item), true)
		} else {
			txUnits += writeUnits(documentedSize(a.Update.Key)+documentedSize(a.Update.ExpressionAttributeValues), true)
		}
	}
	effects := 0
	for _, a := range tx.effects {
		if a.Put != nil {
			effects += writeUnits(documentedSize(a.Put.Item), false)
		} else {
			effects += writeUnits(documentedSize(a.Update.Key)+documentedSize(a.Update.ExpressionAttributeValues), false)
		}
	}
	// The baseline writes a small INPROGRESS record, updates it to COMPLETED (each at least one
	// unit) and writes the same effects without a transaction, and keeps its outbox elsewhere.
	baseline := 1 + 1 + effects

	t.Logf("claim + 2 intents, PutItem:                    %d write unit(s)", fast)
	t.Logf("claim + 3 effects + 2 intents, transaction:    %d write units", txUnits)
	t.Logf("claim/complete baseline, same effects, no transaction, no outbox: %d write units", baseline)
	if fast != 1 || txUnits != 8 || baseline != 5 {
		t.Fatalf("write units changed: fast %d, transaction %d, baseline %d; update the README", fast, txUnits, baseline)
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

// TestHistoryEntryBytesIsTheLongestEntry: the longest entry an intent's history can hold, a
// late attempt's with a six-digit count, a code and an error cut to HistoryErrorBytes (an
// operator's, with who, is shorter), is HistoryEntryBytes in the list that holds it.
func TestHistoryEntryBytesIsTheLongestEntry(t *testing.T) {
	t.Parallel()
	c := &Claims{Now: func() time.Time { return time.Date(2286, 11, 20, 17, 46, 39, 999e6, time.UTC) }} // 13 digits
	attempt := Attempt{Attempt: 999_999, Outcome: IntentParked, Code: 599, Error: strings.Repeat("x", 600), Late: true}
	operator := Attempt{Attempt: 999_999, Outcome: AttemptRedriven, By: strings.Repeat("b", MaxRedrivenBy)}
	for _, a := range []Attempt{attempt, operator} {
		list := c.history(ClaimIntent{}, a).(*types.AttributeValueMemberL)
		if n := documentedValue(list) - 3; n > HistoryEntryBytes || (a == attempt && n != HistoryEntryBytes) {
			t.Fatalf("%s's entry is %d bytes, HistoryEntryBytes is %d", a.Outcome, n, HistoryEntryBytes)
		}
	}
}

// TestEveryNumberDynamoDBHoldsIsAccepted: the check of a number refuses only what DynamoDB
// refuses, so a plan with a number it holds is never refused. Generated numbers in every form
// the SDK and hand-written items use (attributevalue's float and integer formatting, a point
// with no digits after it or before it, a signed exponent, leading and trailing zeros), across
// DynamoDB's whole range, are accepted; one of 39 digits, or past the range, is not.
func TestEveryNumberDynamoDBHoldsIsAccepted(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	digits := func(n int) string {
		b := []byte{byte('1' + r.IntN(9))}
		for range n - 1 {
			b = append(b, byte('0'+r.IntN(10)))
		}
		return string(b)
	}
	for range 5000 {
		d := digits(1 + r.IntN(38))
		magnitude := -130 + r.IntN(256) // of the first digit: 1E-130 to 9.99E+125
		exp := magnitude - (len(d) - 1)
		sign := []string{"", "-", "+"}[r.IntN(3)]
		forms := []string{
			sign + d + "e" + strconv.Itoa(exp),
			sign + d[:1] + "." + d[1:] + "E" + fmt.Sprintf("%+d", magnitude),
			sign + "000" + d + "0e" + strconv.Itoa(exp-1),
		}
		if len(d) == 1 {
			forms = append(forms, sign+d+".e"+strconv.Itoa(exp), sign+"."+d+"e"+strconv.Itoa(exp+1))
		}
		if magnitude >= 0 && magnitude < 40 {
			forms = append(forms, sign+d+strings.Repeat("0", max(0, exp)))
		}
		for _, n := range forms {
			if why := checkNumber(n); why != "" {
				t.Fatalf("%s (magnitude %d): refused: %s", n, magnitude, why)
			}
		}
		if len(d) == 38 && checkNumber(d+"1") == "" {
			t.Fatalf("%s1: 39 significant digits accepted", d)
		}
	}
	for _, f := range []float64{0, 1, -1, 0.1, 1e-130, 9.99e125, 123456.789, -2.5e-7, 1 << 53} {
		if n := strconv.FormatFloat(f, 'g', -1, 64); checkNumber(n) != "" {
			t.Errorf("%s, as attributevalue writes a float: refused", n)
		}
	}
	for _, n := range []string{"1e126", "-1e126", "1e-131", "9.99e-131", "10e125", "0.1e-130"} {
		if checkNumber(n) == "" {
			t.Errorf("%s: accepted, outside DynamoDB's numbers", n)
		}
	}
}
