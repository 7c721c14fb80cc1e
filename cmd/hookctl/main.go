// Command hookctl is the operator's CLI for an oncehook deployment, local or on AWS. It talks
// to AWS through the standard credentials chain and AWS_ENDPOINT_URL, like the functions.
//
//	hookctl inspect <source> <event_id>         the claim, its effects and its intents
//	hookctl redrive <source> <event_id> [intent] put parked intents back to pending
//	hookctl parked                              every parked intent, with its last error
//	hookctl check-retention                     each source's retention against its provider
//	hookctl send <source> <url>                 sign a body (stdin) as the provider would, POST it
//	hookctl storm <source> <url>                N events x K concurrent copies, then verify
//	hookctl replay <source> <url> <file.jsonl>  send recorded deliveries, rate-limited (a redrive)
//	hookctl audit                               effect records without a claim (leaks)
//	hookctl backfill <source> <file>            claim ids processed before dedup was switched on
//	hookctl coldstart <bootstrap>               the receiver binary's cold start under a local Runtime API
//	hookctl console                             the operator console, a web UI (package console)
//
// Common flags: -sources (default $ONCEHOOK_SOURCES_FILE or examples/sources.json) and -table
// (default $TABLE_NAME).
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
	"inspect":         {"inspect <source> <event_id>", inspect},
	"redrive":         {"redrive <source> <event_id> [intent]", redrive},
	"parked":          {"parked", parked},
	"check-retention": {"check-retention", checkRetention},
	"send":            {"send [-id msg_id] <source> <url>   (body on stdin)", send},
	"storm":           {"storm [-events N -copies K -concurrency C -downstream ADDR -wait D -faults SPEC -retries N -sweep D] <source> <url>", storm},
	"replay":          {"replay [-rate N -copies K -shuffle] <source> <url> <file.jsonl>", replay},
	"audit":           {"audit [-prefix P -sample N]", audit},
	"backfill":        {"backfill <source> <file>   (lines: event_id [TAB processed-at RFC 3339])", backfill},
	"coldstart":       {coldstartUsage, coldstart},
	"console":         {consoleUsage, consoleCmd},
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
	for _, name := range []string{"inspect", "redrive", "parked", "check-retention", "send", "storm", "replay", "audit", "backfill", "coldstart", "console"} {
		fmt.Fprintln(w, "  "+commands[name].usage)
	}
	fmt.Fprintln(w, "\nflags: -sources FILE (default $ONCEHOOK_SOURCES_FILE or examples/sources.json), -table NAME (default $TABLE_NAME)")
	fmt.Fprintln(w, "Each command takes -h for its own help.")
}
