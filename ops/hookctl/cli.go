package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// cli is what every command gets: its flags' values and its streams. AWS clients are made
// on first use, so commands that need none work without credentials.
type cli struct {
	sourcesPath, table string
	pendingShards      int
	scope              string
	send               sendFlags
	storm              stormFlags
	replay             replayFlags
	audit              auditFlags
	deploy             deployFlags
	console            consoleFlags
	logs               logsFlags
	coldstart          coldstartFlags
	flags              *flag.FlagSet // coldstart parses its flags after its <bootstrap> with it
	stdin              io.Reader
	stdout, stderr     io.Writer

	stack *stack // the local stack file in use, if any
	noted bool   // noteStack has spoken

	aws *aws.Config
	db  *dynamodb.Client
}

func parseFlags(cmd command, args []string, stdin io.Reader, stdout, stderr io.Writer) (*cli, []string, error) {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	name := cmd.name
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c.flags = fs
	fs.SetOutput(stderr)
	var stackPath string
	fs.StringVar(&c.sourcesPath, "sources", "", "the deployment's sources file (default $ONCEHOOK_SOURCES_FILE, else the local stack's)")
	fs.StringVar(&c.table, "table", "", "the DynamoDB table (default $TABLE_NAME, else the local stack's)")
	fs.StringVar(&stackPath, "stack", "", "the stack file a local deploy wrote (default $ONCEHOOK_STACK, else "+StackFile+" in this folder\n"+
		"unless AWS_ENDPOINT_URL names another endpoint, or AWS_PROFILE or AWS_ACCESS_KEY_ID is set; \"none\": none)")
	shards := dedup.PendingShards
	if n, err := strconv.Atoi(os.Getenv("PENDING_SHARDS")); err == nil && n > 0 {
		shards = n
	}
	fs.IntVar(&c.pendingShards, "pending-shards", shards, "the pending index's shard count, as deployed (default $PENDING_SHARDS or 16)")
	if cmd.flags != nil {
		cmd.flags(c, fs)
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: hookctl "+cmd.usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if name != "deploy-local" { // it writes the stack file; it reads none
		var err error
		if c.stack, err = findStack(stackPath, set["stack"]); err != nil {
			fmt.Fprintln(stderr, "hookctl "+name+":", err)
			return nil, nil, err
		}
	}
	// Flags, given even empty, beat the environment, which beats a stack file found here; a
	// stack file named beats the environment.
	named := c.stack != nil && !c.stack.discovered
	pick := func(env, key string) string {
		if named && c.stack.get(key) != "" {
			return c.stack.get(key)
		}
		return cmp.Or(os.Getenv(env), c.stack.get(key))
	}
	if !set["sources"] {
		c.sourcesPath = pick("ONCEHOOK_SOURCES_FILE", stackSources)
	}
	if !set["table"] {
		c.table = pick("TABLE_NAME", stackTable)
	}
	return c, fs.Args(), nil
}

// noStack ends the errors that a local deploy's stack file would have prevented.
const noStack = " (or run hookctl in the project folder, where a local deploy recorded its stack in " + StackFile + ")"

func (c *cli) dynamo(ctx context.Context) (*dynamodb.Client, error) {
	if c.db == nil {
		cfg, err := c.config(ctx)
		if err != nil {
			return nil, err
		}
		c.db = dynamodb.NewFromConfig(cfg)
	}
	if err := c.needTable(""); err != nil {
		return nil, err
	}
	return c.db, nil
}

// needTable says what to do when no table is named; why, when set, says what it is for.
func (c *cli) needTable(why string) error {
	if c.table != "" {
		return nil
	}
	if why == "" {
		why = noStack
	}
	return errors.New("no table: pass -table or set TABLE_NAME" + why)
}

func (c *cli) sources() (*sources.File, error) {
	if c.sourcesPath == "" {
		return nil, errors.New("no sources file: pass -sources or set ONCEHOOK_SOURCES_FILE" + noStack)
	}
	if c.sourcesPath == c.stack.get(stackSources) {
		c.noteStack()
	}
	return sources.Load(c.sourcesPath)
}

func (c *cli) resolver(ctx context.Context) (*sources.Resolver, error) {
	cfg, err := c.config(ctx)
	if err != nil {
		return nil, err
	}
	return &sources.Resolver{SecretsManager: secretsmanager.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg)}, nil
}

// claim reads the claim of one of source's events, consistently. id is the claim's event id
// or, for a source whose ids a header scopes (GitHub's <hook-id>:<delivery GUID>), the
// provider's own id: with -scope it is read as <scope>:<id>; without, the table's claims of the
// source are scanned for it (said on stderr, with the scope to pass next time).
func (c *cli) claim(ctx context.Context, source, id string) (*dedup.Claim, error) {
	db, err := c.dynamo(ctx)
	if err != nil {
		return nil, err
	}
	scoped := false
	if f, err := c.sources(); err == nil && f.Sources[source] != nil {
		l := f.Sources[source].EventID
		scoped = l != nil && l.ScopeHeader != ""
	}
	if c.scope != "" {
		if strings.Contains(id, ":") {
			return nil, fmt.Errorf("-scope %s with the scoped id %q: give the provider's id alone, or drop -scope", c.scope, id)
		}
		id = c.scope + ":" + id
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(c.table),
		Key:            map[string]types.AttributeValue{dedup.PartitionKey: &types.AttributeValueMemberS{Value: dedup.ClaimKey(source, id)}, dedup.SortKey: &types.AttributeValueMemberS{Value: dedup.ClaimSK}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	item := out.Item
	if item == nil && scoped && c.scope == "" && !strings.Contains(id, ":") {
		if item, err = c.scanScoped(ctx, db, source, id); err != nil {
			return nil, err
		}
	}
	if item == nil {
		return nil, fmt.Errorf("no claim for %s %s in %s", source, id, c.table)
	}
	return dedup.UnmarshalClaim(item)
}

// scanScoped finds the claim of source whose id is <any scope>:id. A scan reads the table (its
// cost grows with it); the note says which scope to pass to read the claim directly.
func (c *cli) scanScoped(ctx context.Context, db *dynamodb.Client, source, id string) (map[string]types.AttributeValue, error) {
	suffix := ":" + id
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
		TableName:                aws.String(c.table),
		ConsistentRead:           aws.Bool(true),
		FilterExpression:         aws.String("begins_with(#pk, :source) AND contains(#pk, :id) AND #sk = :claim"),
		ExpressionAttributeNames: map[string]string{"#pk": dedup.PartitionKey, "#sk": dedup.SortKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":source": &types.AttributeValueMemberS{Value: dedup.ClaimKey(source, "")},
			":id":     &types.AttributeValueMemberS{Value: suffix},
			":claim":  &types.AttributeValueMemberS{Value: dedup.ClaimSK},
		},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, item := range page.Items {
			pk, _ := item[dedup.PartitionKey].(*types.AttributeValueMemberS)
			if pk == nil || !strings.HasSuffix(pk.Value, suffix) {
				continue
			}
			scope := strings.TrimSuffix(strings.TrimPrefix(pk.Value, dedup.ClaimKey(source, "")), suffix)
			fmt.Fprintf(c.stderr, "hookctl: %s's ids are <scope>:<id>; found %s:%s by scanning the table (pass -scope %s to read it directly)\n", source, scope, id, scope)
			return item, nil
		}
	}
	return nil, nil
}
