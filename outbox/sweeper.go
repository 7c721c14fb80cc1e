package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// Sweeper is the outbox's safety net: it re-drives intents the stream and retry paths left
// behind (a lost wake-up, a lease expired with a crashed worker, a batch that gave up). The
// table, not a queue, is the truth (a stream's on-failure destination carries only metadata):
// the sweeper reads the open shards of the sparse pending index (dedup.OpenShards), no scans.
//
// One Run takes a claim of each shard in turn, from a random one (so none starves when a run
// stops early), up to Concurrency at a time, and none it could not finish before its deadline.
// Runs never overlap: a run holds a lock item (SweepLockPK), and one that finds it held does
// nothing. Claims with a parked intent are counted, not read; a parked intent waits for an
// operator.
type Sweeper struct {
	Worker *Worker
	// MinAge skips claims younger than this: the stream path is still on them. Default
	// DefaultSweepMinAge.
	MinAge time.Duration
	// Concurrency bounds the claims swept at once. Default 32.
	Concurrency int
	// Audit, when set, runs the leak audit (dedup.Auditor) after each sweep that has time left.
	Audit *dedup.Auditor
	// AuditTables audit the application's own tables the same way, into the same report.
	AuditTables []*dedup.Auditor
}

// DefaultSweepMinAge is Sweeper.MinAge's default.
const DefaultSweepMinAge = 2 * time.Minute

// The sweeper's lock item, in the claims' key space with a source no claim can have.
const (
	SweepLockPK = dedup.ClaimPrefix + "#sweeper"
	SweepLockSK = "LOCK"
)

// SweepReport is what one Run found and did.
type SweepReport struct {
	Claims   int     // claims in the open shards old enough to look at, read
	Summary  Summary // outcomes of the intents it ran
	Parked   int     // claims with a parked intent: under the parked and due-parked shards
	Settled  int     // claims with nothing open moved out of the due index
	Failures int     // claims whose steps could not be recorded
	// Deferred counts the claims left for the next run because the deadline was near;
	// Incomplete is true when the run stopped before reading every open shard to its end.
	Deferred   int
	Incomplete bool
	// HandedOff counts the deferred claims handed to the outbox function with a wake-up due now.
	HandedOff int
	// Skipped is true when another run held the lock: this one did nothing.
	Skipped bool
	// Audit is the leak audit's report, when one ran.
	Audit *dedup.AuditReport
}

// Run sweeps the open shards of the pending index once. Its report reaches Metrics even when
// it stops early.
func (s *Sweeper) Run(ctx context.Context) (rep SweepReport, err error) {
	w := s.Worker
	rep.Summary = Summary{}
	ctx, span := w.tracer.Start(ctx, SpanSweep, internalSpan...)
	defer func() { endSweep(span, &rep, err) }()
	defer func() {
		w.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "sweep",
			slog.Int("claims", rep.Claims), slog.Int("parked_claims", rep.Parked), slog.Int("settled", rep.Settled),
			slog.Int("failures", rep.Failures), slog.Int("deferred", rep.Deferred), slog.Bool("incomplete", rep.Incomplete),
			slog.Bool("skipped", rep.Skipped), slog.Any("outcomes", map[string]int(rep.Summary)))
		w.cfg.Metrics.Sweep(rep)
	}()
	lock, err := s.lock(ctx)
	if err != nil {
		return rep, err
	}
	if lock == nil {
		rep.Skipped = true
		return rep, nil
	}
	defer lock.release(ctx)
	s.checkDeadline(ctx)

	if rep.Parked, err = s.countParked(ctx); err != nil {
		return rep, err
	}
	cutoff := w.cfg.Now().Add(-cmp.Or(s.MinAge, DefaultSweepMinAge)).UnixMilli()
	conc := cmp.Or(max(s.Concurrency, 0), 32)

	var mu sync.Mutex // guards rep from here on
	keys := make(chan map[string]types.AttributeValue)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for key := range keys {
				s.sweepOne(ctx, key, &rep, &mu)
			}
		})
	}
	qerr := s.walk(ctx, cutoff, keys, &rep, &mu)
	close(keys)
	wg.Wait()
	audits := s.AuditTables
	if s.Audit != nil {
		audits = append([]*dedup.Auditor{s.Audit}, audits...)
	}
	for _, auditor := range audits {
		if !s.hasTime(ctx) {
			break
		}
		a, err := auditor.Run(ctx)
		if err != nil {
			return rep, errors.Join(qerr, err)
		}
		if rep.Audit == nil {
			rep.Audit = &dedup.AuditReport{Wrapped: a.Wrapped}
		}
		rep.Audit.Read += a.Read
		rep.Audit.Effects += a.Effects
		rep.Audit.WithoutClaimCount += a.WithoutClaimCount
		rep.Audit.WithoutClaim = append(rep.Audit.WithoutClaim, a.WithoutClaim...)
		for _, k := range a.WithoutClaim {
			w.cfg.Logger.LogAttrs(ctx, slog.LevelError, "effect record without a claim (written outside oncehook's transaction)",
				slog.String("table", k.Table), slog.String("pk", k.PK), slog.String("sk", k.SK))
		}
	}
	return rep, qerr
}

// walk reads the open shards a page at a time and hands their keys out a claim from each shard
// in turn, from a random one, so that a run that stops early has served every shard alike. It
// stops when every shard is read, or the deadline leaves no time for another claim.
func (s *Sweeper) walk(ctx context.Context, cutoff int64, keys chan<- map[string]types.AttributeValue, rep *SweepReport, mu *sync.Mutex) error {
	w := s.Worker
	type cursor struct {
		shard string
		pages *dynamodb.QueryPaginator // nil once a page failed
		buf   []map[string]types.AttributeValue
	}
	shards := dedup.OpenShards(w.cfg.PendingShards)
	first := rand.N(len(shards))
	cursors := make([]*cursor, len(shards))
	for i := range shards {
		shard := shards[(first+i)%len(shards)]
		in := dedup.IndexQuery(w.cfg.Table, shard)
		in.KeyConditionExpression = aws.String(*in.KeyConditionExpression + " AND " + dedup.IndexSortKey + " <= :cutoff")
		in.ExpressionAttributeValues[":cutoff"] = num(cutoff)
		cursors[i] = &cursor{shard: shard, pages: dynamodb.NewQueryPaginator(w.api, in)}
	}
	incomplete := func() { mu.Lock(); rep.Incomplete = true; mu.Unlock() }
	var errs []error
	for done := false; !done; {
		done = true
		for _, c := range cursors {
			if !s.hasTime(ctx) {
				incomplete()
				return errors.Join(errs...)
			}
			if len(c.buf) == 0 && c.pages != nil && c.pages.HasMorePages() {
				page, err := c.pages.NextPage(ctx)
				if err != nil {
					// One shard failing must not stop the others; the next run tries it again.
					errs = append(errs, fmt.Errorf("sweep shard %s: %w", c.shard, err))
					incomplete()
					c.pages = nil
					continue
				}
				c.buf = page.Items
			}
			if len(c.buf) > 0 {
				select {
				case keys <- c.buf[0]:
				case <-ctx.Done():
					incomplete()
					return errors.Join(append(errs, ctx.Err())...)
				}
				c.buf = c.buf[1:]
			}
			done = done && len(c.buf) == 0 && (c.pages == nil || !c.pages.HasMorePages())
		}
	}
	return errors.Join(errs...)
}

// hasTime reports whether the run's deadline leaves time for another claim: the fastest
// target's call and the margins around it (Process checks each intent's own target).
func (s *Sweeper) hasTime(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	if !ok {
		return true
	}
	w := s.Worker
	need := w.cfg.Lease - w.cfg.Margin
	for name := range w.cfg.Executors {
		need = min(need, w.callBudget(name))
	}
	return time.Until(d) >= need+2*w.cfg.Margin
}

// checkDeadline logs, once per run, each target whose call does not fit the run's deadline:
// every run this short would defer its intents (PlanTimings sizes the sweeper against it).
func (s *Sweeper) checkDeadline(ctx context.Context) {
	d, ok := ctx.Deadline()
	if !ok {
		return
	}
	w := s.Worker
	left := time.Until(d)
	for _, name := range slices.Sorted(maps.Keys(w.cfg.Executors)) {
		if left >= (Timings{MaxCall: w.callBudget(name), Margin: w.cfg.Margin}).NeededSweeperTimeout() {
			continue
		}
		then := "they are handed to the outbox function"
		if w.cfg.Scheduler == nil {
			then = "with no Scheduler to hand them to, they wait for the stream path alone"
		}
		w.cfg.Logger.LogAttrs(ctx, slog.LevelError, fmt.Sprintf("sweep: this run cannot run target %q's intents (its calls take up to %s, the run has %s): %s; "+
			"give the sweeper the timeout outbox.PlanTimings derives", name, w.callBudget(name), left.Round(time.Millisecond), then),
			slog.String("target", name))
	}
}

// sweepOne reads the claim (the index holds keys only, and may lag) and processes it.
func (s *Sweeper) sweepOne(ctx context.Context, key map[string]types.AttributeValue, rep *SweepReport, mu *sync.Mutex) {
	w := s.Worker
	count := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	if !s.hasTime(ctx) {
		count(func() { rep.Deferred++; rep.Incomplete = true })
		return
	}
	pk, _ := key[dedup.PartitionKey].(*types.AttributeValueMemberS)
	if pk == nil {
		return
	}
	item, err := w.readClaim(ctx, pk.Value)
	if err != nil {
		count(func() { rep.Failures++ })
		return
	}
	if item == nil {
		return
	}
	claim, err := dedup.UnmarshalClaim(item)
	if err != nil {
		count(func() { rep.Failures++ })
		return
	}
	count(func() { rep.Claims++ })
	cctx, span := w.startInClaim(ctx, claim, SpanSweepClaim, internalSpan)
	sum, err := w.Process(cctx, claim)
	endSweepClaim(span, sum, err)
	settled := !claim.Open() && claim.PendingShard != ""
	count(func() {
		for k, v := range sum {
			rep.Summary[k] += v
		}
		if settled && err == nil {
			rep.Settled++
		}
		switch {
		case errors.Is(err, ErrNoTime):
			rep.Deferred++
			rep.Incomplete = true
		case err != nil:
			rep.Failures++
		}
	})
	if errors.Is(err, ErrNoTime) && w.cfg.Scheduler != nil {
		// No time left for an intent: the outbox function, whose timeout fits the slowest
		// target, runs it now rather than a next run that may be as short. (Idempotent: the
		// wake-up leases only what is still due.)
		if serr := w.cfg.Scheduler.Schedule(ctx, claim.PK, w.cfg.Now()); serr == nil {
			count(func() { rep.HandedOff++ })
		} else {
			w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "sweep: a deferred claim could not be handed to the outbox",
				slog.String("event_id", claim.EventID), slog.String("error", serr.Error()))
		}
	}
	if err != nil && !errors.Is(err, ErrNoTime) {
		w.cfg.Logger.LogAttrs(ctx, slog.LevelError, "sweep: claim not processed",
			slog.String("event_id", claim.EventID), slog.String("error", err.Error()))
	}
}

// countParked counts the claims under the parked and due-parked shards: those with a parked
// intent, by a count query over index keys.
func (s *Sweeper) countParked(ctx context.Context) (int, error) {
	w := s.Worker
	n := 0
	for _, shard := range dedup.ParkedViewShards(w.cfg.PendingShards) {
		in := dedup.IndexQuery(w.cfg.Table, shard)
		in.Select = types.SelectCount
		p := dynamodb.NewQueryPaginator(w.api, in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return n, fmt.Errorf("count parked claims in %s: %w", shard, err)
			}
			n += int(page.Count)
		}
	}
	return n, nil
}

// lock takes the sweeper's lock item until the run's deadline (or 15 minutes); nil when another
// run holds it.
func (s *Sweeper) lock(ctx context.Context) (*heldItem, error) {
	w := s.Worker
	now := w.cfg.Now()
	until := now.Add(15 * time.Minute)
	if d, ok := ctx.Deadline(); ok {
		until = now.Add(time.Until(d))
	}
	lock := &heldItem{api: w.api, table: w.cfg.Table, pk: SweepLockPK, sk: SweepLockSK, owner: newToken()}
	taken, err := lock.take(ctx, now, until)
	if err != nil {
		return nil, fmt.Errorf("sweep lock: %w", err)
	}
	if !taken {
		return nil, nil
	}
	return lock, nil
}
