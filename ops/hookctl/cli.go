package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
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
		"unless AWS_ENDPOINT_URL names another endpoint; \"none\": none)")
	fs.Func("pending-shards", fmt.Sprintf("the pending index's shard count, as deployed (default $PENDING_SHARDS, else the local stack's, else %d)",
		dedup.PendingShards), func(v string) (err error) {
		c.pendingShards, err = parseShards(v)
		return err
	})
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
	// Flags, given even empty, beat the setting's other sources (c.setting).
	if !set["sources"] {
		c.sourcesPath, _ = c.setting("ONCEHOOK_SOURCES_FILE", stackSources)
	}
	if !set["table"] {
		c.table, _ = c.setting("TABLE_NAME", stackTable)
	}
	return c, fs.Args(), nil
}

// countFlag defines an int flag counting something, at least 1 (and at most most, when most is
// not 0): anything else is a usage error naming the flag, before the command runs (a count of
// nothing would send nothing, wait on no workers, or pace by no interval).
func countFlag(fs *flag.FlagSet, p *int, name string, value, most int, usage string) {
	limit := "at least 1"
	if most > 0 {
		limit = fmt.Sprintf("1 to %d", most)
	}
	*p = value
	fs.Func(name, fmt.Sprintf("%s; %s (default %d)", usage, limit, value), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || most > 0 && n > most {
			return errors.New("want " + limit)
		}
		*p = n
		return nil
	})
}

// parseShards reads a shard count: one the index cannot have would read the shards it names
// and no other, and report what it found there as all.
func parseShards(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > dedup.MaxPendingShards {
		return 0, fmt.Errorf("want 1 to %d", dedup.MaxPendingShards)
	}
	return n, nil
}

// shards is the pending index's shard count: -pending-shards, else PENDING_SHARDS or the local
// stack's (its functions', as deploy-local recorded them), else dedup.PendingShards.
func (c *cli) shards() (int, error) {
	v, from := c.setting("PENDING_SHARDS", stackShards)
	if c.pendingShards > 0 || v == "" {
		return cmp.Or(c.pendingShards, dedup.PendingShards), nil
	}
	n, err := parseShards(v)
	if err != nil {
		return 0, fmt.Errorf("PENDING_SHARDS=%q (from %s): %w", v, from, err)
	}
	return n, nil
}

// columns writes tab-separated columns to stdout, aligned as they are flushed.
func (c *cli) columns() *tabwriter.Writer { return tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0) }

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
	return errors.New("no table: pass -table or set TABLE_NAME" + cmp.Or(why, noStack))
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

// namedSources is the sources file for a command that works without one: nil when none is
// named (-sources, ONCEHOOK_SOURCES_FILE, the stack file's). A named one that does not load is
// an error, never read as none: the command would check less than asked (pause a misspelled
// target, redact no target's secrets).
func (c *cli) namedSources() (*sources.File, error) {
	if c.sourcesPath == "" {
		return nil, nil
	}
	f, err := c.sources()
	if err != nil {
		return nil, fmt.Errorf("the sources file %s: %w", c.sourcesPath, err)
	}
	return f, nil
}

// printable is stored text (a downstream's error, a key, an operator's name) as hookctl prints
// it: each rune a terminal would act on or not show (an escape sequence's ESC, a newline that
// makes a row of its own, a tab a column, U+202E) escaped as Go quotes it.
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsPrint(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// secret is ref's value, resolved as the receiver resolves it.
func (c *cli) secret(ctx context.Context, ref sources.SecretRef) (string, error) {
	r := &sources.Resolver{} // an environment variable needs no AWS
	if ref.Env == "" {
		cfg, err := c.config(ctx)
		if err != nil {
			return "", err
		}
		r = &sources.Resolver{SecretsManager: secretsmanager.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg)}
	}
	v, err := r.Resolve(ctx, []sources.SecretRef{ref})
	if err != nil {
		return "", err
	}
	return v[0], nil
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
	if c.scope != "" {
		if strings.Contains(c.scope, ":") {
			return nil, fmt.Errorf("-scope %s: a scope is a hook's id, with no ':'", c.scope)
		}
		if strings.Contains(id, ":") {
			return nil, fmt.Errorf("-scope %s with the scoped id %q: give the provider's id alone, or drop -scope", c.scope, id)
		}
		id = c.scope + ":" + id
	}
	cl, err := dedup.GetClaim(ctx, db, c.table, source, id)
	if !errors.Is(err, dedup.ErrNoClaim) || strings.Contains(id, ":") {
		return cl, err
	}
	f, ferr := c.namedSources()
	if ferr != nil {
		return nil, ferr
	}
	if f != nil && f.Sources[source].ScopedIDs() {
		if found, err := c.scanScoped(ctx, db, source, id); found != nil || err != nil {
			return found, err
		}
	}
	return nil, err
}

// scanScoped finds the claim of source whose id is <scope>:id, the scope a hook's id, with no
// ':' (the receiver prefixes the header's value and ':'; GitHub's are digits): the claim
// 1:x:abc is hook 1's delivery x:abc, never one of abc. A GUID several hooks' claims share is
// refused, naming each scope. A scan reads the table (its cost grows with it); the note says
// which scope to pass to read the claim directly.
func (c *cli) scanScoped(ctx context.Context, db *dynamodb.Client, source, id string) (*dedup.Claim, error) {
	prefix, suffix, pk := dedup.ClaimKey(source, ""), ":"+id, expression.Name(dedup.PartitionKey)
	filter := pk.BeginsWith(prefix).And(expression.Contains(pk, suffix), expression.Name(dedup.SortKey).Equal(expression.Value(dedup.ClaimSK)))
	var found map[string]types.AttributeValue
	var scopes []string
	for item, err := range c.scan(ctx, db, filter, true) {
		if err != nil {
			return nil, err
		}
		key, _ := item[dedup.PartitionKey].(*types.AttributeValueMemberS)
		if key == nil {
			continue
		}
		scope, ok := strings.CutSuffix(strings.TrimPrefix(key.Value, prefix), suffix)
		if !ok || scope == "" || strings.Contains(scope, ":") {
			continue
		}
		found, scopes = item, append(scopes, printable(scope))
	}
	switch len(scopes) {
	case 0:
		return nil, nil
	case 1:
		fmt.Fprintf(c.stderr, "hookctl: %s's ids are <scope>:<id>; found %s:%s by scanning the table (pass -scope %s to read it directly)\n", source, scopes[0], id, scopes[0])
		return dedup.UnmarshalClaim(found)
	}
	slices.Sort(scopes)
	return nil, fmt.Errorf("%s's id %s is a delivery of %d hooks: pass the hook's id, -scope %s", source, id, len(scopes), strings.Join(scopes, " or -scope "))
}

// scan yields the table's items that filter keeps, page by page: a filtered scan reads the
// whole table, for an operator's check, never a hot path.
func (c *cli) scan(ctx context.Context, db *dynamodb.Client, filter expression.ConditionBuilder, consistent bool) iter.Seq2[map[string]types.AttributeValue, error] {
	return func(yield func(map[string]types.AttributeValue, error) bool) {
		expr, err := expression.NewBuilder().WithFilter(filter).Build()
		if err != nil {
			yield(nil, err)
			return
		}
		p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(c.table), ConsistentRead: aws.Bool(consistent),
			FilterExpression: expr.Filter(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, item := range page.Items {
				if !yield(item, nil) {
					return
				}
			}
		}
	}
}
