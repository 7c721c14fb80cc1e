// Package awstest connects tests to real AWS APIs: the local emulator that `make test`
// starts (localstack/up), or whatever AWS_ENDPOINT_URL names (LocalStack, moto, real AWS).
// It also holds the decorators tests wrap around the client: call counting, and HTTP transports
// that lose responses or inject DynamoDB errors below the SDK, so the SDK's own parsing and
// retries run for real.
package awstest

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// Config loads the AWS configuration tests use. AWS_ENDPOINT_URL must be set (make test sets
// it after starting the emulator): tests never fall back to a real account by accident. On a
// loopback endpoint without credentials in the environment, the emulator's dummy ones are used.
func Config(t testing.TB) aws.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a DynamoDB endpoint; skipped in -short mode")
	}
	endpoint := os.Getenv("AWS_ENDPOINT_URL")
	if endpoint == "" {
		t.Fatal("AWS_ENDPOINT_URL is not set: run `make test` (it starts the local emulator) or export AWS_ENDPOINT_URL")
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			// Short backoffs keep the failure tests quick; the attempts are the SDK default. No
			// client-side retry quota: concurrency tests with injected faults would exhaust it, and
			// what is under test is our handling, not the quota.
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxBackoff = 50 * time.Millisecond
				o.RateLimiter = ratelimit.None
			})
		}),
		// A buildable client, because the SDK adds AWS_CA_BUNDLE to it when that is set.
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns = 512
			tr.MaxIdleConnsPerHost = 512
		})),
	}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion("us-east-1"))
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && isLoopback(endpoint) {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), opts...)
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	return cfg
}

func isLoopback(endpoint string) bool {
	return slices.ContainsFunc([]string{"://127.", "://localhost", "://[::1]"}, func(h string) bool { return strings.Contains(endpoint, h) })
}

// Client returns a DynamoDB client for the test endpoint. optFns can swap the HTTP client.
func Client(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(Config(t), optFns...)
}

// Table creates a table with the project's schema under a unique name and deletes it when the
// test ends.
func Table(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	name := Name("oncehook-test-")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := dedup.EnsureTable(ctx, client, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// Items returns every item in table, by a paginated consistent scan.
func Items(t testing.TB, client *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		items = append(items, page.Items...)
	}
	return items
}

// Counter wraps a dedup.API and counts calls per operation.
type Counter struct {
	dedup.API
	mu    sync.Mutex
	calls map[string]int
}

// NewCounter wraps api.
func NewCounter(api dedup.API) *Counter { return &Counter{API: api, calls: map[string]int{}} }

func (c *Counter) add(op string) {
	c.mu.Lock()
	c.calls[op]++
	c.mu.Unlock()
}

// Calls returns the number of calls of op so far; Total, of all operations.
func (c *Counter) Calls(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// Total is the number of calls of every operation so far.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

// Reset sets every count back to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.calls = map[string]int{}
	c.mu.Unlock()
}

func (c *Counter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.add("PutItem")
	return c.API.PutItem(ctx, in, optFns...)
}

func (c *Counter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.add("TransactWriteItems")
	return c.API.TransactWriteItems(ctx, in, optFns...)
}

func (c *Counter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.add("BatchGetItem")
	return c.API.BatchGetItem(ctx, in, optFns...)
}

func (c *Counter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.add("GetItem")
	return c.API.GetItem(ctx, in, optFns...)
}
