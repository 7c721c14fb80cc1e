package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/harness"
)

// backfill imports already-processed event ids, one per line ("id" or "id<TAB>RFC 3339 time
// it was processed"), before dedup is switched on.
func backfill(ctx context.Context, c *cli, args []string) error {
	if len(args) != 2 {
		return errors.New("want <source> <file>")
	}
	f, err := c.sources()
	if err != nil {
		return err
	}
	db, err := c.dynamo(ctx)
	if err != nil {
		return err
	}
	store, err := dedup.New(db, dedup.Config{Table: c.table, Sources: f.Retentions()})
	if err != nil {
		return err
	}
	wrote, kept := 0, 0
	err = eachLine(args[1], func(line int, text string) error {
		id, at, _ := strings.Cut(text, "\t")
		processed := time.Now()
		if at != "" {
			if processed, err = time.Parse(time.RFC3339, at); err != nil {
				return fmt.Errorf("line %d: processed time %q is not RFC 3339", line, at)
			}
		}
		ok, err := store.Backfill(ctx, args[0], id, processed)
		if err != nil {
			return fmt.Errorf("line %d (%s): %w", line, id, err)
		}
		if ok {
			wrote++
		} else {
			kept++
		}
		if (wrote+kept)%1000 == 0 {
			fmt.Fprintf(c.stderr, "\r%d lines", wrote+kept)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "backfilled %d claims; %d already claimed or past their retention\n", wrote, kept)
	return nil
}

// replay sends deliveries from a JSON-lines file ({"id": ..., "body": {...}}), rate-limited,
// optionally several copies each and shuffled: a provider's redrive, simulated.
func replay(ctx context.Context, c *cli, args []string) error {
	if len(args) == 2 { // no url: the local stack's
		args = []string{args[0], "", args[1]}
	}
	if len(args) != 3 {
		return errors.New("want <source> [url] <file.jsonl>")
	}
	sender, err := c.sender(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	type delivery struct {
		ID   string          `json:"id"`
		Body json.RawMessage `json:"body"`
	}
	var all []delivery
	err = eachLine(args[2], func(n int, line string) error {
		var d delivery
		if err := json.Unmarshal([]byte(line), &d); err != nil || len(d.Body) == 0 {
			return fmt.Errorf("line %d: want {\"id\": ..., \"body\": {...}}", n)
		}
		for range c.replay.copies {
			all = append(all, d)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if c.replay.shuffle {
		rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	}
	tick := time.NewTicker(time.Second / time.Duration(c.replay.rate)) // -rate is 1 to 1e9: the interval is never 0
	defer tick.Stop()
	// One worker, paced by the ticker: the storm's counting, at the replay's rate.
	rep := harness.Storm(ctx, sender, harness.StormConfig{Events: numbers(0, len(all)), Concurrency: 1, Progress: c.progress(len(all)),
		Event: func(_ string, i int) (string, []byte) {
			<-tick.C
			return all[i].ID, all[i].Body
		}})
	fmt.Fprintf(c.stderr, "\n")
	others := map[string]int{}
	for status, n := range rep.Statuses {
		others[fmt.Sprint(status)] = n
	}
	if rep.Errors > 0 {
		others["error"] = rep.Errors
	}
	fmt.Fprintf(c.stdout, "sent %d: accepted %d, duplicate %d, other %v\n", len(all), rep.Accepted, rep.Duplicates, others)
	return nil
}

// audit samples the effect records under -prefix and reports those that no claim wrote
// (claimed_by missing: written outside oncehook, the leak the design card warns about) and
// those whose claim is gone (expired, which is normal for old records, or deleted).
func audit(ctx context.Context, c *cli, args []string) error {
	if len(args) != 0 {
		return errors.New("takes no arguments")
	}
	db, err := c.dynamo(ctx)
	if err != nil {
		return err
	}
	// As dedup.Auditor: only put effects stamp claimed_by (an update effect's record has none,
	// written through its claim all the same), so only records a prefix names as put effects'
	// are judged, and never the claims'.
	if err := (&dedup.Auditor{Prefixes: []string{c.audit.prefix}}).Validate(); err != nil {
		return fmt.Errorf("-prefix %q: want the partition-key prefix of records only put effects write (ORDER#, SHIPMENT#), clear of the claims' %s", c.audit.prefix, dedup.ClaimPrefix)
	}
	filter := expression.Not(expression.Name(dedup.PartitionKey).BeginsWith(dedup.ClaimPrefix)).And(expression.Name(dedup.PartitionKey).BeginsWith(c.audit.prefix))
	sampled, unclaimed, gone := 0, 0, 0
	for item, err := range c.scan(ctx, db, filter, false) {
		if err != nil {
			return err
		}
		if sampled >= c.audit.sample {
			break
		}
		sampled++
		pk := item[dedup.PartitionKey].(*types.AttributeValueMemberS).Value
		by, ok := item[dedup.ClaimedByAttribute].(*types.AttributeValueMemberS)
		if !ok {
			unclaimed++
			fmt.Fprintf(c.stdout, "LEAK  %s: no claimed_by (written outside oncehook)\n", printable(pk))
			continue
		}
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.table), Key: dedup.ClaimItemKey(by.Value),
			ProjectionExpression: aws.String(dedup.PartitionKey)})
		if err != nil {
			return err
		}
		if out.Item == nil {
			gone++
			fmt.Fprintf(c.stdout, "GONE  %s: its claim %s no longer exists (expired, or deleted)\n", printable(pk), printable(by.Value))
		}
	}
	fmt.Fprintf(c.stdout, "sampled %d effect records: %d without a claim (leaks), %d whose claim is gone\n", sampled, unclaimed, gone)
	if unclaimed > 0 {
		return fmt.Errorf("%d effect records were not written through a claim", unclaimed)
	}
	return nil
}

type replayFlags struct {
	rate, copies int
	shuffle      bool
}

type auditFlags struct {
	prefix string
	sample int
}

// eachLine calls fn with each line of the file at path, trimmed, and its number, but for blank
// lines and # comments.
func eachLine(path string, fn func(n int, line string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 6<<20) // a replayed delivery is a whole body on one line
	for n := 1; sc.Scan(); n++ {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			if err := fn(n, line); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}
