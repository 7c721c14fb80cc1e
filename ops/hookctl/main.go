// Command hookctl is the operator's CLI for an oncehook deployment, local or on AWS: hookctl
// help lists its commands (the table below), docs/hookctl.md describes them.
//
// It talks to AWS through the standard credentials chain, without the EC2 instance metadata
// service unless AWS_EC2_METADATA_DISABLED=false asks for it. In a folder where a local deploy
// recorded its stack (.oncehook/stack.env: make run, hookctl deploy-local), it talks to that
// stack, with the emulator's dummy credentials, unless the environment points elsewhere.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

type command struct {
	name, usage string
	run         func(ctx context.Context, env *cli, args []string) error
	flags       func(c *cli, fs *flag.FlagSet) // the command's own, beside the common ones
}

// commands in the order the usage lists them.
var commands = []command{
	{"deploy-local", deployUsage, deployLocal, func(c *cli, fs *flag.FlagSet) { c.deploy.define(fs) }},
	{"send", "send [-id ID -type T -delivery D -scope S -header 'N: v' -key K -secret S -signed-url U] <source> [url]   (body on stdin)", send,
		func(c *cli, fs *flag.FlagSet) { c.send.define(fs) }},
	{"inspect", "inspect [-scope S] <source> <event_id>", inspect, scopeFlag},
	{"redrive", "redrive [-scope S] <source> <event_id> [intent]", redrive, scopeFlag},
	{"resolve", "resolve [-scope S] <source> <event_id> <intent> <why...>", resolve, scopeFlag},
	{"parked", "parked", parked, nil},
	{"pause", "pause [<target> <why...>]   (no target: list the paused targets)", pause, nil},
	{"resume", "resume <target>", resume, nil},
	{"check-retention", "check-retention", checkRetention, nil},
	{"storm", "storm [-events N -copies K -concurrency C -downstream ADDR -wait D -faults SPEC -retries N -sweep D] <source> [url]", storm,
		func(c *cli, fs *flag.FlagSet) { c.storm.define(fs) }},
	{"replay", "replay [-rate N -copies K -shuffle] <source> [url] <file.jsonl>", replay, func(c *cli, fs *flag.FlagSet) {
		countFlag(fs, &c.replay.rate, "rate", 50, int(time.Second), "deliveries per second (one a nanosecond at most: the finest interval to pace by)")
		countFlag(fs, &c.replay.copies, "copies", 1, 0, "send each line this many times")
		fs.BoolVar(&c.replay.shuffle, "shuffle", false, "shuffle the deliveries (redrives arrive in any order)")
	}},
	{"audit", "audit -prefix P [-sample N]", audit, func(c *cli, fs *flag.FlagSet) {
		fs.StringVar(&c.audit.prefix, "prefix", "", "the effect records to check: the partition-key prefix of those only put effects write (e.g. ORDER#), required")
		countFlag(fs, &c.audit.sample, "sample", 1000, 0, "how many effect records to check")
	}},
	{"backfill", "backfill <source> <file>   (lines: event_id [TAB processed-at RFC 3339])", backfill, nil},
	{"keygen", "keygen discord|sendgrid", keygen, nil},
	{"coldstart", coldstartUsage, coldstart, func(c *cli, fs *flag.FlagSet) { c.coldstart.define(fs) }},
	{"console", consoleUsage, consoleCmd, func(c *cli, fs *flag.FlagSet) { c.console.define(fs) }},
	{"logs", logsUsage, logs, func(c *cli, fs *flag.FlagSet) { c.logs.define(fs) }},
}

func scopeFlag(c *cli, fs *flag.FlagSet) {
	fs.StringVar(&c.scope, "scope", "", "for a source whose ids a header scopes (GitHub: the hook's id, X-GitHub-Hook-ID), the scope of an\n"+
		"<event_id> given as the provider shows it (GitHub's delivery GUID): the claim's id is <scope>:<event_id>")
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process: tests call it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "hookctl: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	cmd := commands[i]
	env, rest, err := parseFlags(cmd, args[1:], stdin, stdout, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := cmd.run(ctx, env, rest); err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage): // the flag package has said why
			return 2
		}
		fmt.Fprintln(stderr, "hookctl "+args[0]+":", err)
		return 1
	}
	return 0
}

// errUsage marks a command's refusal of the flags it parses itself (coldstart's, after its
// bootstrap), as a usage error.
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: hookctl <command> [flags] [args]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintln(w, "  "+c.usage)
	}
	fmt.Fprintln(w, "\nflags: -sources FILE (default $ONCEHOOK_SOURCES_FILE), -table NAME (default $TABLE_NAME), -stack FILE (default\n"+
		"$ONCEHOOK_STACK, else "+StackFile+" in this folder: a local deploy's stack, its endpoint, table, sources and URLs)")
	fmt.Fprintln(w, "Each command takes -h for its own help.")
}
