package faults

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

func TestParse(t *testing.T) {
	spec, err := Parse(" dynamodb.throttle=0.05, dynamodb.error=0.02,dynamodb.lose=0.01,dynamodb.PutItem.lose=0.5," +
		"downstream.error=0.1,downstream.throttle=0.05,downstream.timeout=0.02,downstream.lose=0.03,seed=7")
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{
		DynamoDB:   Rates{Throttle: 0.05, Error: 0.02, Lose: 0.01},
		Ops:        map[string]Rates{"PutItem": {Lose: 0.5}},
		Downstream: Rates{Error: 0.1, Throttle: 0.05, Timeout: 0.02, Lose: 0.03},
		Seed:       7,
	}
	if !reflect.DeepEqual(spec, want) || spec.Rates("PutItem") != (Rates{Lose: 0.5}) || spec.Rates("GetItem") != want.DynamoDB {
		t.Fatalf("got %+v\nwant %+v", spec, want)
	}
	// Literal strings: String is what storm hands the functions, so a field it dropped would
	// inject nothing, silently.
	const all = "dynamodb.throttle=0.05,dynamodb.error=0.02,dynamodb.lose=0.01,dynamodb.PutItem.lose=0.5," +
		"downstream.throttle=0.05,downstream.error=0.1,downstream.lose=0.03,downstream.timeout=0.02,seed=7"
	if got := spec.String(); got != all {
		t.Fatalf("String:\n got %q\nwant %q", got, all)
	}
	const functions = "dynamodb.throttle=0.05,dynamodb.error=0.02,dynamodb.lose=0.01,dynamodb.PutItem.lose=0.5,seed=7"
	if got := spec.OnlyDynamoDB().String(); got != functions {
		t.Fatalf("OnlyDynamoDB:\n got %q\nwant %q", got, functions)
	}
	if got := (Spec{Ops: map[string]Rates{"TransactWriteItems": {Throttle: 0.3}}}).String(); got != "dynamodb.TransactWriteItems.throttle=0.3" {
		t.Fatalf("per-operation rates alone: %q", got)
	}
	if got := spec.OnlyDynamoDB(); !got.Downstream.Zero() || !got.DynamoDBOn() {
		t.Fatalf("OnlyDynamoDB: %+v", got)
	}
	if off, err := Parse(""); err != nil || off.DynamoDBOn() || !off.Downstream.Zero() || off.String() != "" {
		t.Fatalf("empty: %+v %v", off, err)
	}
	if s, _ := Parse("downstream.error=0.1"); s.DynamoDBOn() {
		t.Fatal("downstream faults alone turned DynamoDB faults on")
	}
}

func TestParseNamesTheBadField(t *testing.T) {
	for spec, field := range map[string]string{
		"dynamodb.throtle=0.1":                       `"dynamodb.throtle": unknown field`,
		"dynamodb.throttle=1.5":                      `"dynamodb.throttle": "1.5" is not a probability`,
		"dynamodb.error=-0.1":                        `"dynamodb.error"`,
		"dynamodb.lose=lots":                         `"dynamodb.lose"`,
		"dynamodb.throttle":                          `"dynamodb.throttle": want field=value`,
		"dynamodb.PutThing.lose=0.1":                 `unknown DynamoDB operation "PutThing"`,
		"dynamodb.timeout=0.1":                       `"dynamodb.timeout": timeout is a downstream fault`,
		"dynamodb.throttle=0.6,dynamodb.error=0.6":   `"dynamodb": the dynamodb probabilities add up to more than 1`,
		"downstream.timeout=0.7,downstream.lose=0.7": `"downstream"`,
		"seed=-1":   `"seed"`,
		"s3.lose=1": `"s3.lose": unknown field`,
	} {
		if _, err := Parse(spec); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Parse(%q) = %v, want an error containing %s", spec, err, field)
		}
	}
}

func TestPick(t *testing.T) {
	r := Rates{Throttle: 0.1, Error: 0.2, Lose: 0.3, Timeout: 0.1}
	for u, want := range map[float64]Kind{0: Throttle, 0.099: Throttle, 0.1: Error, 0.29: Error, 0.31: Lose, 0.59: Lose, 0.61: Timeout, 0.69: Timeout, 0.71: None, 0.999: None} {
		if got := r.Pick(u); got != want {
			t.Errorf("Pick(%v) = %q, want %q", u, got, want)
		}
	}
	if (Rates{}).Pick(0) != None {
		t.Error("zero rates picked a fault")
	}
}

func TestDiceIsReproducible(t *testing.T) {
	a, b := NewDice(42), NewDice(42)
	for range 100 {
		if x, y := a.Float64(), b.Float64(); x != y || x < 0 || x >= 1 {
			t.Fatalf("%v %v", x, y)
		}
	}
	// The same seed gives the same faults: about 30% of 10,000 draws, exactly reproducibly.
	count := func() (n int) {
		d := NewDice(7)
		for range 10000 {
			if (Rates{Error: 0.3}).Pick(d.Float64()) == Error {
				n++
			}
		}
		return n
	}
	if n, m := count(), count(); n != m || n < 2700 || n > 3300 {
		t.Fatalf("%d and %d errors in 10,000 draws at 0.3", n, m)
	}
}

// engine is a stand-in DynamoDB that applies every request it receives (and counts them).
type engine struct {
	mu      sync.Mutex
	applied map[string]int
}

func (e *engine) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	e.mu.Lock()
	if e.applied == nil {
		e.applied = map[string]int{}
	}
	e.applied[Operation(r)]++
	e.mu.Unlock()
	_ = b
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(bytes.NewBufferString(`{}`)), Request: r}, nil
}

func (e *engine) count(op string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applied[op]
}

// seq returns the draws in order, then 0.99 (no fault) forever.
func seq(draws ...float64) func() float64 {
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		if len(draws) == 0 {
			return 0.99
		}
		u := draws[0]
		draws = draws[1:]
		return u
	}
}

func client(rt http.RoundTripper, attempts int) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://engine.invalid"),
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
		HTTPClient:   &http.Client{Transport: rt},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = attempts
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		}),
	})
}

func put(c *dynamodb.Client) error {
	_, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("t"),
		Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}})
	return err
}

func TestTheSDKReadsInjectedErrorsAsDynamoDBs(t *testing.T) {
	eng := &engine{}
	rates := Rates{Throttle: 0.2, Error: 0.1, Lose: 0.1}
	var mu sync.Mutex
	counts := map[Kind]int{}
	tr := &Transport{Next: eng, Spec: Spec{DynamoDB: rates}, OnFault: func(op string, k Kind) {
		mu.Lock()
		defer mu.Unlock()
		if op == "PutItem" {
			counts[k]++
		}
	}}
	c := client(tr, 1) // no retries: each call shows its own fault
	cases := []struct {
		u    float64
		want func(error) bool
		what string
	}{
		{0.05, func(err error) bool { var e *types.ProvisionedThroughputExceededException; return errors.As(err, &e) }, "ProvisionedThroughputExceededException"},
		{0.15, func(err error) bool {
			var e smithy.APIError
			return errors.As(err, &e) && e.ErrorCode() == "ThrottlingException"
		}, "ThrottlingException"},
		{0.25, func(err error) bool { var e *types.InternalServerError; return errors.As(err, &e) }, "InternalServerError"},
		{0.35, func(err error) bool { return err != nil && strings.Contains(err.Error(), "connection reset") }, "a connection reset"},
		{0.5, func(err error) bool { return err == nil }, "success"},
	}
	for _, c2 := range cases {
		tr.Rand = seq(c2.u)
		before := eng.count("PutItem")
		err := put(c)
		if !c2.want(err) {
			t.Errorf("draw %v: got %v, want %s", c2.u, err, c2.what)
		}
		reached := eng.count("PutItem") - before
		if wantReached := map[bool]int{true: 1, false: 0}[c2.u >= 0.3]; reached != wantReached {
			t.Errorf("draw %v: the engine saw %d requests, want %d", c2.u, reached, wantReached)
		}
	}
	if got := counts; got[Throttle] != 2 || got[Error] != 1 || got[Lose] != 1 {
		t.Fatalf("counts %v", got)
	}
}

func TestTheSDKRetriesInjectedFaults(t *testing.T) {
	eng := &engine{}
	tr := &Transport{Next: eng, Spec: Spec{DynamoDB: Rates{Throttle: 0.2, Error: 0.1, Lose: 0.1}}}
	// A throttle, an error, then a lost response: the fourth attempt succeeds, and the engine
	// applied the request twice (the lost one and the last), as DynamoDB would have.
	tr.Rand = seq(0.1, 0.25, 0.35, 0.9)
	if err := put(client(tr, 4)); err != nil {
		t.Fatal(err)
	}
	if n := eng.count("PutItem"); n != 2 {
		t.Fatalf("the engine saw %d PutItems, want 2", n)
	}
}

func TestOperationsWithoutFaultsPassThrough(t *testing.T) {
	eng := &engine{}
	tr := &Transport{Next: eng, Spec: Spec{Ops: map[string]Rates{"GetItem": {Error: 1}}}, Rand: seq(0)}
	if err := put(client(tr, 1)); err != nil {
		t.Fatalf("PutItem has no faults configured: %v", err)
	}
	_, err := client(tr, 1).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}})
	var ise *types.InternalServerError
	if !errors.As(err, &ise) || eng.count("GetItem") != 0 {
		t.Fatalf("GetItem: %v, engine saw %d", err, eng.count("GetItem"))
	}
}
