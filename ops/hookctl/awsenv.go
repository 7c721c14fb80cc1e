package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/smithy-go/logging"
)

// StackFile is where a local deploy (make run, hookctl deploy-local) records the stack it
// deployed, relative to the folder it ran in: the endpoint, the table, the sources file and the
// webhook URLs, as KEY=value lines a shell can source (set -a; . .oncehook/stack.env).
const StackFile = ".oncehook/stack.env"

// The stack file's keys beyond the AWS SDK's own (AWS_ENDPOINT_URL, AWS_REGION, ...).
const (
	stackWebhookURL = "ONCEHOOK_WEBHOOK_URL" // <base>/hooks/{source}
	stackSources    = "ONCEHOOK_SOURCES_FILE"
	stackTable      = "TABLE_NAME"
	stackName       = "ONCEHOOK_STACK_NAME"
	stackNamespace  = "METRICS_NAMESPACE"
	stackShards     = "PENDING_SHARDS"
)

// errNoCredentials is what hookctl says when nothing tells it where AWS is: one line, instead
// of the SDK's walk down its credentials chain to the EC2 instance metadata service.
var errNoCredentials = errors.New("no AWS credentials: for the local emulator, run hookctl in the project folder " +
	"(it reads " + StackFile + ", written by make run or hookctl deploy-local) or set AWS_ENDPOINT_URL=http://127.0.0.1:4566; " +
	"for AWS, set AWS_PROFILE or AWS_ACCESS_KEY_ID")

// stack is a stack file, read.
type stack struct {
	path       string
	vars       map[string]string
	discovered bool // found in the current folder rather than named by -stack or ONCEHOOK_STACK
}

func (s *stack) get(key string) string {
	if s == nil {
		return ""
	}
	return s.vars[key]
}

// readStack parses the subset of shell assignments writeStack produces (KEY=value,
// KEY='quoted value', comments): a dotenv library would be a dependency for twenty lines.
func readStack(path string) (*stack, error) {
	s := &stack{path: path, vars: map[string]string{}}
	return s, eachLine(path, func(n int, line string) error {
		key, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok || key == "" {
			return fmt.Errorf("%s:%d: want KEY=value", path, n)
		}
		if strings.HasPrefix(value, "'") {
			if len(value) < 2 || !strings.HasSuffix(value, "'") {
				return fmt.Errorf("%s:%d: unterminated quote", path, n)
			}
			value = strings.ReplaceAll(value[1:len(value)-1], `'\''`, `'`)
		}
		s.vars[key] = value
		return nil
	})
}

// writeStack writes vars as a stack file, each value quoted for a shell where it needs it.
func writeStack(path, comment string, vars map[string]string) error {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(comment), "\n") {
		b.WriteString("# " + line + "\n")
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		b.WriteString(k + "=" + shellQuote(vars[k]) + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// shellQuote quotes s for a POSIX shell unless it needs none.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:{}@%+,=-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// findStack returns the stack file hookctl uses: the one named (-stack, ONCEHOOK_STACK;
// "none" for none), else the current folder's StackFile unless AWS_ENDPOINT_URL names another
// endpoint. A found file is announced (noteStack) and only ever sends commands to the emulator
// it names, never to AWS.
func findStack(named string, isNamed bool) (*stack, error) {
	if !isNamed {
		named, isNamed = os.LookupEnv("ONCEHOOK_STACK")
	}
	if isNamed {
		if named == "" || named == "none" {
			return nil, nil
		}
		s, err := readStack(named)
		if err != nil {
			return nil, fmt.Errorf("stack file: %w", err)
		}
		return s, nil
	}
	s, err := readStack(StackFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" && strings.TrimSuffix(e, "/") != strings.TrimSuffix(s.get("AWS_ENDPOINT_URL"), "/") {
		return nil, nil
	}
	// Found, not named: without a local endpoint its table would be AWS's, read with whatever
	// credentials the caller has.
	if e := s.get("AWS_ENDPOINT_URL"); !isLocal(e) {
		return nil, fmt.Errorf("%s names no emulator on this machine (AWS_ENDPOINT_URL=%q), and a stack file found in the folder is only ever used for one: "+
			"fix it (hookctl deploy-local writes it) or pass -stack none", StackFile, e)
	}
	s.discovered = true
	return s, nil
}

// answers reports whether something accepts connections at endpoint's host and port.
func answers(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" && u.Scheme == "https" {
		port = "443"
	}
	port = cmp.Or(port, "80")
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(u.Hostname(), port), 2*time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// isLocal reports whether endpoint is on this machine (an emulator): loopback or *.localhost.
func isLocal(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "localhost" || strings.HasSuffix(h, ".localhost") || net.ParseIP(h).IsLoopback()
}

// setting is a setting's value and what says so: the key of a stack file named by -stack or
// ONCEHOOK_STACK, else the environment variable env, else the key of a stack file found here.
func (c *cli) setting(env, key string) (value, from string) {
	if v := c.stack.get(key); v != "" && !c.stack.discovered {
		return v, c.stack.path
	}
	if v := os.Getenv(env); v != "" {
		return v, env
	}
	if v := c.stack.get(key); v != "" {
		return v, c.stack.path
	}
	return "", ""
}

// endpoint is where hookctl's AWS calls go ("" for AWS itself) and what says so.
func (c *cli) endpoint() (endpoint, from string) {
	return c.setting("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL")
}

// noteStack says once, on stderr, that a stack file found in the folder is in use: never a
// silent choice of where commands go.
func (c *cli) noteStack() {
	if c.stack == nil || !c.stack.discovered || c.noted {
		return
	}
	c.noted = true
	fmt.Fprintf(c.stderr, "hookctl: the local stack recorded in %s (%s)\n", c.stack.path, cmp.Or(c.stack.get("AWS_ENDPOINT_URL"), "-"))
}

// localEnv is the region and credentials for an emulator at the endpoint in use (nil for
// another endpoint): the naming stack file's region, else the caller's, else us-east-1; the
// caller's access key, else the stack's or "test", and never a profile's.
func (c *cli) localEnv() map[string]string {
	endpoint, from := c.endpoint()
	if endpoint == "" || !isLocal(endpoint) {
		return nil
	}
	region := cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), c.stack.get("AWS_REGION"), "us-east-1")
	if r := c.stack.get("AWS_REGION"); r != "" && from != "AWS_ENDPOINT_URL" {
		region = r
	}
	vars := map[string]string{"AWS_REGION": region, "AWS_DEFAULT_REGION": region}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		vars["AWS_ACCESS_KEY_ID"] = cmp.Or(c.stack.get("AWS_ACCESS_KEY_ID"), "test")
		vars["AWS_SECRET_ACCESS_KEY"] = cmp.Or(c.stack.get("AWS_SECRET_ACCESS_KEY"), "test")
		vars["AWS_PROFILE"] = "" // never a profile's credentials to an emulator
	}
	return vars
}

// config is hookctl's AWS configuration, made once: the SDK's own chain, except that
//   - the EC2 instance metadata service is off unless AWS_EC2_METADATA_DISABLED=false asks for
//     it (on an EC2 instance with a role), so that no credentials is one clear line, not the
//     SDK's retries against 169.254.169.254;
//   - a local endpoint (a stack file's, or a loopback AWS_ENDPOINT_URL) gets localEnv's region
//     and credentials, and a stopped emulator is one line too, not the SDK's retries of a
//     refused connection;
//   - the SDK logs nothing (its warnings are not the operator's business).
func (c *cli) config(ctx context.Context) (aws.Config, error) {
	if c.aws != nil {
		return *c.aws, nil
	}
	c.noteStack()
	opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	if os.Getenv("AWS_EC2_METADATA_DISABLED") == "" {
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	endpoint, from := c.endpoint()
	if endpoint != "" && from != "AWS_ENDPOINT_URL" {
		opts = append(opts, config.WithBaseEndpoint(endpoint))
	}
	local := c.localEnv()
	if local != nil {
		if err := answers(endpoint); err != nil {
			return aws.Config{}, fmt.Errorf("nothing answers on %s (%s): is the emulator running? (make run or make up starts it, in oncehook's folder)", endpoint, from)
		}
		opts = append(opts, config.WithRegion(local["AWS_REGION"]))
		if key, ok := local["AWS_ACCESS_KEY_ID"]; ok {
			// Not a profile's either: the SDK fails its load on a profile this machine lacks, and
			// an emulator has no use for one.
			os.Unsetenv("AWS_PROFILE")
			opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(key, local["AWS_SECRET_ACCESS_KEY"], "")))
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("AWS configuration: %w", err)
	}
	if local == nil {
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			if !credentialsConfigured() {
				return aws.Config{}, errNoCredentials
			}
			return aws.Config{}, fmt.Errorf("AWS credentials: %w", err)
		}
		if cfg.Region == "" {
			return aws.Config{}, errors.New("no AWS region: set AWS_REGION (or a region in your AWS profile)")
		}
	}
	c.aws = &cfg
	return cfg, nil
}

// credentialsConfigured reports whether the environment names credentials of its own, whose
// failure the SDK's error explains better than errNoCredentials.
func credentialsConfigured() bool {
	named := []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"}
	return slices.ContainsFunc(named, func(k string) bool { return os.Getenv(k) != "" }) ||
		strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "false") // an instance role, asked for
}

// childEnv is the environment for a process hookctl starts against the same stack (the CDK
// CLI, a receiver binary): the caller's, with the endpoint, region and credentials hookctl
// itself uses where they come from a stack file or stand in for an emulator's.
func (c *cli) childEnv() []string {
	endpoint, _ := c.endpoint()
	if endpoint == "" {
		return os.Environ()
	}
	vars := c.localEnv()
	if vars == nil {
		vars = map[string]string{}
	}
	vars["AWS_ENDPOINT_URL"] = endpoint
	return setEnv(os.Environ(), vars)
}

// setEnv is env (KEY=value pairs) with vars set in it, and those whose value is "" removed.
func setEnv(env []string, vars map[string]string) []string {
	env = slices.DeleteFunc(env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, ok := vars[k]
		return ok
	})
	for k, v := range vars {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}
