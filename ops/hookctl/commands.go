package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/ops/console"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

func inspect(ctx context.Context, c *cli, args []string) error {
	if len(args) != 2 {
		return errors.New("want <source> <event_id>")
	}
	cl, err := c.claim(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	// The target's type and delivery, and its secrets to redact, come from the sources file.
	f, err := c.namedSources()
	if err != nil {
		return err
	}
	red := console.NewRedactor(f)
	w := c.columns()
	fmt.Fprintf(w, "claim\t%s\n", printable(cl.PK))
	fmt.Fprintf(w, "type\t%s\n", printable(cl.EventType))
	fmt.Fprintf(w, "outcome\t%s\n", printable(cl.Outcome))
	fmt.Fprintf(w, "first delivery\t%s at %s\n", printable(cmp.Or(cl.DeliveryID, "-")), cl.ReceivedAt.Format(time.RFC3339))
	fmt.Fprintf(w, "expires\t%s\n", time.Unix(cl.ExpiresAt, 0).UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "payload\t%d bytes, sha256 %s\n", cl.PayloadBytes, printable(cl.PayloadSHA256))
	if sc := cl.TraceContext(); sc.IsValid() {
		fmt.Fprintf(w, "trace\t%s (committed under span %s)\n", sc.TraceID(), sc.SpanID())
	}
	for _, k := range cl.Effects {
		if k.Table != "" {
			fmt.Fprintf(w, "effect\t%s: %s / %s\n", printable(k.Table), printable(k.PK), printable(cmp.Or(k.SK, "-")))
			continue
		}
		fmt.Fprintf(w, "effect\t%s / %s\n", printable(k.PK), printable(k.SK))
	}
	for _, i := range cl.Absorbed {
		fmt.Fprintf(w, "absorbed\teffects[%d] (its own condition failed)\n", i)
	}
	w.Flush()
	if len(cl.Intents) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	w = c.columns()
	kinds := map[string]string{}
	if f != nil {
		for name, t := range f.Targets {
			kinds[name] = " (" + t.Type
			if t.Delivery == sources.AtMostOnce {
				kinds[name] += ", at-most-once"
			}
			kinds[name] += ")"
		}
	}
	fmt.Fprintln(w, "INTENT\tTARGET\tSTATUS\tATTEMPTS\tSENT\tLAST ERROR")
	names := slices.Sorted(maps.Keys(cl.Intents))
	for _, name := range names {
		in := cl.Intents[name]
		fmt.Fprintf(w, "%s\t%s%s\t%s\t%d\t%s\t%s\n", printable(name), printable(in.Target), kinds[in.Target], printable(in.Status), in.Attempts,
			printable(cmp.Or(in.Sent, "-")), printable(cmp.Or(red.IntentError(in, in.LastError), "-")))
	}
	w.Flush()
	// Each intent's history (its last dedup.HistoryLength attempts and operators' actions),
	// newest first: the attempt, how it ended, the answer's status code, its error or who.
	for _, name := range names {
		if len(cl.Intents[name].History) == 0 {
			continue
		}
		fmt.Fprintf(c.stdout, "\n%s, newest first:\n", printable(name))
		w = c.columns()
		for _, a := range slices.Backward(cl.Intents[name].History) {
			code, what := "-", red.IntentError(cl.Intents[name], a.Error)
			if a.Code != 0 {
				code = strconv.Itoa(a.Code)
			}
			if a.By != "" {
				what = "by " + a.By
			}
			if a.Late {
				what = "late (its lease was taken over; its call was made): " + what
			}
			fmt.Fprintf(w, "  %s\t#%d\t%s\t%s\t%s\n", time.UnixMilli(a.At).UTC().Format(time.RFC3339), a.Attempt, printable(a.Outcome), code, printable(what))
		}
		w.Flush()
	}
	return nil
}

func redrive(ctx context.Context, c *cli, args []string) error {
	if len(args) < 2 || len(args) > 3 {
		return errors.New("want <source> <event_id> [intent]")
	}
	cl, err := c.claim(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(cl.Intents))
	if len(args) == 3 {
		names = []string{args[2]}
	}
	db, _ := c.dynamo(ctx)
	claims, n, skipped := &dedup.Claims{API: db, Table: c.table}, 0, 0
	for _, name := range names {
		if len(args) == 2 { // the event's parked intents
			if cl.Intents[name].Status != dedup.IntentParked {
				continue
			}
			// An at-most-once call that may have reached its downstream is re-driven only by
			// name, after checking the downstream: as in the console, never with others.
			if outbox.MayHaveBeenSent(cl.Intents[name]) {
				fmt.Fprintf(c.stderr, "hookctl redrive: left %s parked: it is at-most-once and its call may have been sent; check the downstream, then: hookctl redrive %s %s %s\n",
					printable(name), printable(shellQuote(cl.Source)), printable(shellQuote(cl.EventID)), printable(shellQuote(name)))
				skipped++
				continue
			}
		}
		if err := claims.RedriveBy(ctx, cl, name, operator("hookctl redrive")); err != nil {
			return fmt.Errorf("%s: %w", printable(name), err)
		}
		fmt.Fprintf(c.stdout, "re-drove %s (%s)\n", printable(name), printable(dedup.IdempotencyKey(cl.Source, cl.EventID, name)))
		n++
	}
	if n == 0 && skipped == 0 {
		fmt.Fprintln(c.stdout, "nothing parked")
	}
	return nil
}

// resolve closes a parked intent that will never succeed (or was done by hand), with why:
// never run again, out of the parked view and its alarm (dedup.Claims.Resolve).
func resolve(ctx context.Context, c *cli, args []string) error {
	if len(args) < 4 {
		return errors.New("want <source> <event_id> <intent> <why...>")
	}
	cl, err := c.claim(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	db, _ := c.dynamo(ctx)
	why := strings.Join(args[3:], " ")
	if err := (&dedup.Claims{API: db, Table: c.table}).Resolve(ctx, cl, args[2], operator("hookctl resolve"), why); err != nil {
		return fmt.Errorf("%s: %w", args[2], err)
	}
	fmt.Fprintf(c.stdout, "resolved %s (%s): %s\n", args[2], dedup.IdempotencyKey(cl.Source, cl.EventID, args[2]), why)
	return nil
}

func checkRetention(ctx context.Context, c *cli, args []string) error {
	if len(args) != 0 {
		return errors.New("takes no arguments")
	}
	f, err := c.sources()
	if err != nil {
		return err // a short retention is refused by the loader itself, naming the source
	}
	w := c.columns()
	fmt.Fprintln(w, "SOURCE\tRETRY HORIZON\tREDRIVE WINDOW\tNEEDED\tKEEP\tOK")
	for _, name := range f.Names() {
		r := f.Sources[name].Retention()
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\tyes\n", name, sources.Duration(r.RetryHorizon), sources.Duration(r.RedriveWindow),
			sources.Duration(r.Needed()), sources.Duration(r.Effective()))
	}
	w.Flush()
	for _, w := range f.Warnings() {
		fmt.Fprintln(c.stderr, "warning:", w)
	}
	if c.table == "" {
		return nil
	}
	db, err := c.dynamo(ctx)
	if err != nil {
		return err
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(c.table)})
	if err != nil {
		return err
	}
	d := ttl.TimeToLiveDescription
	if d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != dedup.TTLAttribute {
		return fmt.Errorf("table %s: TTL is not enabled on %s", c.table, dedup.TTLAttribute)
	}
	fmt.Fprintf(c.stdout, "table %s: TTL enabled on %s\n", c.table, dedup.TTLAttribute)
	return nil
}

// parked lists the parked intents: the claims under the pending index's parked shards (where
// the outbox puts a claim once nothing in it is open and something is parked), each read for
// its parked intents' errors. This is the list the ParkedIntents alarm points to.
func parked(ctx context.Context, c *cli, args []string) error {
	if len(args) != 0 {
		return errors.New("takes no arguments")
	}
	shards, err := c.shards()
	if err != nil {
		return err
	}
	db, err := c.dynamo(ctx)
	if err != nil {
		return err
	}
	f, err := c.namedSources() // the targets' secrets, to redact
	if err != nil {
		return err
	}
	red := console.NewRedactor(f)
	w := c.columns()
	fmt.Fprintln(w, "SOURCE\tEVENT ID\tINTENT\tTARGET\tATTEMPTS\tPARKED AT\tLAST ERROR")
	n := 0
	for cl, err := range outbox.ParkedClaims(ctx, db, c.table, shards) {
		if err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(cl.Intents)) {
			if in := cl.Intents[name]; in.Status == dedup.IntentParked {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", printable(cl.Source), printable(cl.EventID), printable(name), printable(in.Target), in.Attempts,
					printable(cmp.Or(in.FinishedAt, "-")), printable(cmp.Or(red.IntentError(in, in.LastError), "-")))
				n++
			}
		}
	}
	w.Flush()
	fmt.Fprintf(c.stdout, "%d parked intents; re-drive one with: hookctl redrive <source> <event_id> [intent]\n", n)
	return nil
}
