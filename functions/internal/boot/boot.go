// Package boot is the start-up shared by the functions: it reads the environment, loads the
// sources file, builds the AWS clients and the dedup store, and refuses to start (with an
// error naming the problem) when any of them is wrong.
package boot

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/faults"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// SecretRefresh is the least time between two re-reads of one source's secrets.
const SecretRefresh = time.Minute

// Env is what a function needs, built once per instance. Secrets is nil unless asked for.
type Env struct {
	AWS      aws.Config
	DynamoDB *dynamodb.Client
	Table    string
	Sources  *sources.File
	Secrets  *sources.Secrets
	Store    *dedup.Store
	Logger   *slog.Logger
	// PendingShards is the pending index's shard count (PENDING_SHARDS, default 16).
	PendingShards int
}

// Needs says what a function needs beyond the table and the sources file.
type Needs struct {
	// Secrets resolves every source's signing secrets at start: the receiver only. The outbox
	// and the sweeper never verify a signature, and their roles may not read the secrets.
	Secrets bool
}

// Load builds the Env from the process environment.
func Load(ctx context.Context, needs Needs) (*Env, error) {
	logger := NewLogger(os.Getenv("LOG_LEVEL"))
	slog.SetDefault(logger)

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
	spec, err := faults.Parse(os.Getenv(faults.Env))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", faults.Env, err)
	}
	db := dynamodb.NewFromConfig(cfg, DynamoDBFaults(logger, spec))
	var secrets *sources.Secrets
	if needs.Secrets {
		secrets, err = sources.NewSecrets(ctx, file, &sources.Resolver{
			SecretsManager: secretsmanager.NewFromConfig(cfg),
			SSM:            ssm.NewFromConfig(cfg),
		}, SecretRefresh)
		if err != nil {
			return nil, err
		}
	}
	shards, err := envInt("PENDING_SHARDS", dedup.PendingShards)
	if err != nil {
		return nil, err
	}
	store, err := dedup.New(db, dedup.Config{Table: table, Sources: file.Retentions(), PendingShards: shards})
	if err != nil {
		return nil, err
	}
	for _, name := range file.Names() {
		logger.Info("source configured", "source", name, "scheme", file.Sources[name].Scheme,
			"retention", file.Sources[name].Retention().String())
	}
	return &Env{AWS: cfg, DynamoDB: db, Table: table, Sources: file, Secrets: secrets, Store: store, Logger: logger, PendingShards: shards}, nil
}

// DynamoDBFaults puts the fault injector of spec (ONCEHOOK_FAULTS) under the DynamoDB client,
// with a loud warning, when spec has DynamoDB faults; otherwise it changes nothing. It is for
// the harness only: the stack never sets ONCEHOOK_FAULTS.
func DynamoDBFaults(logger *slog.Logger, spec faults.Spec) func(*dynamodb.Options) {
	if !spec.Downstream.Zero() {
		logger.Warn("ONCEHOOK_FAULTS: the downstream faults are the harness's own and are ignored here", "downstream", spec.Downstream)
	}
	if !spec.DynamoDBOn() {
		return func(*dynamodb.Options) {}
	}
	spec = spec.OnlyDynamoDB()
	logger.Warn("FAULT INJECTION IS ON: this function's DynamoDB client throttles, fails and loses answers on purpose ("+
		faults.Env+"); never in production", "faults", spec.String())
	tr := faults.NewTransport(http.DefaultTransport, spec)
	tr.OnFault = func(op string, kind faults.Kind) {
		// One line per fault: the harness counts them in the function's logs.
		logger.Warn(faults.LogLine, "operation", op, "kind", string(kind))
	}
	return func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: tr} }
}

func loadSources() (*sources.File, error) {
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
	return sources.Load(path)
}

// NewLogger returns a JSON logger at the named level (info when empty or unknown).
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
	return slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: l}))
}

// Executors builds the outbox worker's HTTP executors from the file's targets.
func Executors(f *sources.File) map[string]outbox.Executor {
	client := &http.Client{Transport: http.DefaultTransport}
	m := make(map[string]outbox.Executor, len(f.Targets))
	for name, t := range f.Targets {
		m[name] = &outbox.HTTPExecutor{URL: t.URL, Client: client, Timeout: time.Duration(t.Timeout), Headers: t.Headers}
	}
	return m
}

// Worker builds the outbox worker the outbox and sweeper functions share, from the Env,
// LEASE_SECONDS (default 60; at least every target's timeout plus the 5 s margin, or the
// function does not start), MAX_ATTEMPTS (default 10) and RETRY_QUEUE_URL (the SQS queue that
// wakes retries at their due time; without it, retries wait for the sweeper).
func Worker(env *Env) (*outbox.Worker, error) {
	lease, err := envInt("LEASE_SECONDS", 60)
	if err != nil {
		return nil, err
	}
	attempts, err := envInt("MAX_ATTEMPTS", 10)
	if err != nil {
		return nil, err
	}
	var sched outbox.Scheduler
	if url := os.Getenv("RETRY_QUEUE_URL"); url != "" {
		sched = &outbox.SQSScheduler{API: sqs.NewFromConfig(env.AWS), QueueURL: url}
	}
	w, err := outbox.New(env.DynamoDB, outbox.Config{
		Table:         env.Table,
		Executors:     Executors(env.Sources),
		Lease:         time.Duration(lease) * time.Second,
		MaxAttempts:   attempts,
		Scheduler:     sched,
		PendingShards: env.PendingShards,
		Logger:        env.Logger,
		Metrics:       outbox.NewEMFMetrics(os.Stdout),
	})
	if err != nil {
		return nil, fmt.Errorf("%w (LEASE_SECONDS=%d)", err, lease)
	}
	return w, nil
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
