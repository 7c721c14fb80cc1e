// Package launch starts oncehook's three Lambda functions from the process environment: the
// receiver with an application's planners, the outbox worker and the sweeper with its
// executors. A function's main.go is one call:
//
//	func main() { launch.Receiver(myapp.Register) }
//	func main() { launch.Outbox(myapp.Executors()) }
//	func main() { launch.Sweeper(myapp.Executors()) }
//
// Each reads the same environment (the stack sets it), refuses to start with an error naming
// the setting when it cannot work, and otherwise hands its handler to lambda.Start:
//
//	TABLE_NAME              the DynamoDB table (required)
//	ONCEHOOK_SOURCES        the sources file's JSON, inline; or
//	ONCEHOOK_SOURCES_FILE   its path (default: sources.json beside the binary)
//	ONCEHOOK_SOURCES_SHA256 the file's SHA-256, when the stack bundled it: any other file is refused
//	ONCEHOOK_BINDINGS       the names and ARNs of the file's bound tables and targets, as JSON
//	                        (sources.Bindings; the stack sets it from its bindings, resolved by
//	                        CloudFormation): a bound entry without one, a binding for an entry
//	                        the file does not bind, or a value that is not a name or ARN of its
//	                        kind refuses the start
//	ONCEHOOK_TARGETS        intent targets served by the application's own executors, comma-
//	                        separated: the outbox refuses to start without an executor for each,
//	                        and the receiver refuses a plan whose intent names a target that is
//	                        neither these nor a target of the sources file
//	ONCEHOOK_SECRETS_MAX_AGE receiver: how long a source's secrets are used before they are read
//	                        again (default 5m, at least 1m): the longest a secret revoked at its
//	                        store keeps verifying on a warm instance
//	ONCEHOOK_DUPLICATE_PROBE receiver: on (default) or off: the duplicate probe, which answers a
//	                        duplicate from a read of its claim while a source is in a redrive
//	                        (receiver.Config.NoDuplicateProbe)
//	LOG_LEVEL               debug, info (default), warn, error
//	METRICS_NAMESPACE       the CloudWatch namespace of the EMF metrics (default oncehook)
//	PENDING_SHARDS          the pending index's shard count (default 16)
//	LEASE_SECONDS           outbox, sweeper: lease length (default 60; at least every target's
//	                        timeout plus 5 s)
//	MAX_ATTEMPTS            outbox, sweeper: failed attempts before parking (default 10)
//	RETRY_QUEUE_URL         outbox, sweeper: the SQS queue that wakes retries at their due time
//	SWEEP_MIN_AGE_SECONDS   sweeper: claims younger than this are left alone (default 120)
//	AUDIT_PREFIXES          sweeper: partition-key prefixes of put-effect records, comma-
//	                        separated: each sweep then audits the next AUDIT_SAMPLE items
//	                        (default 100) for records written outside a claim (dedup.Auditor)
//	ONCEHOOK_TRUSTED_HOSTS  NewHTTPReceiver: the hosts whose Host header may stand for the URL a
//	                        URL-signing source (twilio, square) without a url was called at
//	OTEL_TRACES_EXPORTER    otlp turns OpenTelemetry tracing on, exporting OTLP over HTTP to
//	                        OTEL_EXPORTER_OTLP_ENDPOINT (default a collector on localhost:4318);
//	                        unset or none is off (package launch/tracing has the other OTEL_ variables)
//	ONCEHOOK_OTLP_HEADERS_SECRET, ONCEHOOK_OTLP_HEADERS_PARAMETER
//	                        the exporter's headers (an intake's key), read once at start from a
//	                        Secrets Manager secret or an SSM SecureString parameter, never logged
//	AWS_ENDPOINT_URL        an emulator's endpoint, for local runs
//
// NewReceiver, NewWorker and NewSweeper build the same things without starting them, for a
// program that serves them itself (the receiver as an http.Handler in a container, tests).
package launch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/launch/tracing"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// SecretRefresh is the least time between two re-reads of one source's secrets.
const SecretRefresh = time.Minute

// Env is what a function needs, built once per instance from the process environment.
type Env struct {
	AWS      aws.Config
	DynamoDB *dynamodb.Client
	Table    string
	Sources  *sources.File
	// Secrets is nil unless Needs.Secrets asked for it (the receiver only).
	Secrets *sources.Secrets
	Store   *dedup.Store
	Logger  *slog.Logger
	// PendingShards is the pending index's shard count (PENDING_SHARDS, default 16).
	PendingShards int
	// Targets are the intent targets the application's own executors serve (ONCEHOOK_TARGETS).
	Targets []string
	// Tracing is the functions' OpenTelemetry tracing (OTEL_TRACES_EXPORTER; tracing.FromEnv).
	Tracing *tracing.Tracing
}

// Needs says what a function needs beyond the table and the sources file.
type Needs struct {
	// Secrets resolves every source's signing secrets at start: the receiver only. The outbox
	// and the sweeper never verify a signature, and their roles may not read the secrets.
	Secrets bool
}

// Load builds the Env from the process environment. Its errors name the setting at fault.
func Load(ctx context.Context, needs Needs) (*Env, error) {
	logger := NewLogger(os.Getenv("LOG_LEVEL"))
	slog.SetDefault(logger)
	tr, err := tracing.FromEnv(ctx, logger, StoredOTLPHeaders)
	if err != nil {
		return nil, err
	}

	table := os.Getenv("TABLE_NAME")
	if table == "" {
		return nil, fmt.Errorf("TABLE_NAME is not set")
	}
	file, err := loadSources()
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	dbOpts, err := dynamoDBFaults(logger, os.Getenv("ONCEHOOK_FAULTS"))
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(cfg, dbOpts...)
	var secrets *sources.Secrets
	if needs.Secrets {
		maxAge := sources.DefaultMaxAge
		if v := os.Getenv("ONCEHOOK_SECRETS_MAX_AGE"); v != "" {
			if maxAge, err = sources.ParseDuration(v); err != nil || maxAge < SecretRefresh {
				return nil, fmt.Errorf("ONCEHOOK_SECRETS_MAX_AGE=%q: want a duration of at least %s (5m, 1h)", v, SecretRefresh)
			}
		}
		secrets, err = sources.NewSecrets(ctx, file, &sources.Resolver{
			SecretsManager: secretsmanager.NewFromConfig(cfg),
			SSM:            ssm.NewFromConfig(cfg),
		}, SecretRefresh, sources.MaxAge(maxAge))
		if err != nil {
			return nil, err
		}
	}
	shards, err := envInt("PENDING_SHARDS", dedup.PendingShards)
	if err != nil {
		return nil, err
	}
	store, err := dedup.New(db, dedup.Config{Table: table, Sources: file.Retentions(), Tables: file.DedupTables(), PendingShards: shards})
	if err != nil {
		return nil, err
	}
	targets, err := customTargets(os.Getenv("ONCEHOOK_TARGETS"))
	if err != nil {
		return nil, err
	}
	for _, name := range file.Names() {
		logger.Info("source configured", "source", name, "scheme", file.Sources[name].Scheme,
			"retention", file.Sources[name].Retention().String(), "replay_guard", file.Sources[name].ReplayGuard)
	}
	for _, w := range file.Warnings() {
		logger.Warn("sources file: "+w.Reason, "field", w.Field)
	}
	return &Env{AWS: cfg, DynamoDB: db, Table: table, Sources: file, Secrets: secrets, Store: store, Logger: logger,
		PendingShards: shards, Targets: targets, Tracing: tr}, nil
}

func customTargets(v string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if len(t) > dedup.MaxIntentTargetLen {
			return nil, fmt.Errorf("ONCEHOOK_TARGETS: %q is longer than %d bytes", t, dedup.MaxIntentTargetLen)
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func loadSources() (*sources.File, error) {
	f, err := readSources()
	if err != nil {
		return nil, err
	}
	// What the deployment resolved for the file's bound tables and targets.
	b, err := sources.ParseBindings([]byte(os.Getenv("ONCEHOOK_BINDINGS")))
	if err != nil {
		return nil, fmt.Errorf("ONCEHOOK_BINDINGS: %w", err)
	}
	if err := f.Bind(b); err != nil {
		return nil, fmt.Errorf("ONCEHOOK_BINDINGS: %w", err)
	}
	return f, nil
}

func readSources() (*sources.File, error) {
	if inline := os.Getenv("ONCEHOOK_SOURCES"); inline != "" {
		f, err := sources.Parse([]byte(inline))
		if err != nil {
			return nil, fmt.Errorf("ONCEHOOK_SOURCES: %w", err)
		}
		return f, nil
	}
	path := os.Getenv("ONCEHOOK_SOURCES_FILE")
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(filepath.Dir(exe), "sources.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	// The stack bundles the very file it derived the permissions from, and says so by its hash.
	if want := os.Getenv("ONCEHOOK_SOURCES_SHA256"); want != "" {
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != want {
			return nil, fmt.Errorf("sources: %s is not the file the stack was synthesized with (ONCEHOOK_SOURCES_SHA256): redeploy", path)
		}
	}
	f, err := sources.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("sources: %s: %w", path, err)
	}
	return f, nil
}

// NewLogger returns a JSON logger on stdout at the named level (info when empty or unknown),
// whose lines written under a span carry its trace_id and span_id (TraceLogs).
func NewLogger(level string) *slog.Logger {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	}
	return slog.New(TraceLogs(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: l})))
}

// HTTPExecutors builds the outbox's HTTP executors from the sources file's http targets.
func HTTPExecutors(f *sources.File) map[string]outbox.Executor {
	client := &http.Client{Transport: http.DefaultTransport}
	m := make(map[string]outbox.Executor, len(f.Targets))
	for name, t := range f.Targets {
		if t.Type == sources.TargetHTTP || t.Type == "" {
			m[name] = &outbox.HTTPExecutor{URL: t.URL, Client: client, Timeout: time.Duration(t.Timeout), Headers: t.Headers}
		}
	}
	return m
}

// TargetExecutors builds every built-in executor the sources file's targets name: HTTP, and
// the AWS services' (package outbox/targets), whose clients use cfg.
func TargetExecutors(f *sources.File, cfg aws.Config) map[string]outbox.Executor {
	m := HTTPExecutors(f)
	var (
		sqsc *sqs.Client
		snsc *sns.Client
		ebc  *eventbridge.Client
		sfnc *sfn.Client
		lamc *lambda.Client
	)
	for name, t := range f.Targets {
		timeout := time.Duration(t.Timeout)
		switch t.Type {
		case sources.TargetSQS:
			if sqsc == nil {
				sqsc = sqs.NewFromConfig(cfg)
			}
			m[name] = &targets.SQS{Client: sqsc, QueueURL: t.QueueURL(), GroupID: t.GroupID, Timeout: timeout}
		case sources.TargetSNS:
			if snsc == nil {
				snsc = sns.NewFromConfig(cfg)
			}
			m[name] = &targets.SNS{Client: snsc, TopicARN: t.ARN, GroupID: t.GroupID, Timeout: timeout}
		case sources.TargetEventBridge:
			if ebc == nil {
				ebc = eventbridge.NewFromConfig(cfg)
			}
			m[name] = &targets.EventBridge{Client: ebc, Bus: t.ARN, Source: t.Source, DetailType: t.DetailType, Timeout: timeout}
		case sources.TargetStepFunctions:
			if sfnc == nil {
				sfnc = sfn.NewFromConfig(cfg)
			}
			m[name] = &targets.StepFunctions{Client: sfnc, StateMachineARN: t.ARN, Timeout: timeout}
		case sources.TargetLambda:
			if lamc == nil {
				lamc = lambda.NewFromConfig(cfg)
			}
			m[name] = &targets.Lambda{Client: lamc, Function: t.ARN, Synchronous: t.Invocation == "request-response", Timeout: timeout}
		}
		if t.Delivery == sources.AtMostOnce {
			m[name] = outbox.AtMostOnce(m[name])
		}
	}
	return m
}

// KnownTargets is every intent target the deployment serves: the sources file's HTTP targets
// and the application's own (ONCEHOOK_TARGETS).
func (env *Env) KnownTargets() []string { return KnownTargets(env.Sources, env.Targets) }

// KnownTargets is the receiver's Config.Targets for a sources file and the targets the
// application's own executors serve, sorted: nil (any target) when there are none. The
// launched receiver and receivertest both take their targets from it.
func KnownTargets(f *sources.File, own []string) []string {
	var names []string
	for n := range f.Targets {
		names = append(names, n)
	}
	names = append(names, own...)
	slices.Sort(names)
	return slices.Compact(names)
}

// NewWorker builds the outbox worker the outbox and sweeper functions share: the sources
// file's HTTP targets plus executors (which may add targets or replace a built-in one), from
// LEASE_SECONDS, MAX_ATTEMPTS and RETRY_QUEUE_URL. An executor that replaces an at-most-once
// target of the file keeps its semantics: it is wrapped in outbox.AtMostOnce. Every target in ONCEHOOK_TARGETS must have
// an executor, or it refuses, naming the target.
func NewWorker(env *Env, executors map[string]outbox.Executor) (*outbox.Worker, error) {
	lease, err := envInt("LEASE_SECONDS", 60)
	if err != nil {
		return nil, err
	}
	attempts, err := envInt("MAX_ATTEMPTS", 10)
	if err != nil {
		return nil, err
	}
	if _, err := outbox.Bounds(executors); err != nil {
		return nil, err
	}
	all := TargetExecutors(env.Sources, env.AWS)
	for name, x := range executors {
		if t := env.Sources.Targets[name]; t != nil && t.Delivery == sources.AtMostOnce && !outbox.IsAtMostOnce(x) {
			// The sources file promises at most once for this target: an executor of the
			// application's replaces how it is called, never that promise.
			x = outbox.AtMostOnce(x)
			env.Logger.Info("the application's executor serves an at-most-once target: wrapped in outbox.AtMostOnce", "target", name)
		}
		all[name] = x
	}
	for _, t := range env.Targets {
		if all[t] == nil {
			return nil, fmt.Errorf("ONCEHOOK_TARGETS names %q, and no executor serves it: register one with launch.Outbox and launch.Sweeper", t)
		}
	}
	var sched outbox.Scheduler
	if url := os.Getenv("RETRY_QUEUE_URL"); url != "" {
		sched = &outbox.SQSScheduler{API: sqs.NewFromConfig(env.AWS), QueueURL: url}
	}
	w, err := outbox.New(env.DynamoDB, outbox.Config{
		Table:          env.Table,
		Executors:      all,
		Limits:         TargetLimits(env.Sources),
		Lease:          time.Duration(lease) * time.Second,
		MaxAttempts:    attempts,
		Scheduler:      sched,
		PendingShards:  env.PendingShards,
		Logger:         env.Logger,
		Metrics:        outbox.NewEMFMetrics(os.Stdout, os.Getenv("METRICS_NAMESPACE")),
		TracerProvider: env.Tracing.TracerProvider(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w (LEASE_SECONDS=%d)", err, lease)
	}
	return w, nil
}

// TargetLimits are the sources file's targets' max_in_flight and rate, as the worker enforces
// them across every invocation (outbox.Limit).
func TargetLimits(f *sources.File) map[string]outbox.Limit {
	limits := map[string]outbox.Limit{}
	for name, t := range f.Targets {
		if t.MaxInFlight > 0 || t.Rate > 0 {
			limits[name] = outbox.Limit{MaxInFlight: t.MaxInFlight, Rate: t.Rate}
		}
	}
	return limits
}

// NewSweeper builds the sweeper over NewWorker's worker, with SWEEP_MIN_AGE_SECONDS.
func NewSweeper(env *Env, executors map[string]outbox.Executor) (*outbox.Sweeper, error) {
	w, err := NewWorker(env, executors)
	if err != nil {
		return nil, err
	}
	minAge, err := envInt("SWEEP_MIN_AGE_SECONDS", 120)
	if err != nil {
		return nil, err
	}
	s := &outbox.Sweeper{Worker: w, MinAge: time.Duration(minAge) * time.Second}
	if prefixes := os.Getenv("AUDIT_PREFIXES"); prefixes != "" {
		sample, err := envInt("AUDIT_SAMPLE", 100)
		if err != nil {
			return nil, err
		}
		s.Audit = &dedup.Auditor{Client: env.DynamoDB, Table: env.Table, Prefixes: strings.Split(prefixes, ","), Sample: sample}
		if err := s.Audit.Validate(); err != nil {
			return nil, fmt.Errorf("AUDIT_PREFIXES, AUDIT_SAMPLE: %w", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(env.Sources.Tables)) {
		t := env.Sources.Tables[name]
		if !t.Audit {
			continue
		}
		sample, err := envInt("AUDIT_SAMPLE", 100)
		if err != nil {
			return nil, err
		}
		s.AuditTables = append(s.AuditTables, &dedup.Auditor{Client: env.DynamoDB, Table: env.Table, Sample: sample,
			Audited: t.PhysicalName(name), PartitionKey: t.PartitionKey, SortKey: t.SortKey})
	}
	return s, nil
}

// NewReceiver builds the receiver with the planners register adds, refusing (with the name)
// planners for a source the sources file does not have, and plans whose intents name a target
// the deployment does not serve (KnownTargets).
func NewReceiver(env *Env, register func(*receiver.Planners)) (*receiver.Handler, error) {
	return newReceiver(env, register, nil)
}

func newReceiver(env *Env, register func(*receiver.Planners), trusted []string) (*receiver.Handler, error) {
	if env.Secrets == nil {
		return nil, fmt.Errorf("launch: the receiver needs its secrets: Load with Needs{Secrets: true}")
	}
	noProbe, err := noDuplicateProbe()
	if err != nil {
		return nil, err
	}
	planners := receiver.NewPlanners()
	if register != nil {
		register(planners)
	}
	return receiver.New(receiver.Config{
		Sources:        env.Sources,
		Secrets:        env.Secrets,
		Store:          env.Store,
		Planners:       planners,
		Targets:        env.KnownTargets(),
		Logger:         env.Logger,
		Metrics:        os.Stdout,
		Namespace:      os.Getenv("METRICS_NAMESPACE"),
		TrustedHosts:   trusted,
		TracerProvider: env.Tracing.TracerProvider(),

		NoDuplicateProbe: noProbe,
	})
}

// noDuplicateProbe reads ONCEHOOK_DUPLICATE_PROBE: on (the default) or off.
func noDuplicateProbe() (bool, error) {
	switch v := os.Getenv("ONCEHOOK_DUPLICATE_PROBE"); v {
	case "", "on":
		return false, nil
	case "off":
		return true, nil
	default:
		return false, fmt.Errorf("ONCEHOOK_DUPLICATE_PROBE=%q: want on (the default) or off", v)
	}
}

// NewHTTPReceiver is NewReceiver for a program that serves the receiver over net/http (a
// container): it trusts the Host header of the hosts ONCEHOOK_TRUSTED_HOSTS lists (comma-
// separated) for the sources that sign the URL they call and set no url, and refuses to start
// (receiver.Handler.CheckHTTP) when such a source could not be verified.
func NewHTTPReceiver(env *Env, register func(*receiver.Planners)) (http.Handler, error) {
	var trusted []string
	for _, host := range strings.Split(os.Getenv("ONCEHOOK_TRUSTED_HOSTS"), ",") {
		if host = strings.TrimSpace(host); host != "" {
			trusted = append(trusted, host)
		}
	}
	h, err := newReceiver(env, register, trusted)
	if err != nil {
		return nil, err
	}
	if err := h.CheckHTTP(); err != nil {
		return nil, fmt.Errorf("launch: %w (ONCEHOOK_TRUSTED_HOSTS)", err)
	}
	return h, nil
}

// envInt reads a positive integer; unset means def, anything else is refused.
func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive whole number", name, v)
	}
	return n, nil
}
