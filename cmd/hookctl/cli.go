package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

var errHelp = errors.New("help")

// cli is what every command gets: its flags' values and its streams. AWS clients are made
// on first use, so commands that need none work without credentials.
type cli struct {
	sourcesPath, table, id string
	pendingShards          int
	storm                  stormFlags
	replay                 replayFlags
	audit                  auditFlags
	console                consoleFlags
	stdin                  io.Reader
	stdout, stderr         io.Writer

	aws *aws.Config
	db  *dynamodb.Client
}

func parseFlags(name, usage string, args []string, stdin io.Reader, stdout, stderr io.Writer) (*cli, []string, error) {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("ONCEHOOK_SOURCES_FILE")
	if def == "" {
		def = "examples/sources.json"
	}
	fs.StringVar(&c.sourcesPath, "sources", def, "the deployment's sources file")
	fs.StringVar(&c.table, "table", os.Getenv("TABLE_NAME"), "the DynamoDB table")
	shards := dedup.PendingShards
	if n, err := strconv.Atoi(os.Getenv("PENDING_SHARDS")); err == nil && n > 0 {
		shards = n
	}
	fs.IntVar(&c.pendingShards, "pending-shards", shards, "the pending index's shard count, as deployed (default $PENDING_SHARDS or 16)")
	switch name {
	case "send":
		fs.StringVar(&c.id, "id", "", "the message id, for schemes that sign one (Standard Webhooks' webhook-id)")
	case "storm":
		c.storm.define(fs)
	case "replay":
		fs.IntVar(&c.replay.rate, "rate", 50, "deliveries per second")
		fs.IntVar(&c.replay.copies, "copies", 1, "send each line this many times")
		fs.BoolVar(&c.replay.shuffle, "shuffle", false, "shuffle the deliveries (redrives arrive in any order)")
	case "console":
		c.console.define(fs)
	case "audit":
		fs.StringVar(&c.audit.prefix, "prefix", "", "only effect records whose pk starts with this (e.g. ORDER#)")
		fs.IntVar(&c.audit.sample, "sample", 1000, "how many effect records to check")
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: hookctl "+usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, errHelp
		}
		return nil, nil, err
	}
	return c, fs.Args(), nil
}

func (c *cli) config(ctx context.Context) (aws.Config, error) {
	if c.aws == nil {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return aws.Config{}, err
		}
		c.aws = &cfg
	}
	return *c.aws, nil
}

func (c *cli) dynamo(ctx context.Context) (*dynamodb.Client, error) {
	if c.table == "" {
		return nil, errors.New("no table: pass -table or set TABLE_NAME")
	}
	if c.db == nil {
		cfg, err := c.config(ctx)
		if err != nil {
			return nil, err
		}
		c.db = dynamodb.NewFromConfig(cfg)
	}
	return c.db, nil
}

func (c *cli) sources() (*sources.File, error) { return sources.Load(c.sourcesPath) }

func (c *cli) resolver(ctx context.Context) (*sources.Resolver, error) {
	cfg, err := c.config(ctx)
	if err != nil {
		return nil, err
	}
	return &sources.Resolver{SecretsManager: secretsmanager.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg)}, nil
}

// claim reads one claim, consistently.
func (c *cli) claim(ctx context.Context, source, id string) (*dedup.Claim, error) {
	db, err := c.dynamo(ctx)
	if err != nil {
		return nil, err
	}
	return dedup.GetClaim(ctx, db, c.table, source, id)
}
