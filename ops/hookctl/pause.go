package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/outbox"
)

// pause holds every call to a target (its downstream's maintenance) until resume: its intents
// wait, pending, spending no attempt (outbox.Targets). With no target, it lists the paused ones.
func pause(ctx context.Context, c *cli, args []string) error {
	if len(args) == 1 {
		return errors.New("want <target> <why...>, or nothing to list the paused targets")
	}
	targets, err := c.targets(ctx)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		paused, err := targets.Paused(ctx)
		if err != nil {
			return err
		}
		w := c.columns()
		fmt.Fprintln(w, "TARGET\tPAUSED AT\tBY\tWHY")
		for _, name := range slices.Sorted(maps.Keys(paused)) {
			p := paused[name]
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", printable(name), p.At.Format(time.RFC3339), printable(p.By), printable(p.Why))
		}
		w.Flush()
		fmt.Fprintf(c.stdout, "%d paused targets\n", len(paused))
		return nil
	}
	// A name the deployment does not call would pause nothing: refused when the sources file says so.
	f, err := c.namedSources()
	if err != nil {
		return err
	}
	if f != nil && f.Targets[args[0]] == nil {
		return fmt.Errorf("the sources file has no target %q", args[0])
	}
	why := strings.Join(args[1:], " ")
	if err := targets.Pause(ctx, args[0], operator("hookctl pause"), why); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "paused %s: %s\nits intents wait, spending no attempt, until: hookctl resume %s\n", args[0], why, args[0])
	return nil
}

// resume lets a paused target's calls go again. It is unconditional (outbox.Targets.Resume): no
// confirmation shown before it could go stale, unlike the console's. It says whose pause it
// lifted, as read just before.
func resume(ctx context.Context, c *cli, args []string) error {
	if len(args) != 1 {
		return errors.New("want <target>")
	}
	targets, err := c.targets(ctx)
	if err != nil {
		return err
	}
	paused, err := targets.Paused(ctx)
	if err != nil {
		return err
	}
	if err := targets.Resume(ctx, args[0]); err != nil {
		return err
	}
	p, ok := paused[args[0]]
	if !ok {
		fmt.Fprintf(c.stdout, "resumed %s: it was not paused\n", args[0])
		return nil
	}
	fmt.Fprintf(c.stdout, "resumed %s (paused by %s since %s: %s): the sweeper's next run calls its held intents, at its limits\n",
		args[0], printable(p.By), p.At.Format(time.RFC3339), printable(p.Why))
	return nil
}

// targets pauses and resumes targets on the table.
func (c *cli) targets(ctx context.Context) (*outbox.Targets, error) {
	db, err := c.dynamo(ctx)
	if err != nil {
		return nil, err
	}
	return &outbox.Targets{API: db, Table: c.table}, nil
}
