package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

const deployUsage = "deploy-local [-app CMD|DIR -c key=value -secrets FILE -example SOURCE[:TYPE]=FILE -cdk CMD -dir DIR -v] [stack...]"

// deployFlags are deploy-local's.
type deployFlags struct {
	app, secrets, cdk, dir string
	context, examples      []string
	verbose                bool
}

// listFlag defines a repeatable flag whose values are each a name, sep and a value.
func listFlag(fs *flag.FlagSet, values *[]string, name, sep, usage string) {
	fs.Func(name, usage, func(v string) error {
		if k, _, ok := strings.Cut(v, sep); !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("want name%svalue, got %q", sep, v)
		}
		*values = append(*values, v)
		return nil
	})
}

func (f *deployFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.app, "app", "", "the command that runs the CDK app (as cdk --app: 'go run ./infra'), or a synthesized cloud assembly's\n"+
		"folder; default the app of cdk.json here")
	listFlag(fs, &f.context, "c", "=", "CDK context for the synth, key=value (repeatable), e.g. -c local=true")
	fs.StringVar(&f.secrets, "secrets", "", "a JSON file of the secrets' values, {\"<source>\": \"<secret>\"} (or keyed \"secretsmanager:<name>\", \"ssm:<name>\");\n"+
		"a secret it does not give keeps its value in the emulator, or gets a fresh one that fits the source's scheme")
	listFlag(fs, &f.examples, "example", "=", "SOURCE=FILE or SOURCE:TYPE=FILE (TYPE for a source that reads it from a header): print the send command\n"+
		"with this body for the source (repeatable), {{fresh}} in it replaced by a token new each deploy (ids, keys that\n"+
		"must not repeat); without any, every source gets a minimal one")
	fs.StringVar(&f.cdk, "cdk", "cdklocal", "the command that runs the CDK CLI against the emulator (npm install -g aws-cdk aws-cdk-local)")
	fs.StringVar(&f.dir, "dir", ".oncehook", "where the deploy keeps the cloud assembly, its log and the stack file hookctl reads")
	fs.BoolVar(&f.verbose, "v", false, "show the CDK CLI's output as it runs (it is in DIR/deploy.log either way)")
}

// deployLocal deploys a CDK app that uses the construct to the local emulator, as the stack
// does for oncehook's own (make run): synth, the secrets its sources files name (before any
// function can start), bootstrap and deploy with cdklocal, TTL on each construct's table (the
// emulator's CloudFormation leaves it off), then the stack file and the URLs that resolve.
func deployLocal(ctx context.Context, c *cli, args []string) error {
	f := c.deploy
	endpoint := cmp.Or(os.Getenv("AWS_ENDPOINT_URL"), "http://127.0.0.1:4566")
	if !isLocal(endpoint) {
		return fmt.Errorf("AWS_ENDPOINT_URL=%s is not a local endpoint: deploy-local deploys to an emulator on this machine (cdk deploy deploys to AWS)", endpoint)
	}
	endpoint = strings.TrimSuffix(endpoint, "/")
	c.stack = &stack{path: "deploy-local", vars: map[string]string{"AWS_ENDPOINT_URL": endpoint}}
	if err := answers(endpoint); err != nil { // before a synth is spent
		return fmt.Errorf("nothing answers on %s: start the emulator first (make up, in a checkout of oncehook, starts MiniStack; LocalStack serves too)", endpoint)
	}
	cdk := strings.Fields(f.cdk)
	if len(cdk) == 0 {
		return errors.New("-cdk is empty")
	}
	if _, err := exec.LookPath(cdk[0]); err != nil {
		return fmt.Errorf("no %s on PATH: install the CDK CLI and cdklocal (npm install -g aws-cdk aws-cdk-local), or name the command with -cdk", cdk[0])
	}
	assembly := f.app
	_, err := os.Stat(filepath.Join(f.app, "manifest.json"))
	synth := f.app == "" || err != nil // not a synthesized cloud assembly's folder
	if f.app == "" {
		if _, err := os.Stat("cdk.json"); err != nil {
			return errors.New("no -app and no cdk.json here: pass -app with the command that runs your CDK app, e.g. -app 'go run ./infra'")
		}
	}
	cfg, err := c.config(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(f.dir, "deploy.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	step := func(s string) { fmt.Fprintf(c.stdout, "==> %s\n", s) }
	cdkRun := func(what string, args ...string) error {
		step(what)
		cmd := exec.CommandContext(ctx, cdk[0], append(cdk[1:], args...)...)
		cmd.Env = append(c.childEnv(), "CDK_DISABLE_CLI_TELEMETRY=true")
		if os.Getenv("AWS_ENDPOINT_URL_S3") == "" {
			cmd.Env = append(cmd.Env, "AWS_ENDPOINT_URL_S3="+endpoint) // cdklocal's asset uploads
		}
		var w io.Writer = logFile
		if f.verbose {
			w = io.MultiWriter(logFile, c.stderr)
		}
		cmd.Stdout, cmd.Stderr = w, w
		fmt.Fprintf(logFile, "\n$ %s\n", strings.Join(cmd.Args, " "))
		start := time.Now()
		if err := cmd.Run(); err != nil {
			if !f.verbose {
				fmt.Fprint(c.stderr, tail(logPath, 30))
			}
			return fmt.Errorf("%s: %v (its output is in %s)", what, err, logPath)
		}
		// What each step took, so a slow first deploy shows where its time goes.
		fmt.Fprintf(c.stdout, "  (%s)\n", time.Since(start).Round(100*time.Millisecond))
		return nil
	}

	stacks := args
	if synth {
		// Absolute: the app's command may change folder (cd infra && go run ./app), and the
		// CDK hands it the output folder as given.
		if assembly, err = filepath.Abs(filepath.Join(f.dir, "cdk.out")); err != nil {
			return err
		}
		if err := os.RemoveAll(assembly); err != nil { // no template of a stack the app no longer has
			return err
		}
		synthArgs := []string{"synth", "--quiet", "--output", assembly}
		if f.app != "" {
			synthArgs = append(synthArgs, "--app", f.app)
		}
		for _, kv := range f.context {
			synthArgs = append(synthArgs, "--context", kv)
		}
		if err := cdkRun("synthesizing the app into "+assembly, append(synthArgs, stacks...)...); err != nil {
			return err
		}
	}
	all, err := readAssembly(assembly)
	if err != nil {
		return err
	}
	found := slices.DeleteFunc(all, func(k *construct) bool { return len(stacks) > 0 && !slices.Contains(stacks, k.stack) })
	if len(found) == 0 {
		if len(stacks) > 0 {
			return fmt.Errorf("%w (in stacks %s)", errNoConstruct, strings.Join(stacks, ", "))
		}
		return errNoConstruct
	}
	for _, k := range found {
		if err := k.runs(runtime.GOARCH); err != nil {
			return err
		}
		for _, w := range k.sources.Warnings() {
			fmt.Fprintf(c.stderr, "warning: stack %s: %s\n", k.stack, w)
		}
		if k.sourcesPath == "" { // inline in ONCEHOOK_SOURCES: a file, for hookctl
			k.sourcesPath = filepath.Join(f.dir, k.stack+"."+k.receiver+".sources.json")
			if err := os.WriteFile(k.sourcesPath, k.sourcesBytes, 0o644); err != nil {
				return err
			}
		}
		if k.sourcesPath, err = filepath.Abs(k.sourcesPath); err != nil {
			return err
		}
	}
	examples, err := readExamples(f.examples, found)
	if err != nil {
		return err
	}

	step("secrets in the emulator's Secrets Manager and SSM")
	puts, err := c.putSecrets(ctx, found, f.secrets)
	if err != nil {
		return err
	}
	account := "000000000000"
	if id, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); err == nil && aws.ToString(id.Account) != "" {
		account = aws.ToString(id.Account)
	}
	if err := cdkRun(fmt.Sprintf("bootstrapping aws://%s/%s", account, cfg.Region), "bootstrap", "aws://"+account+"/"+cfg.Region, "--app", assembly); err != nil {
		return err
	}
	deployArgs := []string{"deploy", "--app", assembly, "--require-approval", "never"}
	if len(stacks) > 0 {
		deployArgs = append(deployArgs, stacks...)
	} else {
		deployArgs = append(deployArgs, "--all")
	}
	if err := cdkRun("deploying to "+endpoint, deployArgs...); err != nil {
		return err
	}

	cf, db := cloudformation.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg)
	for _, k := range found {
		if k.tableName, err = physicalID(ctx, cf, k.stack, k.table); err != nil {
			return err
		}
		api := k.api
		if !k.apiIsID {
			if api, err = physicalID(ctx, cf, k.stack, k.api); err != nil {
				return err
			}
		}
		k.urlTemplate = endpoint + "/_aws/execute-api/" + api + receiver.Route
		// The table exists (CloudFormation made it): this turns its TTL on, unless it is already.
		if err := dedup.EnsureTable(ctx, db, k.tableName); err != nil {
			return fmt.Errorf("stack %s: %w", k.stack, err)
		}
	}
	stackPath := filepath.Join(f.dir, "stack.env")
	first := found[0]
	err = writeStack(stackPath, fmt.Sprintf("The local stack %s, deployed by hookctl deploy-local at %s.\nhookctl reads it in this folder; a shell can too: set -a; . %s; set +a",
		first.stack, time.Now().UTC().Format(time.RFC3339), stackPath), first.stackVars(endpoint, cfg.Region))
	if err != nil {
		return err
	}
	printDeployed(c.stdout, endpoint, stackPath, f.dir, found, puts, examples)
	return nil
}

// stackVars are the stack file's lines for deployed k: where it is and what hookctl reads of it
// (the settings its functions were deployed with, those it sets).
func (k *construct) stackVars(endpoint, region string) map[string]string {
	vars := map[string]string{
		"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": region, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		stackTable: k.tableName, stackSources: k.sourcesPath, stackWebhookURL: k.urlTemplate, stackName: k.stack,
		stackNamespace: k.namespace, stackShards: k.pendingShards,
	}
	maps.DeleteFunc(vars, func(_, v string) bool { return v == "" })
	return vars
}

func physicalID(ctx context.Context, cf *cloudformation.Client, stack, logical string) (string, error) {
	out, err := cf.DescribeStackResource(ctx, &cloudformation.DescribeStackResourceInput{StackName: aws.String(stack), LogicalResourceId: aws.String(logical)})
	if err != nil {
		return "", fmt.Errorf("stack %s: %s: %w", stack, logical, err)
	}
	if out.StackResourceDetail == nil || aws.ToString(out.StackResourceDetail.PhysicalResourceId) == "" {
		return "", fmt.Errorf("stack %s: %s has no physical id", stack, logical)
	}
	return aws.ToString(out.StackResourceDetail.PhysicalResourceId), nil
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// secretPut is what deploy-local did with one secret a sources file names.
type secretPut struct {
	ref              sources.SecretRef
	sources, schemes []string // the sources that share it, and their schemes
	value            string   // given by the -secrets file, when given
	given            bool
	how              string
}

// putSecrets puts every Secrets Manager secret and SSM parameter the constructs' sources files
// name: the -secrets file's value where it gives one, else the emulator's present value, else a
// fresh one that the sources' schemes accept. Nothing is put until every value is known.
func (c *cli) putSecrets(ctx context.Context, found []*construct, valuesPath string) ([]*secretPut, error) {
	given := map[string]string{}
	if valuesPath != "" {
		b, err := os.ReadFile(valuesPath)
		if err != nil {
			return nil, fmt.Errorf("-secrets: %w", err)
		}
		if err := json.Unmarshal(b, &given); err != nil {
			return nil, fmt.Errorf("-secrets %s: want {\"<source>\": \"<secret>\", ...}: %w", valuesPath, err)
		}
	}
	used := map[string]bool{}
	byRef := map[string]*secretPut{}
	var out []*secretPut
	for _, k := range found {
		for _, name := range k.sources.Names() {
			src := k.sources.Sources[name]
			for _, ref := range src.Secrets {
				key := ref.String()
				p := byRef[key]
				if p == nil {
					p = &secretPut{ref: ref}
					byRef[key] = p
					out = append(out, p)
				}
				p.sources, p.schemes = append(p.sources, name), append(p.schemes, src.Scheme)
				for _, g := range []string{key, name} {
					v, ok := given[g]
					if !ok {
						continue
					}
					used[g] = true
					if p.given && p.value != v {
						return nil, fmt.Errorf("-secrets %s gives %s two values (for the sources %s, which share it)", valuesPath, key, strings.Join(p.sources, " and "))
					}
					p.value, p.given = v, true
				}
			}
		}
	}
	for g := range given {
		if !used[g] {
			return nil, fmt.Errorf("-secrets %s: %q is neither a source nor a secret of the app's sources files", valuesPath, g)
		}
	}
	cfg, err := c.config(ctx)
	if err != nil {
		return nil, err
	}
	sm, ps := secretsmanager.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
	for _, p := range out {
		switch {
		case p.ref.Env != "":
			p.how = "not put: an environment variable, which the app sets (Environment) and hookctl send reads from its own"
			continue
		case strings.HasPrefix(p.ref.SecretsManager, "arn:") || strings.HasPrefix(p.ref.SSM, "arn:"):
			p.how = "not put: an ARN names it; create it in the emulator yourself"
			continue
		}
		v, how := p.value, "from "+valuesPath
		if !p.given {
			present, err := c.currentSecret(ctx, p.ref)
			if err != nil {
				return nil, err
			}
			if usable(present, p.schemes) {
				p.how = "kept"
				continue
			}
			if v, err = freshSecret(p.schemes); err != nil {
				return nil, err
			}
			how = "generated"
		}
		if err := writeSecret(ctx, sm, ps, p.ref, v); err != nil {
			return nil, err
		}
		p.how = how
	}
	return out, nil
}

// currentSecret is the secret's value in the emulator, "" when it has none.
func (c *cli) currentSecret(ctx context.Context, ref sources.SecretRef) (string, error) {
	v, err := c.secret(ctx, ref)
	_, smMissing := errors.AsType[*smtypes.ResourceNotFoundException](err)
	_, ssmMissing := errors.AsType[*ssmtypes.ParameterNotFound](err)
	if smMissing || ssmMissing {
		return "", nil
	}
	return v, err
}

func writeSecret(ctx context.Context, sm *secretsmanager.Client, ps *ssm.Client, ref sources.SecretRef, v string) error {
	var err error
	if ref.SecretsManager != "" {
		_, err = sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(ref.SecretsManager), SecretString: aws.String(v)})
		if _, exists := errors.AsType[*smtypes.ResourceExistsException](err); exists {
			_, err = sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(ref.SecretsManager), SecretString: aws.String(v)})
		}
	} else {
		_, err = ps.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(ref.SSM), Value: aws.String(v), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true)})
	}
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	return nil
}

// freshSecret makes a secret every one of schemes accepts: Standard Webhooks' and Svix's are
// whsec_ and base64, Stripe's whsec_ and 32 characters; the others take any string.
func freshSecret(schemes []string) (string, error) {
	b := make([]byte, 24)
	rand.Read(b) // crypto/rand's Read never fails
	v := hex.EncodeToString(b)
	for _, s := range schemes {
		switch s {
		case webhook.StandardWebhooks, webhook.Svix:
			v = "whsec_" + base64.StdEncoding.EncodeToString(b)
		case webhook.Stripe:
			v = "whsec_" + v[:32]
		}
	}
	if !usable(v, schemes) {
		return "", fmt.Errorf("no generated secret suits the schemes %v: give one with -secrets", schemes)
	}
	return v, nil
}

// usable reports whether every scheme accepts v as a secret.
func usable(v string, schemes []string) bool {
	if v == "" {
		return false
	}
	for _, name := range schemes {
		s, err := webhook.New(name, webhook.Options{Header: "X-Check"}) // the Header only matters to hmac-sha256
		if err != nil {
			s, err = webhook.New(name, webhook.Options{})
		}
		if err != nil || webhook.CheckSecrets(s, []string{v}) != nil {
			return false
		}
	}
	return true
}

// example is one source's printed delivery: its body and the flags it needs.
type example struct {
	src                *sources.Source
	source, body, file string
	flags              []string
	id                 string // what inspect is given
}

// readExamples reads the -example files, or, without any, makes every source a minimal
// delivery: its id and type where the source reads them, a type no planner registers
// (oncehook.test, claimed and planned as nothing), a fresh id each deploy.
func readExamples(pairs []string, found []*construct) ([]example, error) {
	srcOf := func(name string) *sources.Source {
		for _, k := range found {
			if s := k.sources.Sources[name]; s != nil && slices.Contains(k.routes, name) {
				return s
			}
		}
		return nil
	}
	var out []example
	if len(pairs) == 0 {
		for _, k := range found {
			for _, name := range k.routes {
				if src := k.sources.Sources[name]; src != nil {
					out = append(out, minimalExample(name, src))
				}
			}
		}
		return out, nil
	}
	for _, p := range pairs {
		lhs, file, _ := strings.Cut(p, "=")
		name, eventType, _ := strings.Cut(lhs, ":")
		src := srcOf(name)
		if src == nil {
			return nil, fmt.Errorf("-example %s: no source %q with a route in the app", p, name)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-example: %w", err)
		}
		body := bytes.TrimSpace(b)
		var compact bytes.Buffer
		if json.Compact(&compact, body) == nil {
			body = compact.Bytes()
		}
		if bytes.ContainsAny(body, "\r\n") {
			return nil, fmt.Errorf("-example %s: the body must fit on one line (a JSON body is compacted)", p)
		}
		// A fresh token each deploy where the file says {{fresh}}, and in a header's id, so the
		// first send into an emulator that already has the last deploy's is new again.
		token := freshID("")
		body = bytes.ReplaceAll(body, []byte("{{fresh}}"), []byte(token))
		e := example{src: src, source: name, body: string(body), file: file}
		if inHeader(src.EventID) {
			e.id = "msg_" + token
			e.flags = append(e.flags, "-id", e.id)
		} else {
			e.id = bodyID(src, body)
		}
		switch {
		case inHeader(src.EventType) && eventType == "":
			return nil, fmt.Errorf("-example %s: source %s reads its event type from the %s header: give it as %s:<type>=%s", p, name, src.EventType.Header, name, file)
		case inHeader(src.EventType):
			e.flags = append(e.flags, "-type", eventType)
		case eventType != "":
			return nil, fmt.Errorf("-example %s: source %s reads its event type from the body", p, name)
		}
		out = append(out, e)
	}
	return out, nil
}

func minimalExample(name string, src *sources.Source) example {
	e := example{src: src, source: name}
	obj := map[string]any{}
	form := url.Values{}
	id, eventType := freshID("evt_local_"), "oncehook.test"
	locate := func(l *sources.Locator, v, flagName string) { // where a validated source reads it
		switch {
		case l.Header != "":
			e.flags = append(e.flags, flagName, v)
		case l.Form != "":
			form.Set(l.Form, v)
		case l.JSON != "":
			setPath(obj, l.JSON, v)
		}
	}
	locate(src.EventID, id, "-id")
	locate(src.EventType, eventType, "-type")
	e.id = id
	if src.Scheme == webhook.Twitch {
		// A notification is a body with an event (webhook.TwitchMessageKind): the receiver
		// reads the message's kind from the signed body, not from the header send writes.
		obj["event"] = map[string]any{}
	}
	if src.ReplayGuard == sources.ReplayGuardBody {
		// The receiver claims the body's hash as well (the signature does not cover the id):
		// the id in the body too, so the next deploy's example into the same emulator is new.
		if src.Body == sources.BodyForm {
			form.Set("OncehookTestId", id)
		} else {
			obj["oncehook_test_id"] = id
		}
	}
	js, _ := json.Marshal(obj)
	if src.Batch {
		js = append(append([]byte("["), js...), ']')
	}
	switch key, ok := src.FormPayload(); {
	case src.Body == sources.BodyForm:
		e.body = form.Encode()
	case ok:
		form.Set(key, string(js))
		e.body = form.Encode()
	default:
		e.body = string(js)
	}
	return e
}

// setPath sets the dot-separated path in m to v, making the objects on the way.
func setPath(m map[string]any, path, v string) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

func freshID(prefix string) string {
	b := make([]byte, 5)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// progName is how the printed commands run hookctl: as it was run, or, from go run's
// temporary binary, with go run.
func progName() string {
	p := os.Args[0]
	if strings.Contains(p, string(filepath.Separator)+"go-build") {
		return "go run github.com/oncehook/oncehook/ops/hookctl"
	}
	return p
}

// printDeployed says what was deployed and how to try it. Every command it prints is indented
// by four spaces and works as printed, from the folder deploy-local ran in, in a new shell.
func printDeployed(w io.Writer, endpoint, stackPath, dir string, deployed []*construct, puts []*secretPut, examples []example) {
	prog, stackFlag := progName(), ""
	if dir != filepath.Dir(StackFile) { // not where hookctl looks: named in every command
		stackFlag = " -stack " + shellQuote(stackPath)
	}
	for i, d := range deployed {
		recorded := " (recorded in " + stackPath + ")"
		if i > 0 {
			recorded = ""
		}
		fmt.Fprintf(w, "\nStack %s is up on %s%s\n", d.stack, endpoint, recorded)
		// Each row names what it is, indented by two: a row indented further would read as a
		// command.
		names := slices.Sorted(maps.Keys(d.sources.Targets))
		width := 0
		for _, n := range append(slices.Clone(d.routes), names...) {
			width = max(width, len(n))
		}
		fmt.Fprintf(w, "  table    %s\n", d.tableName)
		fmt.Fprintf(w, "  sources  %s (the file deployed)\n", relative(d.sourcesPath))
		for _, name := range d.routes {
			fmt.Fprintf(w, "  webhook  %-*s  %s\n", width, name, strings.ReplaceAll(d.urlTemplate, "{source}", name))
		}
		for _, name := range names {
			t := d.sources.Targets[name]
			where := t.URL
			if t.Type != "" && t.Type != sources.TargetHTTP {
				where = t.Type + " " + t.ARN
				if t.Bound && t.ARN == "" {
					where = t.Type + ", bound by the CDK app (ONCEHOOK_BINDINGS)"
				}
			}
			fmt.Fprintf(w, "  target   %-*s  %s\n", width, name, where)
		}
		for _, p := range puts {
			if slices.ContainsFunc(p.sources, func(s string) bool { return slices.Contains(d.routes, s) }) {
				fmt.Fprintf(w, "  secret   %s (%s; %s)\n", p.ref, p.how, strings.Join(p.sources, ", "))
			}
		}
	}
	if len(deployed) > 1 {
		fmt.Fprintf(w, "\n%d oncehook constructs: %s records %s's; for another, pass its -table and -sources.\n", len(deployed), stackPath, deployed[0].stack)
	}
	if stackFlag == "" {
		fmt.Fprintf(w, "\nTry it from this folder, in any shell: hookctl finds the stack in %s.\n", stackPath)
	} else {
		fmt.Fprintf(w, "\nTry it from this folder, in any shell (-stack names the stack file).\n")
	}
	for _, e := range examples {
		if src := e.src; sources.PublicKeyScheme(src.Scheme) {
			fmt.Fprintf(w, "\n%s verifies with its provider's public keys: make a pair with `%s keygen %s`, list the public key in the\n"+
				"source's public_keys, deploy again, and send with -key <the private key>.\n", e.source, prog, src.Scheme)
			continue
		}
		what, then := "a signed delivery of a type no planner handles (oncehook.test: claimed, and planned as nothing)", "its claim"
		if e.file != "" {
			what, then = "a signed delivery of "+e.file, "its claim, its effects and its intents"
		}
		fmt.Fprintf(w, "\n%s: %s. Send it again and the answer says \"duplicate\":true. Then see %s:\n\n", e.source, what, then)
		flags := ""
		for _, f := range e.flags {
			flags += " " + shellQuote(f)
		}
		fmt.Fprintf(w, "    echo %s | %s send%s%s %s\n", shellQuote(e.body), prog, stackFlag, flags, e.source)
		fmt.Fprintf(w, "    %s inspect%s %s %s\n", prog, stackFlag, e.source, shellQuote(e.id))
	}
}

// relative is path from the current folder, when it is under it.
func relative(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}
