// Command benchredrive measures what duplicates cost DynamoDB during a redrive: it sends -new
// new events through the receiver, then a redrive of -redrive deliveries, -duplicates of them
// copies of those events and the rest new, in a shuffled order, as a provider's redrive comes.
// It prints the DynamoDB calls by operation and the read and write units per delivery, new and
// duplicate, and each pass's wall time. `make bench-redrive` runs it.
//
// The receiver is built as the receiver function builds it (the fields launch.NewReceiver
// sets), with the reference application's planner (examples/orders) on the local stack's
// "shop" source (Standard Webhooks): each new event commits its claim, its shipment record and
// its email intent in one TransactWriteItems. Deliveries are signed by the source's scheme and
// handed to the handler in-process; its store writes to a fresh table, deleted afterwards, at
// AWS_ENDPOINT_URL (the AWS SDK's default endpoint when unset).
//
// Calls are counted by middleware on the real client; units are computed from DynamoDB's
// sizing rules on the items each request wrote or read (package capacity), since an emulator
// reports no capacity. Nothing asserts on time.
//
// Flags:
//
//	-new N          events delivered once, in the first pass (default 4000)
//	-redrive N      deliveries in the redrive (default 5000)
//	-duplicates N   of the redrive's deliveries, copies of first-pass events (default 4000)
//	-senders N      deliveries in flight at once (default 16)
//	-seed N         the redrive's order (default: random, printed)
//	-probe on|off   the receiver's duplicate probe (receiver.Config.NoDuplicateProbe; default:
//	                the receiver's own, on)
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
)

func main() {
	var cfg Config
	flag.IntVar(&cfg.New, "new", 4000, "events delivered once, in the first pass")
	flag.IntVar(&cfg.Redrive, "redrive", 5000, "deliveries in the redrive")
	flag.IntVar(&cfg.Duplicates, "duplicates", 4000, "of the redrive's deliveries, copies of first-pass events")
	flag.IntVar(&cfg.Senders, "senders", 16, "deliveries in flight at once")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "the redrive's order (0: random)")
	flag.StringVar(&cfg.Probe, "probe", "", "the receiver's duplicate probe: on or off (default: the receiver's own setting)")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "benchredrive:", err)
		os.Exit(1)
	}
}

func run(cfg Config) error {
	if err := cfg.validate(); err != nil { // before a table is made; Run checks it again
		return err
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConnsPerHost = 256 // one connection per sender, kept
	})))
	if err != nil {
		return err
	}
	table := fmt.Sprintf("oncehook-bench-%012x", rand.Uint64()>>16)
	admin := dynamodb.NewFromConfig(awsCfg)
	if err := dedup.EnsureTable(ctx, admin, table); err != nil {
		return err
	}
	defer admin.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	endpoint := cmp.Or(os.Getenv("AWS_ENDPOINT_URL"), "the AWS SDK's default endpoint")
	fmt.Printf("endpoint %s, table %s (deleted afterwards)\n", endpoint, table)
	r, err := Run(ctx, awsCfg, table, cfg)
	if err != nil {
		return err
	}
	r.Print(os.Stdout)
	for _, row := range r.Rows {
		want := "accepted"
		if row.Delivery == "duplicate" {
			want = "duplicate"
		}
		if row.Outcomes[want] != row.Deliveries {
			return fmt.Errorf("%s, %s deliveries: outcomes %v, want all %s", row.Pass, row.Delivery, row.Outcomes, want)
		}
	}
	return nil
}

// Print writes the report as a table.
func (r *Report) Print(w io.Writer) {
	probe := cmp.Or(r.Probe, "on (the receiver's default)")
	fmt.Fprintf(w, "%d new events, then a redrive of %d deliveries (%d duplicates, %d new) in a shuffled order (seed %d)\n",
		r.New, r.Redrive, r.Duplicates, r.Redrive-r.Duplicates, r.Seed)
	fmt.Fprintf(w, "receiver: examples/orders on %q (Standard Webhooks; claim + shipment + email intent), %d senders, probe: %s\n\n", source, r.Senders, probe)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "pass\tdelivery\tdeliveries\toutcomes\tTransactWriteItems\tPutItem\tGetItem\tother calls\trequests/delivery\twrite units/delivery\tread units/delivery\tlargest item\t")
	for _, row := range r.Rows {
		other := 0
		for op, n := range row.Calls {
			if op != "TransactWriteItems" && op != "PutItem" && op != "GetItem" {
				other += n
			}
		}
		tx := fmt.Sprint(row.Calls["TransactWriteItems"])
		if row.Cancelled > 0 {
			tx += fmt.Sprintf(" (%d cancelled)", row.Cancelled)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%d B\t\n", row.Pass, row.Delivery, row.Deliveries, outcomes(row.Outcomes),
			tx, row.Calls["PutItem"], row.Calls["GetItem"], other,
			per(float64(row.Requests), row.Deliveries), per(float64(row.WriteUnits), row.Deliveries), per(row.ReadUnits, row.Deliveries), row.Largest)
	}
	tw.Flush()
	rate := func(n int, d time.Duration) string {
		return fmt.Sprintf("%s (%.0f deliveries/s)", d.Round(10*time.Millisecond), float64(n)/d.Seconds())
	}
	fmt.Fprintf(w, "\nwall time: first pass %s, redrive %s\n", rate(r.New, r.First), rate(r.Redrive, r.Redo))
	for _, row := range r.Rows {
		if row.Unpriced > 0 || row.Unbilled > 0 {
			fmt.Fprintf(w, "%s, %s: %d calls of operations not priced here, %d failed calls not charged\n", row.Pass, row.Delivery, row.Unpriced, row.Unbilled)
		}
	}
}

func outcomes(m map[string]int) string {
	var s []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s = append(s, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(s, ", ")
}

func per(total float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", total/float64(n))
}
