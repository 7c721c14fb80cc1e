package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/launch"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

// The local stack's "shop" source and its email target: each new order.paid event is one
// transaction of the claim (which carries the email intent) and the shipment record.
const (
	source      = "shop"
	secret      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	sourcesJSON = `{"sources": {"shop": {"scheme": "standard-webhooks", "secrets": [{"env": "SHOP_SECRET"}],
	  "retry_horizon": "72h", "redrive_window": "30d"}},
	 "targets": {"email": {"url": "http://127.0.0.1:8025/send"}}}`
)

// Config is one run's shape.
type Config struct {
	New        int    // events delivered once, in the first pass
	Redrive    int    // deliveries in the redrive
	Duplicates int    // of the redrive's deliveries, copies of first-pass events (the rest are new)
	Senders    int    // deliveries in flight at once
	Seed       uint64 // the redrive's order
	Probe      string // the receiver's duplicate probe: "" (its default), "on" or "off"
}

func (c Config) validate() error {
	switch {
	case c.New < 0 || c.Redrive < 0 || c.Duplicates < 0:
		return errors.New("counts cannot be negative")
	case c.Duplicates > c.New:
		return fmt.Errorf("-duplicates %d: a redrive can only repeat the %d events sent first", c.Duplicates, c.New)
	case c.Duplicates > c.Redrive:
		return fmt.Errorf("-duplicates %d is more than the redrive's %d deliveries", c.Duplicates, c.Redrive)
	case c.Senders < 1:
		return errors.New("-senders must be at least 1")
	case c.Probe != "" && c.Probe != "on" && c.Probe != "off":
		return fmt.Errorf("-probe=%q: want on or off", c.Probe)
	}
	return nil
}

// setProbe is the one place the probe setting reaches the receiver's configuration: off sets
// Config.NoDuplicateProbe; on and "" leave the receiver's default, on.
func setProbe(cfg *receiver.Config, probe string) {
	cfg.NoDuplicateProbe = probe == "off"
}

// Row is what one kind of delivery cost: the first pass's new events, the redrive's new
// events, or the redrive's duplicates.
type Row struct {
	Pass, Delivery string
	Deliveries     int
	Outcomes       map[string]int // by receivertest.Outcome
	Calls          map[string]int // SDK calls, by DynamoDB operation
	Requests       int            // HTTP requests sent, retries included
	Cancelled      int            // TransactWriteItems cancelled
	WriteUnits     int
	ReadUnits      float64
	Largest        int // the largest item charged, in bytes
	Unpriced       int // calls of an operation whose units are not computed here
	Unbilled       int // calls that failed other than by their condition: not charged here
}

// Report is a run's result: its rows, in order, and each pass's wall time.
type Report struct {
	Config
	Rows        []*Row
	First, Redo time.Duration
}

// Run sends cfg.New new events, then the redrive, through a receiver built as the receiver
// function builds it over a real store on table, counting each delivery's DynamoDB calls and
// their units.
func Run(ctx context.Context, awsCfg aws.Config, table string, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	file, err := sources.Parse([]byte(sourcesJSON))
	if err != nil {
		return nil, err
	}
	m := &meter{}
	h, err := newReceiver(ctx, dynamodb.NewFromConfig(awsCfg, m.attach), file, table, cfg.Probe)
	if err != nil {
		return nil, err
	}
	run := mrand.Uint32()
	id := func(i int) string { return fmt.Sprintf("msg_bench_%08x_%d", run, i) }

	row := func(pass, delivery string) *Row {
		return &Row{Pass: pass, Delivery: delivery, Outcomes: map[string]int{}, Calls: map[string]int{}}
	}
	first, redNew, redDup := row("first pass", "new"), row("redrive", "new"), row("redrive", "duplicate")
	r := &Report{Config: cfg, Rows: []*Row{first, redNew, redDup}}

	var pass []delivery
	for i := range cfg.New {
		pass = append(pass, delivery{id(i), first})
	}
	start := time.Now()
	if err := send(ctx, h, file, m, pass, cfg.Senders); err != nil {
		return nil, err
	}
	r.First = time.Since(start)

	rng := mrand.New(mrand.NewPCG(cfg.Seed, 0))
	pass = pass[:0]
	for _, i := range rng.Perm(cfg.New)[:cfg.Duplicates] {
		pass = append(pass, delivery{id(i), redDup})
	}
	for i := range cfg.Redrive - cfg.Duplicates {
		pass = append(pass, delivery{id(cfg.New + i), redNew})
	}
	rng.Shuffle(len(pass), func(i, j int) { pass[i], pass[j] = pass[j], pass[i] })
	start = time.Now()
	if err := send(ctx, h, file, m, pass, cfg.Senders); err != nil {
		return nil, err
	}
	r.Redo = time.Since(start)
	return r, nil
}

// newReceiver builds the receiver as launch.NewReceiver does (launch.ReceiverConfig), with the
// reference planners on the shop source and a store writing through client.
func newReceiver(ctx context.Context, client *dynamodb.Client, file *sources.File, table, probe string) (*receiver.Handler, error) {
	secrets, err := sources.NewSecrets(ctx, file, &sources.Resolver{Getenv: func(string) string { return secret }}, launch.SecretRefresh)
	if err != nil {
		return nil, err
	}
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: file.Retentions()})
	if err != nil {
		return nil, err
	}
	planners := receiver.NewPlanners()
	orders.Register(planners, source)
	cfg := launch.ReceiverConfig(deployment.Settings{}, file)
	cfg.Secrets, cfg.Store, cfg.Planners = secrets, store, planners
	cfg.Logger = slog.New(slog.DiscardHandler) // one line per delivery: not what is measured
	cfg.Metrics = io.Discard
	setProbe(&cfg, probe)
	return receiver.New(cfg)
}

type delivery struct {
	id  string
	row *Row
}

// send delivers each of ds, signed anew as a provider's redelivery is, senders at a time.
func send(ctx context.Context, h *receiver.Handler, file *sources.File, m *meter, ds []delivery, senders int) error {
	work := make(chan delivery)
	errs := make(chan error, senders)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for d := range work {
				body := fmt.Sprintf(`{"type":%q,"data":{"order_id":"ord_%s","customer_email":"ada@example.com"}}`, orders.EventType, d.id)
				req, err := receivertest.Request(file, source, secret, []byte(body), receivertest.WithEventID(d.id))
				if err != nil {
					errs <- err
					return
				}
				resp, err := receivertest.Deliver(context.WithValue(ctx, rowKey{}, d.row), h, req)
				if err != nil {
					errs <- fmt.Errorf("delivery %s: %w", d.id, err)
					return
				}
				m.outcome(d.row, resp.Outcome.String())
			}
		})
	}
	var err error
feed:
	for _, d := range ds {
		select {
		case work <- d:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}

// rowKey carries a delivery's Row through the receiver and the store to the SDK's middleware.
type rowKey struct{}

// meter charges each DynamoDB call made for a delivery to the delivery's Row: SDK middleware
// on the real client, seeing each call's input and result and each HTTP request sent.
type meter struct{ mu sync.Mutex }

func (m *meter) attach(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		if err := s.Initialize.Add(middleware.InitializeMiddlewareFunc("benchredrive.calls", m.call), middleware.Before); err != nil {
			return err
		}
		// After the retry middleware: once per HTTP request.
		return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("benchredrive.requests", m.request), middleware.After)
	})
}

func (m *meter) outcome(r *Row, o string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r.Deliveries++
	r.Outcomes[o]++
}

func (m *meter) request(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if r, ok := ctx.Value(rowKey{}).(*Row); ok {
		m.mu.Lock()
		r.Requests++
		m.mu.Unlock()
	}
	return next.HandleFinalize(ctx, in)
}

func (m *meter) call(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleInitialize(ctx, in)
	if r, ok := ctx.Value(rowKey{}).(*Row); ok {
		m.mu.Lock()
		charge(r, in.Parameters, out.Result, err)
		m.mu.Unlock()
	}
	return out, md, err
}

// charge adds one call to r, with the units DynamoDB charges for it by its sizing rules
// (package capacity). A failed condition is charged by the item that failed it (returned by
// ReturnValuesOnConditionCheckFailure), or by the item sent when that is larger, never less;
// a transaction cancelled by a condition as its writes would have been (docs/capacity.md has
// the sources).
func charge(r *Row, params, result any, err error) {
	op := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", params), "*dynamodb."), "Input")
	r.Calls[op]++
	ccf, failed := errors.AsType[*types.ConditionalCheckFailedException](err)
	tce, cancelled := errors.AsType[*types.TransactionCanceledException](err)
	if err != nil && !cancelled && !failed {
		r.Unbilled++
		return
	}
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		size := dedup.ItemSize(in.Item)
		if ccf != nil {
			size = max(size, dedup.ItemSize(ccf.Item))
		}
		r.WriteUnits += dedup.WriteUnits(size, false)
		r.Largest = max(r.Largest, size)
	case *dynamodb.TransactWriteItemsInput:
		for i, a := range in.TransactItems {
			size := actionSize(a)
			if cancelled && i < len(tce.CancellationReasons) {
				size = max(size, dedup.ItemSize(tce.CancellationReasons[i].Item))
			}
			r.WriteUnits += dedup.WriteUnits(size, true)
			r.Largest = max(r.Largest, size)
		}
		if cancelled {
			r.Cancelled++
		}
	case *dynamodb.GetItemInput:
		size := dedup.ItemSize(result.(*dynamodb.GetItemOutput).Item)
		r.ReadUnits += dedup.ReadUnits(size, aws.ToBool(in.ConsistentRead))
		r.Largest = max(r.Largest, size)
	default:
		r.Unpriced++
	}
}

// actionSize is the size a transaction's action is charged on as far as its request shows it:
// a put's item; an update's key and values (the item after the update may be larger); a
// delete's or a check's key.
func actionSize(a types.TransactWriteItem) int {
	switch {
	case a.Put != nil:
		return dedup.ItemSize(a.Put.Item)
	case a.Update != nil:
		return dedup.ItemSize(a.Update.Key) + dedup.ItemSize(a.Update.ExpressionAttributeValues)
	case a.Delete != nil:
		return dedup.ItemSize(a.Delete.Key)
	case a.ConditionCheck != nil:
		return dedup.ItemSize(a.ConditionCheck.Key)
	}
	return 0
}
