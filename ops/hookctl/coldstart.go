package main

// coldstart runs the receiver's built Lambda binary (dist/receiver/bootstrap) the way Lambda
// does, under a minimal Lambda Runtime API served on a loopback port, and times it.
//
// Each cold run execs a fresh process with AWS_LAMBDA_RUNTIME_API pointing at a new server,
// hands its first GET .../invocation/next a signed API Gateway HTTP API (payload v2) delivery
// of a new order.paid event, then a second one, and kills the process. It reports:
//
//	init    exec -> the first GET /next (configuration, sources file, secrets, AWS clients)
//	first   that GET -> the POST .../response of the first event (the first commit)
//	total   exec -> that response: "process start to first event handled"
//	warm    the second event, on the now-warm process
//	cpu     the process's user + system CPU time over its life
//
// With -throughput N it then starts -concurrency warm processes on one shared Runtime API and
// sends N events x -copies concurrent copies through them: the receiver's own throughput on
// the emulator's DynamoDB, without the emulator's API Gateway and Lambda layers. -baseline B
// times B raw PutItems at the same concurrency first (the same baseline as storm -baseline).
//
// The Runtime API and the processes are internal/lambdart's.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/oncehook/oncehook/internal/harness"
	"github.com/oncehook/oncehook/internal/lambdart"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

const coldstartUsage = "coldstart [-table T] <bootstrap> [-runs N -secretsmanager NAME -throughput N -copies K -concurrency C -baseline B]"

const coldstartSecretEnv = "ONCEHOOK_COLDSTART_SECRET"

type coldstartFlags struct {
	runs, throughput, copies, concurrency, baseline int
	secretsManager, source                          string
	timeout                                         time.Duration
}

func coldstart(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return errors.New("want <bootstrap> first (make build writes dist/receiver/bootstrap), then its flags")
	}
	bootstrap, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	var f coldstartFlags
	fs := flag.NewFlagSet("coldstart", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.IntVar(&f.runs, "runs", 10, "cold starts, one fresh process each")
	fs.StringVar(&f.secretsManager, "secretsmanager", "", "read the signing secret from this Secrets Manager secret at init, as deployed (oncehook-local/shop for the local stack); default: an environment variable")
	fs.StringVar(&f.source, "source", "shop", "the source name the deliveries are POSTed to")
	fs.IntVar(&f.throughput, "throughput", 0, "then send this many events through warm processes")
	fs.IntVar(&f.copies, "copies", 4, "with -throughput: deliveries of each event, sent concurrently")
	fs.IntVar(&f.concurrency, "concurrency", 16, "with -throughput: warm processes (Lambda environments), one delivery in flight each")
	fs.IntVar(&f.baseline, "baseline", 0, "with -throughput: first time this many raw PutItems at the same concurrency")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "the most one invocation (or one init) may take")
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, "usage: hookctl "+coldstartUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.table == "" {
		return errors.New("no table: pass -table or set TABLE_NAME (the receiver writes its claims there)")
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
	fmt.Fprintf(c.stdout, "secret from %s; table %s; AWS_ENDPOINT_URL=%s\n", fn.secretFrom, c.table, orDash(endpoint))
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
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
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
// and how to sign its deliveries.
type coldFunction struct {
	bootstrap, table, source string
	env                      []string
	scheme                   webhook.Scheme
	secret, secretFrom       string
	timeout                  time.Duration
}

func newColdFunction(ctx context.Context, c *cli, bootstrap string, f coldstartFlags) (*coldFunction, error) {
	fn := &coldFunction{bootstrap: bootstrap, table: c.table, source: f.source, timeout: f.timeout}
	var ref sources.SecretRef
	if f.secretsManager != "" {
		ref = sources.SecretRef{SecretsManager: f.secretsManager}
		r, err := c.resolver(ctx)
		if err != nil {
			return nil, err
		}
		s, err := r.Resolve(ctx, []sources.SecretRef{ref})
		if err != nil {
			return nil, err
		}
		fn.secret = s[0]
	} else {
		ref = sources.SecretRef{Env: coldstartSecretEnv}
		var b [24]byte
		_, _ = rand.Read(b[:])
		fn.secret = "whsec_" + base64.StdEncoding.EncodeToString(b[:])
	}
	fn.secretFrom = ref.String()
	file := map[string]any{"sources": map[string]any{f.source: map[string]any{
		"scheme": "standard-webhooks", "secrets": []sources.SecretRef{ref},
		"retry_horizon": "72h", "redrive_window": "30d",
	}}}
	inline, err := json.Marshal(file)
	if err != nil {
		return nil, err
	}
	if _, err := sources.Parse(inline); err != nil {
		return nil, err
	}
	if fn.scheme, err = webhook.New("standard-webhooks", webhook.Options{}); err != nil {
		return nil, err
	}
	for _, kv := range c.childEnv() { // with the local stack's endpoint, when it is in use
		switch strings.SplitN(kv, "=", 2)[0] {
		case "ONCEHOOK_SOURCES_FILE", "ONCEHOOK_SOURCES", "TABLE_NAME", "AWS_LAMBDA_RUNTIME_API", "_LAMBDA_SERVER_PORT":
			continue
		}
		fn.env = append(fn.env, kv)
	}
	fn.env = append(fn.env, "TABLE_NAME="+c.table, "ONCEHOOK_SOURCES="+string(inline),
		"AWS_LAMBDA_FUNCTION_NAME=oncehook-receiver-coldstart", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128")
	if ref.Env != "" {
		fn.env = append(fn.env, ref.Env+"="+fn.secret)
	}
	return fn, nil
}

// event builds the API Gateway HTTP API event of one signed delivery of event i of run.
func (fn *coldFunction) event(run string, i, copy int) ([]byte, error) {
	id, body := harness.Order(run, i)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	if err := fn.scheme.Sign(h, body, fn.secret, id, time.Now()); err != nil {
		return nil, err
	}
	headers := map[string]string{}
	for k, v := range h {
		headers[strings.ToLower(k)] = v[0] // API Gateway lower-cases header names
	}
	path := "/hooks/" + fn.source
	return json.Marshal(events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST " + path, RawPath: path, Headers: headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: fmt.Sprintf("%s-%d-%d", run, i, copy), Stage: "$default", RouteKey: "POST " + path,
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
		},
		Body: string(body),
	})
}

type coldRun struct {
	init, first, warm, cpu time.Duration
}

// coldRun starts one fresh process on its own Runtime API and times its first two events.
func (fn *coldFunction) coldRun(ctx context.Context, run string, n int) (coldRun, error) {
	api, err := lambdart.Start()
	if err != nil {
		return coldRun{}, err
	}
	defer api.Close()
	var invs [2]*lambdart.Invocation
	for k := range invs {
		payload, err := fn.event(run, 2*n+k, 0)
		if err != nil {
			return coldRun{}, err
		}
		invs[k] = lambdart.NewInvocation(fmt.Sprintf("%s-%d-%d", run, n, k), payload)
	}
	p, err := lambdart.StartProcess(fn.bootstrap, fn.env, api.Addr)
	if err != nil {
		return coldRun{}, err
	}
	defer p.Stop()
	var r coldRun
	for k, inv := range invs {
		api.Queue <- inv
		if err := p.Await(ctx, inv, fn.timeout); err != nil {
			return coldRun{}, err
		}
		if err := accepted(inv); err != nil {
			return coldRun{}, fmt.Errorf("%w; its output:\n%s", err, p.Output())
		}
		if k == 0 {
			first := api.FirstPoll()
			r.init, r.first = first.Sub(p.Started), inv.Answered.Sub(first)
		} else {
			r.warm = inv.Answered.Sub(inv.Served)
		}
	}
	p.Stop()
	r.cpu = p.CPU()
	return r, nil
}

// throughputRun sends events x copies through concurrency warm processes sharing one Runtime API.
func (fn *coldFunction) throughputRun(ctx context.Context, c *cli, run string, f coldstartFlags) error {
	conc := max(f.concurrency, 1)
	var rawRate float64
	if f.baseline > 0 {
		var err error
		if rawRate, err = c.putRate(ctx, run, f.baseline, conc); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "baseline: %d raw PutItems at concurrency %d: %.0f/s\n", f.baseline, conc, rawRate)
	}
	api, err := lambdart.Start()
	if err != nil {
		return err
	}
	defer api.Close()
	procs := make([]*lambdart.Process, 0, conc)
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	for range conc {
		p, err := lambdart.StartProcess(fn.bootstrap, fn.env, api.Addr)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	deadline := time.Now().Add(fn.timeout)
	for api.Polls() < int64(conc) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d processes reached /next within %s; one's output:\n%s", api.Polls(), conc, fn.timeout, procs[0].Output())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Sign everything first, so the timed part is the receiver's work only. Events start
	// after the cold runs' ids (2 per run), so every event of this run is new.
	first := 2 * f.runs
	total := f.throughput * f.copies
	invs := make([]*lambdart.Invocation, 0, total)
	for i := range f.throughput {
		for k := range f.copies {
			payload, err := fn.event(run, first+i, k)
			if err != nil {
				return err
			}
			invs = append(invs, lambdart.NewInvocation(fmt.Sprintf("%s-w%d-%d", run, i, k), payload))
		}
	}
	start := time.Now()
	go func() {
		for _, inv := range invs {
			select {
			case api.Queue <- inv:
			case <-ctx.Done():
				return
			}
		}
	}()
	accepted, duplicates, other := 0, 0, map[int]int{}
	lat := make([]time.Duration, 0, total)
	for _, inv := range invs {
		select {
		case <-inv.Done:
		case <-time.After(fn.timeout):
			return fmt.Errorf("invocation %s: no response within %s", inv.ID, fn.timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
		lat = append(lat, inv.Answered.Sub(inv.Served))
		switch {
		case inv.Status == http.StatusOK && harness.IsDuplicate([]byte(inv.Body)):
			duplicates++
		case inv.Status == http.StatusOK:
			accepted++
		default:
			other[inv.Status]++
		}
	}
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	rate := float64(total) / elapsed.Seconds()
	fmt.Fprintf(c.stdout, "throughput: %d deliveries (%d events x %d copies) through %d warm processes in %s (%.0f/s), invoke p50 %s, p99 %s\n",
		total, f.throughput, f.copies, conc, elapsed.Round(time.Millisecond), rate, ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99)))
	if rawRate > 0 {
		fmt.Fprintf(c.stdout, "the receiver alone: %.2f of the raw PutItem rate\n", rate/rawRate)
	}
	fmt.Fprintf(c.stdout, "accepted %d (want %d), duplicates %d (want %d), other statuses %v\n", accepted, f.throughput, duplicates, total-f.throughput, other)
	if accepted != f.throughput || duplicates != total-f.throughput {
		return errors.New("accepted/duplicate counts are off")
	}
	return nil
}

// accepted checks that the function answered 200 and not duplicate.
func accepted(inv *lambdart.Invocation) error {
	if inv.Failed || inv.Status != http.StatusOK || harness.IsDuplicate([]byte(inv.Body)) {
		return fmt.Errorf("the event was not handled as new: %s", bytes.TrimSpace(inv.Raw))
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
