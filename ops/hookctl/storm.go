package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/internal/harness"
	"github.com/oncehook/oncehook/sources"
)

type stormFlags struct {
	events, copies, concurrency int
	downstream                  string
	wait                        time.Duration
	baseline                    int
	faults                      string
	retries                     int
	sweep, latency              time.Duration
	template, eventType         string
}

func (f *stormFlags) define(fs *flag.FlagSet) {
	countFlag(fs, &f.events, "events", 1000, 0, "distinct events")
	fs.StringVar(&f.template, "template", "", "a file holding the event body as a Go text/template: {{.ID}} (the event's id; put it where the\n"+
		"source reads its id from the body, if it does), {{.Run}}, {{.N}}, {{.Time}}. Default: the reference application's order.paid")
	fs.StringVar(&f.eventType, "type", "", "the event type, for a source that reads it from a header (GitHub's X-GitHub-Event)")
	countFlag(fs, &f.copies, "copies", 4, 0, "deliveries of each event, sent concurrently")
	countFlag(fs, &f.concurrency, "concurrency", 16, 0, "deliveries in flight")
	fs.StringVar(&f.downstream, "downstream", "", "run the idempotent downstream here (127.0.0.1:8025 for the local stack) and check its calls")
	fs.DurationVar(&f.wait, "wait", time.Minute, "how long to wait for the outbox to finish")
	fs.IntVar(&f.baseline, "baseline", 0, "with -table: first time this many raw PutItems at the same concurrency, and report the storm's rate as a ratio of it")
	fs.StringVar(&f.faults, "faults", "", "inject faults for the run (emulator only; restored after). Comma-separated field=probability:\n"+
		"dynamodb.throttle, dynamodb.error, dynamodb.lose (the functions' DynamoDB calls: a throttling 400, an\n"+
		"InternalServerError 500, or applied with the answer lost; dynamodb.<Operation>.<kind> for one operation),\n"+
		"set as "+faults.Env+" on the deployed functions (found by -table) for the run;\n"+
		"downstream.error, downstream.throttle, downstream.timeout, downstream.lose, downstream.reject (the -downstream\n"+
		"server: 500, 429, no answer until the caller times out, applied then 500, a permanent 422); seed=N for\n"+
		"reproducible draws. The run fails unless every fault asked of the functions was injected (counted in their logs).\n"+
		"e.g. dynamodb.throttle=0.05,dynamodb.error=0.02,dynamodb.lose=0.01,downstream.error=0.1")
	fs.IntVar(&f.retries, "retries", 10, "send a delivery answered 503 again, after its Retry-After (at most 1s), up to this many times, as a provider would")
	fs.DurationVar(&f.latency, "downstream-latency", 0, "with -downstream: each call takes this long to answer (a slow downstream, which sets the outbox's pace)")
	fs.DurationVar(&f.sweep, "sweep", 0, "with -table: while waiting for the outbox, invoke the sweeper every D instead of waiting for its\n"+
		"2-minute schedule, with its minimum claim age lowered to D for the run (retries after downstream faults)")
}

// storm sends N generated order.paid events x K concurrent copies to a deployment, then
// checks that each event was accepted once, shipped once and (with -downstream) emailed once.
func storm(ctx context.Context, c *cli, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return errors.New("want [flags] <source> [url]")
	}
	source := args[0]
	f := c.storm
	spec, err := faults.Parse(f.faults)
	if err != nil {
		return fmt.Errorf("-faults: %w", err)
	}
	if (spec.DynamoDBOn() || f.sweep > 0) && c.table == "" {
		return errors.New("-faults with dynamodb faults and -sweep need -table (the deployed functions are found by their table)")
	}
	if endpoint, _ := c.endpoint(); spec.DynamoDBOn() && endpoint == "" {
		return errors.New("-faults: DynamoDB faults are injected into the deployed functions, and only on an emulator (AWS_ENDPOINT_URL is not set)")
	}
	if !spec.Downstream.Zero() && f.downstream == "" {
		return errors.New("-faults: downstream faults need -downstream (they are the harness downstream's)")
	}
	sender, err := c.sender(ctx, source, strings.Join(args[1:], ""))
	if err != nil {
		return err
	}
	sender.Type = f.eventType
	event := harness.Order
	if f.template != "" {
		text, err := os.ReadFile(f.template)
		if err != nil {
			return fmt.Errorf("-template: %w", err)
		}
		tpl, err := template.New("event").Option("missingkey=error").Parse(string(text))
		if err != nil {
			return fmt.Errorf("-template: %w", err)
		}
		event = func(run string, i int) (string, []byte) {
			id := harness.EventID(run, i)
			var b bytes.Buffer
			_ = tpl.Execute(&b, struct {
				ID, Run, Time string
				N             int
			}{id, run, time.Now().UTC().Format(time.RFC3339), i})
			return id, b.Bytes()
		}
	}
	var down *harness.Downstream
	if f.downstream != "" {
		if down, err = harness.StartDownstream(f.downstream); err != nil {
			return err
		}
		defer down.Close()
		if !spec.Downstream.Zero() {
			down.SetFaults(spec.Downstream, faults.NewDice(spec.Seed).Float64)
		}
		down.SetLatency(f.latency)
	}
	// Interrupted or not, the functions get their environment back.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var dep *harness.Deployment
	if spec.DynamoDBOn() || f.sweep > 0 {
		cfg, err := c.config(ctx)
		if err != nil {
			return err
		}
		if dep, err = harness.FindDeployment(ctx, lambda.NewFromConfig(cfg), c.table); err != nil {
			return err
		}
		vars := map[string]map[string]string{}
		for _, role := range harness.Roles {
			vars[role] = map[string]string{}
			if spec.DynamoDBOn() {
				vars[role][faults.Env] = spec.OnlyDynamoDB().String()
			}
		}
		if f.sweep > 0 {
			vars["sweeper"]["SWEEP_MIN_AGE_SECONDS"] = strconv.Itoa(max(int(f.sweep.Seconds()), 1))
		}
		restore, err := dep.SetEnv(ctx, vars)
		defer func() {
			if err := restore(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintln(c.stderr, "hookctl storm:", err)
			} else {
				fmt.Fprintln(c.stderr, "functions' environment restored")
			}
		}()
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "faults on for the run: functions %q, downstream %q\n", spec.OnlyDynamoDB().String(), (faults.Spec{Downstream: spec.Downstream}).String())
	}
	run := fmt.Sprintf("storm%d", time.Now().Unix())
	started := time.Now()
	var rawRate float64
	if c.table != "" {
		if rawRate, err = c.putRate(ctx, run, f.baseline, f.concurrency); err != nil {
			return err
		}
	}
	total := f.events * f.copies
	idPrefix := harness.IDPrefix(sender.File.Sources[source], run)
	keyPrefix := source + ":" + idPrefix // the intents' idempotency keys
	rep := harness.Storm(ctx, sender, harness.StormConfig{Run: run, Events: numbers(0, f.events), Event: event, Copies: f.copies,
		Concurrency: f.concurrency, Retries: f.retries, Progress: c.progress(total)})
	fmt.Fprintf(c.stderr, "\n")
	fmt.Fprintf(c.stdout, "run %s: %d deliveries in %s (%.0f/s), p50 %s, p99 %s\n", run, rep.Sent, rep.Elapsed.Round(time.Millisecond),
		rep.PerSecond(), rep.Latency(0.5).Round(time.Millisecond), rep.Latency(0.99).Round(time.Millisecond))
	if rawRate > 0 {
		fmt.Fprintf(c.stdout, "throughput: %.2f of the raw PutItem rate\n", rep.PerSecond()/rawRate)
	}
	fmt.Fprintf(c.stdout, "accepted %d (want %d), duplicates %d (want %d), 503s retried %d, other final statuses %v, transport errors %d\n",
		rep.Accepted, f.events, rep.Duplicates, total-f.events, rep.Retried, rep.Statuses, rep.Errors)
	problems := harness.AnswerProblems(rep, f.events, total)
	if len(problems) == 0 && rep.Accepted < f.events {
		fmt.Fprintf(c.stdout, "(%d events were answered 503 after their write had landed, so their redelivery was a duplicate)\n", f.events-rep.Accepted)
	}
	if c.table != "" {
		if f.template == "" { // the reference application writes one shipment per order
			db, err := c.dynamo(ctx)
			if err != nil {
				return err
			}
			shipments := 0
			for _, err := range c.scan(ctx, db, expression.Name(dedup.PartitionKey).BeginsWith("ORDER#ord_"+run+"_"), true) {
				if err != nil {
					return err
				}
				shipments++
			}
			fmt.Fprintf(c.stdout, "shipments %d (want %d)\n", shipments, f.events)
			if shipments != f.events {
				problems = append(problems, "shipments != events")
			}
		}
		problems = append(problems, c.verifyIntents(ctx, dedup.ClaimKey(source, idPrefix), keyPrefix, dep, down, spec, started)...)
	} else if down != nil {
		deadline := time.Now().Add(f.wait)
		keys, calls := down.Seen(keyPrefix)
		for (keys != f.events || calls != f.events) && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			keys, calls = down.Seen(keyPrefix)
		}
		fmt.Fprintf(c.stdout, "downstream: %d keys, %d calls (want %d and %d)\n", keys, calls, f.events, f.events)
		if keys != f.events || calls != f.events {
			problems = append(problems, "downstream calls != intents")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%v", problems)
	}
	fmt.Fprintln(c.stdout, "ok: every event accepted once, every effect once, every intent done (or parked where the run asked for it)")
	return nil
}

// verifyIntents waits (up to -wait, sweeping every -sweep) until no claim under prefix has an
// open intent, then returns what is wrong with the end state for what the run asked for
// (harness.CheckOutbox, and with DynamoDB faults, that each kind asked for was injected).
func (c *cli) verifyIntents(ctx context.Context, prefix, keyPrefix string, dep *harness.Deployment, down *harness.Downstream, spec faults.Spec, started time.Time) []string {
	f := c.storm
	db, err := c.dynamo(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	start := time.Now()
	lastSweep := time.Now()
	sweeps, sweepErrs := 0, 0
	unfinished, err := harness.WaitFinished(ctx, db, c.table, prefix, f.wait, func() {
		if dep != nil && f.sweep > 0 && time.Since(lastSweep) >= f.sweep {
			lastSweep = time.Now()
			sweeps++
			if err := dep.Sweep(ctx); err != nil {
				sweepErrs++
			}
		}
	})
	if err != nil {
		return []string{"waiting for the outbox: " + err.Error()}
	}
	t, err := harness.TallyClaims(ctx, db, c.table, prefix)
	if err != nil {
		return []string{"reading the claims: " + err.Error()}
	}
	done, parked := t.Intents[dedup.IntentDone], t.Intents[dedup.IntentParked]
	fmt.Fprintf(c.stdout, "outbox settled in %s (%d sweeps invoked, %d failed): claims %d, intents done %d, parked %d, pending %d, running %d, attempts %d (want %d claims, %d intents)\n",
		time.Since(start).Round(100*time.Millisecond), sweeps, sweepErrs, t.Claims, done, parked, t.Intents[dedup.IntentPending], t.Intents[dedup.IntentRunning],
		t.Attempts, f.events, f.events)
	if down != nil {
		fmt.Fprintf(c.stdout, "downstream rate: at most %d calls in any second, %d in any 5 seconds\n", down.MostIn(time.Second), down.MostIn(5*time.Second))
	}
	var problems []string
	if unfinished > 0 {
		problems = append(problems, fmt.Sprintf("%d claims still have unfinished intents after %s", unfinished, f.wait))
	}
	exp := harness.Expect{Events: f.events, Downstream: spec.Downstream}
	if spec.DynamoDBOn() && dep != nil {
		cfg, err := c.config(ctx)
		if err != nil {
			return append(problems, err.Error())
		}
		if exp.DynamoDB, err = dep.InjectedFaults(ctx, cloudwatchlogs.NewFromConfig(cfg), started); err != nil {
			return append(problems, "counting the injected faults: "+err.Error())
		}
		fmt.Fprintf(c.stdout, "faults the functions injected: %v\n", exp.DynamoDB)
		problems = append(problems, harness.MissingFaults(spec, exp.DynamoDB)...)
	}
	if down != nil {
		st := down.Stats(keyPrefix)
		fmt.Fprintf(c.stdout, "downstream: %d keys applied (%d intents done), %d calls in all, %d repeats of an applied key answered by its idempotency, injected %v\n",
			st.Applied, done, st.Calls, st.Repeats, st.Injected)
	}
	return append(problems, harness.CheckOutbox(exp, t, down, keyPrefix)...)
}

// progress prints on stderr how many of total deliveries were sent, at each tenth and the last.
func (c *cli) progress(total int) func(done int) {
	step := max(total/10, 1)
	return func(done int) {
		if done%step == 0 || done == total {
			fmt.Fprintf(c.stderr, "\rsent %d/%d", done, total)
		}
	}
}

// numbers is the n numbers from from on: the events of a storm.
func numbers(from, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = from + i
	}
	return s
}

// sender builds a harness.Sender for a source of the sources file, with its first secret, to
// url (the local stack's URL for the source when url is "").
func (c *cli) sender(ctx context.Context, source, url string) (*harness.Sender, error) {
	f, url, err := c.target(source, url)
	if err != nil {
		return nil, err
	}
	src := f.Sources[source]
	if sources.PublicKeyScheme(src.Scheme) {
		// discord, sendgrid: the provider signs with a private key the operator does not hold.
		return nil, fmt.Errorf("source %q verifies with the provider's public keys: storm and replay sign with shared secrets (hookctl send -key signs one delivery)", source)
	}
	secret, err := c.signingSecret(ctx, src, source, sendFlags{})
	if err != nil {
		return nil, err
	}
	return &harness.Sender{URL: url, Secret: secret, File: f, Source: source, // signed as the provider signs (File)
		Client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}, nil
}

// putRate times n unconditional PutItems of small items (expiring within the hour) at the
// given concurrency, and says so: the engine's raw write rate, for comparison with the whole
// stack's. No PutItem (n 0) is a rate of 0.
func (c *cli) putRate(ctx context.Context, run string, n, concurrency int) (float64, error) {
	if n <= 0 {
		return 0, nil
	}
	db, err := c.dynamo(ctx)
	if err != nil {
		return 0, err
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var failed error
	var once sync.Once
	start := time.Now()
	for range max(concurrency, 1) {
		wg.Go(func() {
			for i := range work {
				_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(c.table), Item: map[string]types.AttributeValue{
					dedup.PartitionKey: &types.AttributeValueMemberS{Value: fmt.Sprintf("BASELINE#%s#%d", run, i)},
					dedup.SortKey:      &types.AttributeValueMemberS{Value: "X"},
					dedup.TTLAttribute: &types.AttributeValueMemberN{Value: fmt.Sprint(time.Now().Add(time.Hour).Unix())},
				}})
				if err != nil {
					once.Do(func() { failed = err })
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if failed != nil {
		return 0, failed
	}
	rate := float64(n) / time.Since(start).Seconds()
	fmt.Fprintf(c.stdout, "baseline: %d raw PutItems at concurrency %d: %.0f/s\n", n, concurrency, rate)
	return rate, nil
}
