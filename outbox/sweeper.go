package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// Sweeper is the outbox's safety net: it re-drives intents the stream and retry paths left
// behind (a wake-up that was lost, a lease that expired with a crashed worker, records whose
// batch gave up). A stream mapping's on-failure destination carries only metadata, so the
// table, not a queue, is the truth, and the sweeper reads it through the open part of the
// sparse pending index (no scans): the due shards and the due-parked ones (dedup.OpenShards).
//
// One Run works those shards at once, a claim of each in turn from a shard chosen at
// random (so none starves when a run stops early), and runs up to Concurrency claims at a
// time. It takes no claim it could not finish before its invocation's deadline. Runs never
// overlap: a run holds a lock item in the table (SweepLockPK), and a run that finds it held
// does nothing. Claims with a parked intent are counted through the index's parked and
// due-parked shards (dedup.ParkedViewShards), without reading them; a parked intent is left
// alone until an operator re-drives or resolves it.
type Sweeper struct {
	Worker *Worker
	// MinAge skips claims younger than this: the stream path is still on them. Default 2 min.
	MinAge time.Duration
	// Concurrency bounds the claims swept at once. Default 32.
	Concurrency int
	// Audit, when set, samples effect records for ones written outside a claim after each
	// sweep that has time left (dedup.Auditor): the leak audit, on the sweeper's schedule.
	Audit *dedup.Auditor
	// AuditTables audit the application's own tables the same way, after Audit (each an
	// Auditor with Audited set); their findings join the same report.
	AuditTables []*dedup.Auditor
}

// The sweeper's lock item. Its key is in the claims' key space (EVT#), which effect records
// may not use, with an empty source, which no claim can have.
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
	// HandedOff counts the deferred claims whose intent the run had no time for and handed
	// to the outbox function instead, through a wake-up due now (Config.Scheduler).
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
	owner, held, err := s.lock(ctx)
	if err != nil {
		return rep, err
	}
	if held {
		rep.Skipped = true
		return rep, nil
	}
	defer s.unlock(owner)
	s.checkDeadline(ctx)

	if rep.Parked, err = s.countParked(ctx); err != nil {
		return rep, err
	}
	minAge := s.MinAge
	if minAge == 0 {
		minAge = 2 * time.Minute
	}
	cutoff := w.cfg.Now().Add(-minAge).UnixMilli()
	conc := s.Concurrency
	if conc <= 0 {
		conc = 32
	}

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

// walk reads the open shards (due, due-parked) a page at a time and hands their keys to the sweepers one shard
// after another, a claim from each in turn (starting from a random shard), so that a run that
// stops early has served every shard alike. It stops when every shard is read, or when the
// deadline leaves no time for another claim.
func (s *Sweeper) walk(ctx context.Context, cutoff int64, keys chan<- map[string]types.AttributeValue, rep *SweepReport, mu *sync.Mutex) error {
	w := s.Worker
	shards := dedup.OpenShards(w.cfg.PendingShards)
	type cursor struct {
		shard string
		start map[string]types.AttributeValue
		buf   []map[string]types.AttributeValue
		read  bool // every page read
	}
	cursors := make([]*cursor, len(shards))
	first := rand.N(len(shards))
	for i := range shards {
		cursors[i] = &cursor{shard: shards[(first+i)%len(shards)]}
	}
	incomplete := func() { mu.Lock(); rep.Incomplete = true; mu.Unlock() }
	var errs []error
	for {
		progress := false
		for _, c := range cursors {
			if !s.hasTime(ctx) {
				incomplete()
				return errors.Join(errs...)
			}
			if len(c.buf) == 0 && !c.read {
				in := indexQuery(w.cfg.Table, c.shard)
				in.KeyConditionExpression = aws.String(*in.KeyConditionExpression + " AND " + dedup.IndexSortKey + " <= :cutoff")
				in.ExpressionAttributeValues[":cutoff"], in.ExclusiveStartKey = num(cutoff), c.start
				page, err := w.api.Query(ctx, in)
				if err != nil {
					// One shard failing must not stop the others; the next run tries it again.
					errs = append(errs, fmt.Errorf("sweep shard %s: %w", c.shard, err))
					incomplete()
					c.read = true
					continue
				}
				c.buf, c.start = page.Items, page.LastEvaluatedKey
				c.read = c.start == nil
			}
			if len(c.buf) == 0 {
				continue
			}
			select {
			case keys <- c.buf[0]:
			case <-ctx.Done():
				incomplete()
				return errors.Join(append(errs, ctx.Err())...)
			}
			c.buf = c.buf[1:]
			progress = true
		}
		if !progress {
			done := true
			for _, c := range cursors {
				done = done && c.read && len(c.buf) == 0
			}
			if done {
				return errors.Join(errs...)
			}
		}
	}
}

// hasTime reports whether the run's deadline leaves time for another claim: the fastest
// target's call and the margins for the reads and writes around it. (Process checks each
// intent against its own target's budget before leasing it.)
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

// checkDeadline says, once per run, when the run's whole deadline cannot fit a target's call
// and the margins around it: every intent of that target would be deferred by every run of a
// sweeper this short. outbox.PlanTimings sizes the stack's sweeper so that it never happens.
func (s *Sweeper) checkDeadline(ctx context.Context) {
	d, ok := ctx.Deadline()
	if !ok {
		return
	}
	w := s.Worker
	left := time.Until(d)
	for _, name := range slices.Sorted(maps.Keys(w.cfg.Executors)) {
		need := w.callBudget(name) + 3*w.cfg.Margin
		if left >= need {
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

// sweepOne reads the claim itself (the index holds keys only, and may lag) and runs what is due,
// or settles a claim its index place does not fit (Worker.Process).
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
	cctx, span := s.Worker.startSweepClaim(ctx, claim)
	sum, err := s.Worker.Process(cctx, claim)
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
		// The run had no time for one of its intents (its target's calls are longer than what
		// is left, perhaps longer than any run of this sweeper): the outbox function, whose
		// timeout fits the slowest target, runs it now rather than a next run that may be as
		// short. The wake-up is idempotent: it reads the claim and leases what is still due.
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

// countParked counts the claims with a parked intent: those under the parked and due-parked
// shards, where the claim's transitions put every such claim, and no other (a count query
// over index keys: the claims themselves are not read).
func (s *Sweeper) countParked(ctx context.Context) (int, error) {
	w := s.Worker
	n := 0
	for _, shard := range dedup.ParkedViewShards(w.cfg.PendingShards) {
		in := indexQuery(w.cfg.Table, shard)
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

// lock takes the sweeper's lock item until the run's deadline (or 15 minutes without one). It
// reports held when another run has it.
func (s *Sweeper) lock(ctx context.Context) (owner string, held bool, err error) {
	w := s.Worker
	now := w.cfg.Now()
	until := now.Add(15 * time.Minute)
	if d, ok := ctx.Deadline(); ok {
		until = now.Add(time.Until(d))
	}
	owner = strconv.FormatUint(rand.Uint64(), 36)
	_, err = w.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(w.cfg.Table),
		Key:                       itemKey(SweepLockPK, SweepLockSK),
		UpdateExpression:          aws.String("SET lock_until = :until, lock_owner = :owner"),
		ConditionExpression:       aws.String("attribute_not_exists(lock_until) OR lock_until < :now OR lock_owner = :owner"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":until": num(until.UnixMilli()), ":now": num(now.UnixMilli()), ":owner": str(owner)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return "", true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("sweep lock: %w", err)
	}
	return owner, false, nil
}

// unlock releases the lock if it is still ours. It runs after the run's context may have
// ended, so it gets a few seconds of its own.
func (s *Sweeper) unlock(owner string) {
	w := s.Worker
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = w.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(w.cfg.Table),
		Key:                       itemKey(SweepLockPK, SweepLockSK),
		UpdateExpression:          aws.String("REMOVE lock_until, lock_owner"),
		ConditionExpression:       aws.String("lock_owner = :owner"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": str(owner)},
	})
}
