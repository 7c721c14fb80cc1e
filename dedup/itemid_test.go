package dedup

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// spellings returns ways of writing the number n/10^scale that DynamoDB takes for one number:
// "12", "12.0", "012", "1.2e1", "120E-1", "+12".
func spellings(r *rand.Rand, n int64) []string {
	s := fmt.Sprint(n)
	neg := ""
	if n < 0 {
		neg, s = "-", s[1:]
	}
	out := []string{neg + s, neg + s + ".0", neg + "0" + s, neg + s + "0E-1", neg + s[:1] + "." + s[1:] + "e" + fmt.Sprint(len(s)-1)}
	if neg == "" {
		out = append(out, "+"+s)
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestOneItemIsOneItemHoweverItsKeyIsWritten: the invariant is that no transaction touches an
// item twice (DynamoDB refuses such a transaction outright, and a batch that hits it is
// answered 500 on every redelivery). One item is one item under every spelling of a numeric
// key and under every name of its table (two logical names, a name and an ARN): within one
// plan, the second effect is refused naming it; across a batch's events, they go in separate
// transactions.
func TestOneItemIsOneItemHoweverItsKeyIsWritten(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:dynamodb:us-east-1:000000000000:table/app-orders"
	st, err := New(&scripted{}, Config{Table: "claims", Sources: map[string]Retention{"shop": {RetryHorizon: time.Hour, RedriveWindow: 24 * time.Hour}},
		Tables: map[string]TableKeys{
			"orders":     {Name: "app-orders", PartitionKey: "id"},
			"orders_arn": {Name: arn, PartitionKey: "id"},
			"orders_too": {Name: "app-orders", PartitionKey: "id"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"orders", "orders_arn", "orders_too"}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 21))
		n := r.Int64N(2_000_000) - 1_000_000
		sp := spellings(r, n)
		a, b := sp[0], sp[1]
		ta, tb := names[r.IntN(len(names))], names[r.IntN(len(names))]
		effect := func(table, num string) Effect {
			return PutEffect(map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: num}, "v": &types.AttributeValueMemberS{Value: "x"}}).In(table)
		}
		ev := func(id string) *Event {
			return &Event{Source: "shop", ID: id, Type: "t", Payload: []byte(`{}`)}
		}
		what := fmt.Sprintf("seed %d: %s in %s, %s in %s", seed, a, ta, b, tb)
		_, err := st.buildRequest(ev("e1"), &Plan{Effects: []Effect{effect(ta, a), effect(tb, b)}}, time.Hour, time.Now(), nil)
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != "effects[1]" {
			t.Fatalf("%s, in one plan: %v, want effects[1] refused as the same item", what, err)
		}
		r1, err := st.buildRequest(ev("e1"), &Plan{Effects: []Effect{effect(ta, a)}}, time.Hour, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := st.buildRequest(ev("e2"), &Plan{Effects: []Effect{effect(tb, b)}}, time.Hour, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if chunk := pack([]*request{r1, r2}, []int{0, 1}); len(chunk) != 1 {
			t.Fatalf("%s, two events: one transaction of %d events, want each in its own", what, len(chunk))
		}
		// Another number is another item: the two share a transaction.
		r3, err := st.buildRequest(ev("e3"), &Plan{Effects: []Effect{effect(tb, fmt.Sprint(n+1))}}, time.Hour, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if chunk := pack([]*request{r1, r3}, []int{0, 1}); len(chunk) != 2 {
			t.Fatalf("%s and %d: %d events in the transaction, want both", what, n+1, len(chunk))
		}
	}
}

// TestTheClaimsTableIsRefusedAsAnApplicationTableUnderEveryName: an application table that is
// the claims' own table, by name or by ARN (either side), would let an effect write under the
// reserved EVT# prefix.
func TestTheClaimsTableIsRefusedAsAnApplicationTableUnderEveryName(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:dynamodb:us-east-1:000000000000:table/claims"
	for _, c := range []struct{ table, other string }{
		{"claims", "claims"}, {"claims", arn}, {arn, "claims"}, {arn, arn},
		{"claims", "arn:aws:dynamodb:eu-west-1:111111111111:table/claims"},
	} {
		cfg := Config{Table: c.table, Sources: map[string]Retention{"shop": {RetryHorizon: time.Hour, RedriveWindow: 24 * time.Hour}},
			Tables: map[string]TableKeys{"app": {Name: c.other, PartitionKey: "pk"}}}
		cfg.setDefaults()
		var ie *InvalidError
		if err := cfg.Validate(); !errors.As(err, &ie) || !strings.HasPrefix(ie.Field, "tables.app") {
			t.Errorf("claims %q, application table %q: %v, want tables.app refused", c.table, c.other, err)
		}
	}
}
