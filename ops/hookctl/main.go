// Command hookctl is the operator's CLI for an oncehook deployment, local or on AWS.
//
//	hookctl deploy-local [flags] [stack...]     deploy a CDK app using the construct to the local emulator
//	hookctl send <source> [url]                 sign a body (stdin) as the provider would, POST it
//	hookctl inspect <source> <event_id>         the claim, its effects and its intents
//	hookctl redrive <source> <event_id> [intent] put parked intents back to pending
//	hookctl parked                              every parked intent, with its last error
//	hookctl pause [<target> <why...>]           hold a target's calls (its downstream's maintenance); list the paused
//	hookctl resume <target>                     let a paused target's calls go again
//	hookctl check-retention                     each source's retention against its provider
//	hookctl storm <source> [url]                N events x K concurrent copies, then verify
//	hookctl replay <source> [url] <file.jsonl>  send recorded deliveries, rate-limited (a redrive)
//	hookctl audit                               effect records without a claim (leaks)
//	hookctl backfill <source> <file>            claim ids processed before dedup was switched on
//	hookctl keygen discord|sendgrid             a key pair to test a public-key source with
//	hookctl coldstart <bootstrap>               the receiver binary's cold start under a local Runtime API
//	hookctl console                             the operator console, a web UI (package console)
//	hookctl logs [receiver|outbox|sweeper]      the functions' log lines, oldest first (-follow)
//
// It talks to AWS through the standard credentials chain, without the EC2 instance metadata
// service unless AWS_EC2_METADATA_DISABLED=false asks for it. In a folder where a local deploy
// recorded its stack (.oncehook/stack.env: make run, hookctl deploy-local), it talks to that
// stack, with the emulator's dummy credentials, unless the environment points elsewhere.
// Common flags: -sources (default $ONCEHOOK_SOURCES_FILE), -table (default $TABLE_NAME),
// -stack (default $ONCEHOOK_STACK or .oncehook/stack.env); docs/hookctl.md has the rest.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

type command struct {
	usage string
	run   func(ctx context.Context, env *cli, args []string) error
}

var commands = map[string]command{
	"deploy-local":    {deployUsage, deployLocal},
	"inspect":         {"inspect [-scope S] <source> <event_id>", inspect},
	"redrive":         {"redrive [-scope S] <source> <event_id> [intent]", redrive},
	"resolve":         {"resolve [-scope S] <source> <event_id> <intent> <why...>", resolve},
	"parked":          {"parked", parked},
	"pause":           {"pause [<target> <why...>]   (no target: list the paused targets)", pause},
	"resume":          {"resume <target>", resume},
	"check-retention": {"check-retention", checkRetention},
	"send":            {"send [-id ID -type T -delivery D -scope S -header 'N: v' -key K -secret S -signed-url U] <source> [url]   (body on stdin)", send},
	"storm":           {"storm [-events N -copies K -concurrency C -downstream ADDR -wait D -faults SPEC -retries N -sweep D] <source> [url]", storm},
	"replay":          {"replay [-rate N -copies K -shuffle] <source> [url] <file.jsonl>", replay},
	"audit":           {"audit [-prefix P -sample N]", audit},
	"backfill":        {"backfill <source> <file>   (lines: event_id [TAB processed-at RFC 3339])", backfill},
	"keygen":          {"keygen discord|sendgrid", keygen},
	"coldstart":       {coldstartUsage, coldstart},
	"console":         {consoleUsage, consoleCmd},
	"logs":            {logsUsage, logs},
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
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "hookctl: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	env, rest, err := parseFlags(args[0], cmd.usage, args[1:], stdin, stdout, stderr)
	if err != nil {
		if err == errHelp {
			return 0
		}
		return 2
	}
	if err := cmd.run(ctx, env, rest); err != nil {
		fmt.Fprintln(stderr, "hookctl "+args[0]+":", err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: hookctl <command> [flags] [args]\n\ncommands:")
	for _, name := range []string{"deploy-local", "send", "inspect", "redrive", "resolve", "parked", "pause", "resume", "check-retention", "storm", "replay", "audit", "backfill", "keygen", "coldstart", "console"} {
		fmt.Fprintln(w, "  "+commands[name].usage)
	}
	fmt.Fprintln(w, "\nflags: -sources FILE (default $ONCEHOOK_SOURCES_FILE), -table NAME (default $TABLE_NAME), -stack FILE (default\n"+
		"$ONCEHOOK_STACK, else "+StackFile+" in this folder: a local deploy's stack, its endpoint, table, sources and URLs)")
	fmt.Fprintln(w, "Each command takes -h for its own help.")
}
