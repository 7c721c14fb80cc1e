// Package launch starts oncehook's three Lambda functions from the process environment: the
// receiver with an application's planners, the outbox worker and the sweeper with its
// executors. A function's main.go is one call:
//
//	func main() { launch.Receiver(myapp.Register) }
//	func main() { launch.Outbox(myapp.Executors()) }
//	func main() { launch.Sweeper(myapp.Executors()) }
//
// Each reads the deployment's settings (deployment.FromEnv), refuses to start with an error
// naming a setting that cannot work, and hands its handler to lambda.Start. Tracing is
// OpenTelemetry's, from its OTEL_ variables (package launch/tracing). NewReceiver, NewWorker and
// NewSweeper build the same without starting them (a container, tests).
package launch

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
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
	"github.com/oncehook/oncehook/deployment"
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
	// Settings are the deployment's settings, read once from the environment.
	Settings deployment.Settings
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
	settings, err := deployment.FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	logger := NewLogger(settings.LogLevel)
	slog.SetDefault(logger)
	tr, err := tracing.FromEnv(ctx, logger, StoredOTLPHeaders)
	if err != nil {
		return nil, err
	}
	file, err := loadSources(settings)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	dbOpts, err := dynamoDBFaults(logger, settings.Faults)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(cfg, dbOpts...)
	var secrets *sources.Secrets
	if needs.Secrets {
		secrets, err = sources.NewSecrets(ctx, file, &sources.Resolver{
			SecretsManager: secretsmanager.NewFromConfig(cfg),
			SSM:            ssm.NewFromConfig(cfg),
		}, SecretRefresh, sources.MaxAge(settings.SecretsMaxAge))
		if err != nil {
			return nil, err
		}
	}
	store, err := dedup.New(db, dedup.Config{Table: settings.Table, Sources: file.Retentions(), Tables: file.DedupTables(), PendingShards: settings.PendingShards})
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
	return &Env{AWS: cfg, DynamoDB: db, Table: settings.Table, Sources: file, Secrets: secrets, Store: store, Logger: logger,
		Settings: settings, Tracing: tr}, nil
}

func loadSources(s deployment.Settings) (*sources.File, error) {
	f, err := readSources(s)
	if err != nil {
		return nil, err
	}
	// What the deployment resolved for the file's bound tables and targets.
	b, err := sources.ParseBindings([]byte(s.Bindings))
	if err != nil {
		return nil, fmt.Errorf("ONCEHOOK_BINDINGS: %w", err)
	}
	if err := f.Bind(b); err != nil {
		return nil, fmt.Errorf("ONCEHOOK_BINDINGS: %w", err)
	}
	return f, s.CheckFile(f)
}

func readSources(s deployment.Settings) (*sources.File, error) {
	if s.Sources != "" {
		f, err := sources.Parse([]byte(s.Sources))
		if err != nil {
			return nil, fmt.Errorf("ONCEHOOK_SOURCES: %w", err)
		}
		return f, nil
	}
	path := s.SourcesFile
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(filepath.Dir(exe), deployment.BundledSources)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	// The stack bundles the very file it derived the permissions from, and says so by its hash.
	if s.SourcesSHA256 != "" {
		if deployment.SourcesSum(b) != s.SourcesSHA256 {
			return nil, fmt.Errorf("sources: %s is not the file the stack was synthesized with (ONCEHOOK_SOURCES_SHA256): redeploy", path)
		}
	}
	f, err := sources.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("sources: %s: %w", path, err)
	}
	return f, nil
}

// NewLogger returns a JSON logger on stdout at the named level (slog's names, in any case; info
// when empty or unknown), whose lines written under a span carry its trace_id and span_id
// (TraceLogs).
func NewLogger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // left at info when it fails: deployment.Check names the value
	return slog.New(TraceLogs(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: l})))
}

// TargetExecutors builds every built-in executor the sources file's targets name: HTTP, and
// the AWS services' (package outbox/targets), whose clients use cfg and are built only for the
// services named.
func TargetExecutors(f *sources.File, cfg aws.Config) map[string]outbox.Executor {
	sqsc := sync.OnceValue(func() *sqs.Client { return sqs.NewFromConfig(cfg) })
	snsc := sync.OnceValue(func() *sns.Client { return sns.NewFromConfig(cfg) })
	ebc := sync.OnceValue(func() *eventbridge.Client { return eventbridge.NewFromConfig(cfg) })
	sfnc := sync.OnceValue(func() *sfn.Client { return sfn.NewFromConfig(cfg) })
	lamc := sync.OnceValue(func() *lambda.Client { return lambda.NewFromConfig(cfg) })
	client := &http.Client{Transport: http.DefaultTransport}
	m := make(map[string]outbox.Executor, len(f.Targets))
	for name, t := range f.Targets {
		timeout := time.Duration(t.Timeout)
		switch t.Type {
		case sources.TargetHTTP, "":
			m[name] = &outbox.HTTPExecutor{URL: t.URL, Client: client, Timeout: timeout, Headers: t.Headers}
		case sources.TargetSQS:
			m[name] = &targets.SQS{Client: sqsc(), QueueURL: t.QueueURL(), GroupID: t.GroupID, Timeout: timeout}
		case sources.TargetSNS:
			m[name] = &targets.SNS{Client: snsc(), TopicARN: t.ARN, GroupID: t.GroupID, Timeout: timeout}
		case sources.TargetEventBridge:
			m[name] = &targets.EventBridge{Client: ebc(), Bus: t.ARN, Source: t.Source, DetailType: t.DetailType, Timeout: timeout}
		case sources.TargetStepFunctions:
			m[name] = &targets.StepFunctions{Client: sfnc(), StateMachineARN: t.ARN, Timeout: timeout}
		case sources.TargetLambda:
			m[name] = &targets.Lambda{Client: lamc(), Function: t.ARN, Synchronous: t.Invocation == "request-response", Timeout: timeout}
		}
		if t.Delivery == sources.AtMostOnce {
			m[name] = outbox.AtMostOnce(m[name])
		}
	}
	return m
}

// KnownTargets is the receiver's Config.Targets for a sources file and the targets the
// application's own executors serve (ONCEHOOK_TARGETS), sorted: nil (any target) when there
// are none.
func KnownTargets(f *sources.File, own []string) []string {
	names := slices.AppendSeq(append([]string(nil), own...), maps.Keys(f.Targets)) // nil, any target, when none is named
	slices.Sort(names)
	return slices.Compact(names)
}

// NewWorker builds the outbox worker the outbox and sweeper functions share: the built-in
// executors plus executors (which may add targets or replace one; an at-most-once target's
// replacement is wrapped in outbox.AtMostOnce). Every target in ONCEHOOK_TARGETS must have an
// executor, or it refuses, naming the target.
func NewWorker(env *Env, executors map[string]outbox.Executor) (*outbox.Worker, error) {
	set := env.Settings
	if _, err := outbox.Bounds(executors); err != nil {
		return nil, err
	}
	all := TargetExecutors(env.Sources, env.AWS)
	for name, x := range executors {
		if t := env.Sources.Targets[name]; t != nil && t.Delivery == sources.AtMostOnce && !outbox.IsAtMostOnce(x) {
			x = outbox.AtMostOnce(x)
			env.Logger.Info("the application's executor serves an at-most-once target: wrapped in outbox.AtMostOnce", "target", name)
		}
		all[name] = x
	}
	for _, t := range set.Targets {
		if all[t] == nil {
			return nil, fmt.Errorf("ONCEHOOK_TARGETS names %q, and no executor serves it: register one with launch.Outbox and launch.Sweeper", t)
		}
	}
	var sched outbox.Scheduler
	if set.RetryQueueURL != "" {
		sched = &outbox.SQSScheduler{API: sqs.NewFromConfig(env.AWS), QueueURL: set.RetryQueueURL}
	}
	w, err := outbox.New(env.DynamoDB, outbox.Config{
		Table:          env.Table,
		Executors:      all,
		Limits:         TargetLimits(env.Sources),
		Lease:          set.Lease,
		MaxAttempts:    set.MaxAttempts,
		Scheduler:      sched,
		PendingShards:  set.PendingShards,
		Logger:         env.Logger,
		Metrics:        outbox.NewEMFMetrics(os.Stdout, set.MetricsNamespace),
		TracerProvider: env.Tracing.TracerProvider(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w (LEASE_SECONDS=%d)", err, int(set.Lease.Seconds()))
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
	set := env.Settings
	s := &outbox.Sweeper{Worker: w, MinAge: set.SweepMinAge}
	if len(set.AuditPrefixes) > 0 {
		s.Audit = &dedup.Auditor{Client: env.DynamoDB, Table: env.Table, Prefixes: set.AuditPrefixes, Sample: set.AuditSample}
		if err := s.Audit.Validate(); err != nil {
			return nil, fmt.Errorf("AUDIT_PREFIXES, AUDIT_SAMPLE: %w", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(env.Sources.Tables)) {
		if t := env.Sources.Tables[name]; t.Audit {
			s.AuditTables = append(s.AuditTables, &dedup.Auditor{Client: env.DynamoDB, Table: env.Table, Sample: set.AuditSample,
				Audited: t.PhysicalName(name), PartitionKey: t.PartitionKey, SortKey: t.SortKey})
		}
	}
	return s, nil
}

// NewReceiver builds the receiver with the planners register adds, as ReceiverConfig
// configures it.
func NewReceiver(env *Env, register func(*receiver.Planners)) (*receiver.Handler, error) {
	return newReceiver(env, register, nil)
}

func newReceiver(env *Env, register func(*receiver.Planners), trusted []string) (*receiver.Handler, error) {
	if env.Secrets == nil {
		return nil, fmt.Errorf("launch: the receiver needs its secrets: Load with Needs{Secrets: true}")
	}
	planners := receiver.NewPlanners()
	if register != nil {
		register(planners)
	}
	cfg := ReceiverConfig(env.Settings, env.Sources)
	cfg.Secrets, cfg.Store, cfg.Planners = env.Secrets, env.Store, planners
	cfg.Logger, cfg.Metrics, cfg.TracerProvider = env.Logger, os.Stdout, env.Tracing.TracerProvider()
	cfg.TrustedHosts = trusted
	return receiver.New(cfg)
}

// ReceiverConfig is the receiver's configuration as a deployment's settings and sources file
// make it, for the launched receiver and receivertest to add secrets, store and planners to.
func ReceiverConfig(s deployment.Settings, f *sources.File) receiver.Config {
	return receiver.Config{Sources: f, Targets: KnownTargets(f, s.Targets), Namespace: s.MetricsNamespace,
		TrustedHosts: s.TrustedHosts, NoDuplicateProbe: s.NoDuplicateProbe}
}

// NewHTTPReceiver is NewReceiver served over net/http: it trusts the Host headers
// ONCEHOOK_TRUSTED_HOSTS lists, and refuses to start when a URL-signing source could not be
// verified (receiver.Handler.CheckHTTP).
func NewHTTPReceiver(env *Env, register func(*receiver.Planners)) (http.Handler, error) {
	h, err := newReceiver(env, register, env.Settings.TrustedHosts)
	if err != nil {
		return nil, err
	}
	if err := h.CheckHTTP(); err != nil {
		return nil, fmt.Errorf("launch: %w (ONCEHOOK_TRUSTED_HOSTS)", err)
	}
	return h, nil
}
