package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	logtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/oncehook/oncehook/internal/harness"
)

const logsUsage = "logs [-since D -follow -filter PATTERN] [receiver|outbox|sweeper ...]"

type logsFlags struct {
	since  time.Duration
	follow bool
	filter string
}

func (f *logsFlags) define(fs *flag.FlagSet) {
	fs.DurationVar(&f.since, "since", 15*time.Minute, "print what the functions logged this long ago and since")
	fs.BoolVar(&f.follow, "follow", false, "keep printing new lines as they come, until Ctrl-C")
	fs.StringVar(&f.filter, "filter", "", "a CloudWatch Logs filter pattern (e.g. '\"order.paid\"' or '{ $.level = \"ERROR\" }')")
}

// logs prints the deployment's functions' log lines, oldest first, each after its function's
// role and time: the functions of the table's stack, found as the storm finds them, read from
// their log groups through CloudWatch Logs (the emulator's on a local stack, as on AWS).
func logs(ctx context.Context, c *cli, args []string) error {
	roles := args
	if len(roles) == 0 {
		roles = harness.Roles
	}
	for _, r := range roles {
		if !slices.Contains(harness.Roles, r) {
			return fmt.Errorf("%q is not a function: want %v", r, harness.Roles)
		}
	}
	if err := c.needTable(""); err != nil {
		return err
	}
	cfg, err := c.config(ctx)
	if err != nil {
		return err
	}
	dep, err := harness.FindDeployment(ctx, lambda.NewFromConfig(cfg), c.table)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cw := cloudwatchlogs.NewFromConfig(cfg)
	since := time.Now().Add(-c.logs.since)
	printed := map[string]int64{} // event ids and times: a poll's window starts at the last line's millisecond
	for {
		type line struct {
			role string
			ev   logtypes.FilteredLogEvent
		}
		var lines []line
		for _, role := range roles {
			events, err := dep.LogEvents(ctx, cw, role, since, c.logs.filter)
			if err != nil {
				return err
			}
			for _, ev := range events {
				if id := eventKey(ev); printed[id] == 0 {
					printed[id] = aws.ToInt64(ev.Timestamp)
					lines = append(lines, line{role, ev})
				}
			}
		}
		slices.SortStableFunc(lines, func(a, b line) int { return int(aws.ToInt64(a.ev.Timestamp) - aws.ToInt64(b.ev.Timestamp)) })
		for _, l := range lines {
			at := time.UnixMilli(aws.ToInt64(l.ev.Timestamp)).UTC().Format("15:04:05.000")
			// Escaped as any stored text, but for the tabs that part the runtime's own lines (REPORT).
			fields := strings.Split(strings.TrimRight(aws.ToString(l.ev.Message), "\r\n"), "\t")
			for i := range fields {
				fields[i] = printable(fields[i])
			}
			fmt.Fprintf(c.stdout, "%-8s %s  %s\n", l.role, at, strings.Join(fields, "\t"))
			since = time.UnixMilli(max(since.UnixMilli(), aws.ToInt64(l.ev.Timestamp)))
		}
		maps.DeleteFunc(printed, func(_ string, at int64) bool { return at < since.UnixMilli() })
		if !c.logs.follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// eventKey tells a log line from the others a poll reads again: its event id, or, from an
// emulator that gives none (MiniStack's are empty), its stream, time and text.
func eventKey(ev logtypes.FilteredLogEvent) string {
	if id := aws.ToString(ev.EventId); id != "" {
		return id
	}
	return fmt.Sprint(aws.ToString(ev.LogStreamName), "\x00", aws.ToInt64(ev.Timestamp), "\x00", aws.ToString(ev.Message))
}
