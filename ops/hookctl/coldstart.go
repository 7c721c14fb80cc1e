package main

// coldstart runs the receiver's built Lambda binary (dist/receiver/bootstrap) the way Lambda
// does, under a minimal Lambda Runtime API served on a loopback port, and times it.
//
// Each cold run execs a fresh process on a new Runtime API (runtimeapi.go), sends it a new
// order.paid, then a second one, and kills it: init is exec -> its first GET /next, first that
// GET -> the first event's response, warm the second event. -throughput storms warm processes
// on one Runtime API: the receiver's own throughput, without the emulator's API Gateway and
// Lambda layers (docs/measured.md).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/harness"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

const coldstartUsage = "coldstart [-table T] <bootstrap> [-runs N -secretsmanager NAME -throughput N -copies K -concurrency C -baseline B]"

type coldstartFlags struct {
	runs, throughput, copies, concurrency, baseline int
	secretsManager, source                          string
	timeout                                         time.Duration
}

func (f *coldstartFlags) define(fs *flag.FlagSet) {
	countFlag(fs, &f.runs, "runs", 10, 0, "cold starts, one fresh process each")
	fs.StringVar(&f.secretsManager, "secretsmanager", "", "read the signing secret from this Secrets Manager secret at init, as deployed (oncehook-local/shop for the local stack); default: an environment variable")
	fs.StringVar(&f.source, "source", "shop", "the source name the deliveries are POSTed to")
	fs.IntVar(&f.throughput, "throughput", 0, "then send this many events through warm processes")
	countFlag(fs, &f.copies, "copies", 4, 0, "with -throughput: deliveries of each event, sent concurrently")
	countFlag(fs, &f.concurrency, "concurrency", 16, 0, "with -throughput: warm processes (Lambda environments), one delivery in flight each")
	fs.IntVar(&f.baseline, "baseline", 0, "with -throughput: first time this many raw PutItems at the same concurrency")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "the most one invocation (or one init) may take")
}

func coldstart(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return errors.New("want <bootstrap> first (make build writes dist/receiver/bootstrap), then its flags")
	}
	bootstrap, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	if err := c.flags.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	f := c.coldstart
	if c.flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", c.flags.Args())
	}
	if err := c.needTable(" (the receiver writes its claims there)"); err != nil {
		return err
	}
	st, err := os.Stat(bootstrap)
	if err != nil {
		return err
	}
	fn, err := newColdFunction(ctx, c, bootstrap, f)
	if err != nil {
		return err
	}
	run := fmt.Sprintf("cold%d", time.Now().UnixMilli())
	fmt.Fprintf(c.stdout, "bootstrap %s: %.1f MB (%d bytes)\n", args[0], float64(st.Size())/(1<<20), st.Size())
	endpoint, _ := c.endpoint()
	fmt.Fprintf(c.stdout, "secret from %s; table %s; AWS_ENDPOINT_URL=%s\n", fn.secretFrom, c.table, cmp.Or(endpoint, "-"))
	fmt.Fprintf(c.stdout, "run %s\n", run)

	var cold []coldRun
	for i := range f.runs {
		r, err := fn.coldRun(ctx, run, i)
		if err != nil {
			return fmt.Errorf("cold start %d: %w", i+1, err)
		}
		cold = append(cold, r)
		fmt.Fprintf(c.stderr, "\rcold start %d/%d", i+1, f.runs)
	}
	if f.runs > 0 {
		fmt.Fprintln(c.stderr)
		w := c.stdout
		fmt.Fprintf(w, "%d cold starts, each: exec -> first event handled (a new order.paid: one TransactWriteItems)\n", len(cold))
		fmt.Fprintf(w, "  %-6s %9s %9s %9s %9s\n", "", "min", "p50", "p90", "max")
		row := func(name string, pick func(coldRun) time.Duration) {
			ds := make([]time.Duration, len(cold))
			for i, r := range cold {
				ds[i] = pick(r)
			}
			slices.Sort(ds)
			fmt.Fprintf(w, "  %-6s %9s %9s %9s %9s\n", name, ms(ds[0]), ms(quantile(ds, 0.5)), ms(quantile(ds, 0.9)), ms(ds[len(ds)-1]))
		}
		row("init", func(r coldRun) time.Duration { return r.init })
		row("first", func(r coldRun) time.Duration { return r.first })
		row("total", func(r coldRun) time.Duration { return r.init + r.first })
		row("warm", func(r coldRun) time.Duration { return r.warm })
		row("cpu", func(r coldRun) time.Duration { return r.cpu })
		fmt.Fprintf(w, "handled %d/%d first events (200, accepted)\n", len(cold), f.runs)
	}
	if f.throughput > 0 {
		return fn.throughputRun(ctx, c, run, f)
	}
	return nil
}

// coldFunction is what every process of one measurement gets: the binary, its environment,
// and the sender of its deliveries (its Client set per Runtime API: coldFunction.on).
type coldFunction struct {
	bootstrap, secretFrom string
	env                   []string
	sender                harness.Sender
	timeout               time.Duration
}

func newColdFunction(ctx context.Context, c *cli, bootstrap string, f coldstartFlags) (*coldFunction, error) {
	fn := &coldFunction{bootstrap: bootstrap, timeout: f.timeout}
	ref := sources.SecretRef{Env: "ONCEHOOK_COLDSTART_SECRET"}
	secret, err := freshSecret([]string{webhook.StandardWebhooks})
	if f.secretsManager != "" {
		ref = sources.SecretRef{SecretsManager: f.secretsManager}
		secret, err = c.secret(ctx, ref)
	}
	if err != nil {
		return nil, err
	}
	fn.secretFrom = ref.String()
	inline, err := json.Marshal(map[string]any{"sources": map[string]any{f.source: map[string]any{
		"scheme": webhook.StandardWebhooks, "secrets": []sources.SecretRef{ref},
		"retry_horizon": "72h", "redrive_window": "30d",
	}}})
	if err != nil {
		return nil, err
	}
	file, err := sources.Parse(inline)
	if err != nil {
		return nil, err
	}
	fn.sender = harness.Sender{URL: "http://lambda" + receiver.Path(f.source), Secret: secret, File: file, Source: f.source}
	vars := map[string]string{"TABLE_NAME": c.table, "ONCEHOOK_SOURCES": string(inline), "ONCEHOOK_SOURCES_FILE": "",
		"AWS_LAMBDA_RUNTIME_API": "", "_LAMBDA_SERVER_PORT": "", // the Runtime API is each process's own (runtimeAPI.start)
		"AWS_LAMBDA_FUNCTION_NAME": "oncehook-receiver-coldstart", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128"}
	if ref.Env != "" {
		vars[ref.Env] = secret
	}
	fn.env = setEnv(c.childEnv(), vars) // with the local stack's endpoint, when it is in use
	return fn, nil
}

// on is the sender whose deliveries api's processes handle, as API Gateway would hand them.
func (fn *coldFunction) on(api *runtimeAPI) *harness.Sender {
	s := fn.sender
	s.Client = &http.Client{Transport: api}
	return &s
}

type coldRun struct {
	init, first, warm, cpu time.Duration
}

// coldRun starts one fresh process on its own Runtime API and times its first two events.
func (fn *coldFunction) coldRun(ctx context.Context, run string, n int) (coldRun, error) {
	api, err := startRuntimeAPI(fn.timeout)
	if err != nil {
		return coldRun{}, err
	}
	defer api.close()
	p, err := api.start(fn.bootstrap, fn.env)
	if err != nil {
		return coldRun{}, err
	}
	defer p.stop()
	s := fn.on(api)
	var r coldRun
	for k := range 2 {
		id, body := harness.Order(run, 2*n+k)
		sent := time.Now()
		status, resp, err := s.Send(ctx, id, body, false)
		if err != nil {
			return coldRun{}, err
		}
		answered := time.Now()
		if status != http.StatusOK || harness.IsDuplicate(resp) {
			return coldRun{}, fmt.Errorf("the event was not handled as new: %d %s; its output:\n%s", status, bytes.TrimSpace(resp), p.out.tail())
		}
		if k == 0 {
			first := *api.first.Load()
			r.init, r.first = first.Sub(p.started), answered.Sub(first)
		} else {
			r.warm = answered.Sub(sent)
		}
	}
	p.stop()
	r.cpu = p.cpu()
	return r, nil
}

// throughputRun storms concurrency warm processes sharing one Runtime API with events x copies.
func (fn *coldFunction) throughputRun(ctx context.Context, c *cli, run string, f coldstartFlags) error {
	conc := max(f.concurrency, 1)
	rawRate, err := c.putRate(ctx, run, f.baseline, conc)
	if err != nil {
		return err
	}
	api, err := startRuntimeAPI(fn.timeout)
	if err != nil {
		return err
	}
	defer api.close()
	for range conc {
		p, err := api.start(fn.bootstrap, fn.env)
		if err != nil {
			return err
		}
		defer p.stop()
	}
	// Every process warm before the clock starts: the timed part is the receiver's work.
	deadline := time.Now().Add(fn.timeout)
	for api.polls.Load() < int64(conc) {
		if time.Now().After(deadline) {
			return api.failure(fmt.Sprintf("%d of %d processes reached /next within %s", api.polls.Load(), conc, fn.timeout))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Events start after the cold runs' ids (2 per run), so every event of this run is new.
	total := f.throughput * f.copies
	rep := harness.Storm(ctx, fn.on(api), harness.StormConfig{Run: run, Events: numbers(2*f.runs, f.throughput), Copies: f.copies, Concurrency: conc})
	fmt.Fprintf(c.stdout, "throughput: %d deliveries (%d events x %d copies) through %d warm processes in %s (%.0f/s), invoke p50 %s, p99 %s\n",
		rep.Sent, f.throughput, f.copies, conc, rep.Elapsed.Round(time.Millisecond), rep.PerSecond(), ms(rep.Latency(0.5)), ms(rep.Latency(0.99)))
	if rawRate > 0 {
		fmt.Fprintf(c.stdout, "the receiver alone: %.2f of the raw PutItem rate\n", rep.PerSecond()/rawRate)
	}
	fmt.Fprintf(c.stdout, "accepted %d (want %d), duplicates %d (want %d), other statuses %v, errors %d\n",
		rep.Accepted, f.throughput, rep.Duplicates, total-f.throughput, rep.Statuses, rep.Errors)
	if rep.Accepted != f.throughput || rep.Duplicates != total-f.throughput {
		return errors.New("accepted/duplicate counts are off")
	}
	return nil
}

// quantile returns the q-quantile (nearest rank) of sorted ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
