package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/ops/console"
	"github.com/oncehook/oncehook/sources"
)

// countingAPI counts the console's DynamoDB calls.
type countingAPI struct {
	console.API
	calls atomic.Int64
}

func (c *countingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.calls.Add(1)
	return c.API.GetItem(ctx, in, o...)
}

func (c *countingAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.calls.Add(1)
	return c.API.BatchGetItem(ctx, in, o...)
}

func (c *countingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.calls.Add(1)
	return c.API.Query(ctx, in, o...)
}

// The benchmark's table: CONSOLE_BENCH_CLAIMS claims (default 100,000), all done but 1 in
// 1,000 parked and 1 in 500 due, as a table looks after a busy week.
var (
	benchOnce  sync.Once
	benchTable string
)

func benchClaims() int {
	if n, err := strconv.Atoi(os.Getenv("CONSOLE_BENCH_CLAIMS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

func seed(b *testing.B, client *dynamodb.Client) string {
	benchOnce.Do(func() {
		benchTable = awstest.Table(b, client)
		n := benchClaims()
		now := time.Now()
		items := make(chan map[string]types.AttributeValue, 1000)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var batch []types.WriteRequest
				flush := func() {
					for len(batch) > 0 {
						out, err := client.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{benchTable: batch}})
						if err != nil {
							panic(err)
						}
						batch = out.UnprocessedItems[benchTable]
					}
				}
				for it := range items {
					batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
					if len(batch) == 25 {
						flush()
					}
				}
				flush()
			}()
		}
		for i := range n {
			id := fmt.Sprintf("evt_%07d", i)
			pk := dedup.ClaimKey("shop", id)
			status, shard := dedup.IntentDone, ""
			switch {
			case i%1000 == 7:
				status, shard = dedup.IntentParked, dedup.ParkedShardFor(dedup.PendingShard(pk))
			case i%500 == 3:
				status, shard = dedup.IntentPending, dedup.PendingShard(pk)
			}
			c := dedup.Claim{PK: pk, SK: dedup.ClaimSK, Source: "shop", EventID: id, EventType: "order.paid", ReceivedAt: now.Add(-time.Duration(n-i) * time.Second),
				PayloadSHA256: "00", PayloadBytes: 120, ExpiresAt: now.Add(30 * 24 * time.Hour).Unix(), CommitToken: "t" + id, Outcome: "accepted",
				Effects: []dedup.EffectKey{{PK: "ORDER#" + id, SK: "PAID"}},
				Intents: map[string]dedup.ClaimIntent{
					"email.send": {Target: "email", Payload: []byte(`{}`), Status: status, Attempts: 1, LastError: map[bool]string{true: "permanent: 422"}[status == dedup.IntentParked]},
					"crm.update": {Target: "crm", Payload: []byte(`{}`), Status: dedup.IntentDone, Attempts: 1},
				},
				PendingShard: shard}
			if shard != "" {
				c.PendingSince = now.Add(-time.Duration(n-i) * time.Second).UnixMilli()
			}
			item, err := attributevalue.MarshalMap(c)
			if err != nil {
				panic(err)
			}
			if shard == "" {
				delete(item, dedup.IndexPartitionKey)
				delete(item, dedup.IndexSortKey)
			}
			items <- item
		}
		close(items)
		wg.Wait()
	})
	return benchTable
}

// BenchmarkPages serves each page over a table of 100,000 claims on the emulator and reports
// the DynamoDB calls it made (calls/op) beside its time: every page is key lookups and
// queries of the pending index, so neither grows with the table.
//
//	cd ops && go test -run '^$' -bench Pages -benchtime 20x ./console/
func BenchmarkPages(b *testing.B) {
	client := awstest.Client(b)
	table := seed(b, client)
	file, err := sources.Parse([]byte(testSources))
	if err != nil {
		b.Fatal(err)
	}
	api := &countingAPI{API: client}
	h, err := console.New(console.Config{DynamoDB: api, Table: table, Sources: file, Token: testToken})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	n := benchClaims()
	for _, p := range []string{
		"/events/shop/evt_" + fmt.Sprintf("%07d", n/2),
		"/events?id=evt_" + fmt.Sprintf("%07d", n/3),
		"/events?source=shop",
		"/parked",
		"/backlog",
		"/",
		"/audit",
	} {
		get := func() (*http.Response, error) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+p, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			return http.DefaultClient.Do(req)
		}
		b.Run(p, func(b *testing.B) {
			if r, err := get(); err != nil || (r.StatusCode != http.StatusOK && r.StatusCode != http.StatusSeeOther) {
				b.Fatalf("%s: %v %v", p, r, err)
			}
			api.calls.Store(0)
			b.ResetTimer()
			for range b.N {
				r, err := get()
				if err != nil {
					b.Fatal(err)
				}
				r.Body.Close()
			}
			b.ReportMetric(float64(api.calls.Load())/float64(b.N), "calls/op")
		})
	}
}
