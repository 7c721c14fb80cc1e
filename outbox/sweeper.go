package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// Sweeper re-drives intents the stream path left behind: retries whose backoff has passed,
// leases that expired with a crashed worker, records whose batch gave up. A stream mapping's
// on-failure destination carries only metadata, so the table, not the queue, is the truth,
// and the sweeper reads it through the sparse pending index (no scans).
//
// Parked intents are counted and left alone until an operator re-drives them.
type Sweeper struct {
	Worker *Worker
	// MinAge skips claims younger than this: the stream path is still on them. Default 2 min.
	MinAge time.Duration
}

// SweepReport is what one Run found and did.
type SweepReport struct {
	Claims   int     // claims in the pending index old enough to look at
	Summary  Summary // outcomes of the intents it ran
	Parked   int     // parked intents seen (left alone)
	Failures int     // claims whose steps could not be recorded
}

// Run sweeps every shard of the pending index once.
func (s *Sweeper) Run(ctx context.Context) (SweepReport, error) {
	w := s.Worker
	minAge := s.MinAge
	if minAge == 0 {
		minAge = 2 * time.Minute
	}
	rep := SweepReport{Summary: Summary{}}
	cutoff := w.cfg.Now().Add(-minAge).UnixMilli()
	for shard := range dedup.PendingShards {
		p := dynamodb.NewQueryPaginator(w.api, &dynamodb.QueryInput{
			TableName:              aws.String(w.cfg.Table),
			IndexName:              aws.String(dedup.PendingIndex),
			KeyConditionExpression: aws.String("pending_shard = :s AND pending_since <= :cutoff"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":s":      str("P" + strconv.Itoa(shard)),
				":cutoff": num(cutoff),
			},
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return rep, fmt.Errorf("sweep shard %d: %w", shard, err)
			}
			for _, key := range page.Items {
				s.sweepOne(ctx, key, &rep)
			}
		}
	}
	w.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "sweep",
		slog.Int("claims", rep.Claims), slog.Int("parked", rep.Parked), slog.Int("failures", rep.Failures),
		slog.Any("outcomes", map[string]int(rep.Summary)))
	w.cfg.Metrics.Sweep(rep)
	return rep, nil
}

// sweepOne reads the claim itself (the index holds keys only, and may lag) and runs what is due.
func (s *Sweeper) sweepOne(ctx context.Context, key map[string]types.AttributeValue, rep *SweepReport) {
	w := s.Worker
	out, err := w.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(w.cfg.Table),
		Key:            map[string]types.AttributeValue{dedup.AttrPK: key[dedup.AttrPK], dedup.AttrSK: key[dedup.AttrSK]},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil || out.Item == nil {
		if err != nil {
			rep.Failures++
		}
		return
	}
	claim, err := dedup.UnmarshalClaim(out.Item)
	if err != nil {
		rep.Failures++
		return
	}
	rep.Claims++
	for name, in := range claim.Intents {
		if in.Status == dedup.IntentParked {
			rep.Parked++
			// Listed on every sweep until an operator re-drives or retires it.
			w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "parked intent",
				slog.String("source", claim.Source), slog.String("event_id", claim.EventID), slog.String("intent", name),
				slog.String("target", in.Target), slog.Int("attempts", in.Attempts), slog.String("last_error", in.LastError))
		}
	}
	sum, err := w.Process(ctx, claim)
	for k, v := range sum {
		rep.Summary[k] += v
	}
	if err != nil {
		rep.Failures++
		w.cfg.Logger.LogAttrs(ctx, slog.LevelError, "sweep: claim not processed",
			slog.String("event_id", claim.EventID), slog.String("error", err.Error()))
	}
}
