package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/harness"
	"github.com/oncehook/oncehook/webhook"
)

// storm sends N generated order.paid events x K concurrent copies to a deployment, then
// checks that each event was accepted once, shipped once and (with -downstream) emailed once.
type stormFlags struct {
	events, copies, concurrency int
	downstream                  string
	wait                        time.Duration
	baseline                    int
}

func (f *stormFlags) define(fs *flag.FlagSet) {
	fs.IntVar(&f.events, "events", 1000, "distinct events")
	fs.IntVar(&f.copies, "copies", 4, "deliveries of each event, sent concurrently")
	fs.IntVar(&f.concurrency, "concurrency", 16, "deliveries in flight")
	fs.StringVar(&f.downstream, "downstream", "", "run the idempotent downstream here (127.0.0.1:8025 for the local stack) and check its calls")
	fs.DurationVar(&f.wait, "wait", time.Minute, "how long to wait for the outbox to finish")
	fs.IntVar(&f.baseline, "baseline", 0, "with -table: first time this many raw PutItems at the same concurrency, and report the storm's rate as a ratio of it")
}

func storm(ctx context.Context, c *cli, args []string) error {
	if len(args) != 2 {
		return errors.New("want [flags] <source> <url>")
	}
	source, url := args[0], args[1]
	f := c.storm
	sender, err := c.sender(ctx, source, url)
	if err != nil {
		return err
	}
	var down *harness.Downstream
	if f.downstream != "" {
		if down, err = harness.StartDownstream(f.downstream); err != nil {
			return err
		}
		defer down.Close()
	}
	run := fmt.Sprintf("storm%d", time.Now().Unix())
	var rawRate float64
	if f.baseline > 0 && c.table != "" {
		if rawRate, err = c.putRate(ctx, run, f.baseline, f.concurrency); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "baseline: %d raw PutItems at concurrency %d: %.0f/s\n", f.baseline, f.concurrency, rawRate)
	}
	all := make([]int, f.events)
	for i := range all {
		all[i] = i
	}
	total := f.events * f.copies
	step := max(total/10, 1)
	rep := harness.Storm(ctx, sender, harness.StormConfig{Run: run, Events: all, Copies: f.copies, Concurrency: f.concurrency,
		Progress: func(done int) {
			if done%step == 0 || done == total {
				fmt.Fprintf(c.stderr, "\rsent %d/%d", done, total)
			}
		}})
	fmt.Fprintf(c.stderr, "\n")
	fmt.Fprintf(c.stdout, "run %s: %d deliveries in %s (%.0f/s), p50 %s, p99 %s\n", run, rep.Sent, rep.Elapsed.Round(time.Millisecond),
		rep.PerSecond(), rep.Latency(0.5).Round(time.Millisecond), rep.Latency(0.99).Round(time.Millisecond))
	if rawRate > 0 {
		fmt.Fprintf(c.stdout, "throughput: %.2f of the raw PutItem rate\n", rep.PerSecond()/rawRate)
	}
	fmt.Fprintf(c.stdout, "accepted %d (want %d), duplicates %d (want %d), other statuses %v, transport errors %d\n",
		rep.Accepted, f.events, rep.Duplicates, total-f.events, rep.Statuses, rep.Errors)
	var problems []string
	if rep.Accepted != f.events || rep.Duplicates != total-f.events {
		problems = append(problems, "accepted/duplicate counts are off")
	}
	if c.table != "" {
		shipments, err := c.countPrefix(ctx, "ORDER#ord_"+run+"_")
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "shipments %d (want %d)\n", shipments, f.events)
		if shipments != f.events {
			problems = append(problems, "shipments != events")
		}
	}
	if down != nil {
		deadline := time.Now().Add(f.wait)
		keys, calls := down.Seen(source + ":msg_" + run + "_")
		for (keys != f.events || calls != f.events) && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			keys, calls = down.Seen(source + ":msg_" + run + "_")
		}
		fmt.Fprintf(c.stdout, "downstream: %d keys, %d calls (want %d and %d)\n", keys, calls, f.events, f.events)
		if keys != f.events || calls != f.events {
			problems = append(problems, "downstream calls != intents")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%v", problems)
	}
	fmt.Fprintln(c.stdout, "ok: every event accepted once, every effect once")
	return nil
}

// sender builds a harness.Sender for a source of the sources file, with its first secret.
func (c *cli) sender(ctx context.Context, source, url string) (*harness.Sender, error) {
	f, err := c.sources()
	if err != nil {
		return nil, err
	}
	src, ok := f.Sources[source]
	if !ok {
		return nil, fmt.Errorf("no source %q in %s", source, c.sourcesPath)
	}
	r, err := c.resolver(ctx)
	if err != nil {
		return nil, err
	}
	secrets, err := r.Resolve(ctx, src.Secrets[:1])
	if err != nil {
		return nil, err
	}
	opts := webhook.Options{Tolerance: time.Duration(src.TimestampTolerance)}
	if src.HMAC != nil {
		opts.Header, opts.Encoding, opts.Prefix = src.HMAC.Header, src.HMAC.Encoding, src.HMAC.Prefix
	}
	scheme, err := webhook.New(src.Scheme, opts)
	if err != nil {
		return nil, err
	}
	return &harness.Sender{URL: url, Scheme: scheme, Secret: secrets[0],
		Client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}, nil
}

// countPrefix counts the table's items whose pk starts with prefix (a filtered scan: an
// operator's check, not a hot path).
func (c *cli) countPrefix(ctx context.Context, prefix string) (int, error) {
	db, err := c.dynamo(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(c.table), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("begins_with(" + dedup.AttrPK + ", :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix}}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, err
		}
		n += len(page.Items)
	}
	return n, nil
}

// putRate times n unconditional PutItems of small items (expiring within the hour) at the
// given concurrency: the engine's raw write rate, for comparison with the whole stack's.
func (c *cli) putRate(ctx context.Context, run string, n, concurrency int) (float64, error) {
	db, err := c.dynamo(ctx)
	if err != nil {
		return 0, err
	}
	work := make(chan int)
	errs := make(chan error, concurrency)
	start := time.Now()
	for range max(concurrency, 1) {
		go func() {
			var first error
			for i := range work {
				_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(c.table), Item: map[string]types.AttributeValue{
					dedup.AttrPK:        &types.AttributeValueMemberS{Value: fmt.Sprintf("BASELINE#%s#%d", run, i)},
					dedup.AttrSK:        &types.AttributeValueMemberS{Value: "X"},
					dedup.AttrExpiresAt: &types.AttributeValueMemberN{Value: fmt.Sprint(time.Now().Add(time.Hour).Unix())},
				}})
				if err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	for range max(concurrency, 1) {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
