package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// HandleStream processes a DynamoDB Streams batch: INSERT and MODIFY records of claims with due
// intents, each self-contained (the claim carries its whole outbox). Records that could not be
// processed are returned as batch item failures, so only they are delivered again.
func (w *Worker) HandleStream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	failed := w.each(len(ev.Records), func(i int) bool {
		rec := ev.Records[i]
		claim, ok := w.claimOf(ctx, rec)
		if !ok {
			return false
		}
		_, err := w.Process(ctx, claim)
		if err == nil {
			return false
		}
		attrs := []slog.Attr{slog.String("sequence_number", rec.Change.SequenceNumber), slog.String("event_id", claim.EventID),
			slog.String("error", err.Error())}
		// A record that keeps failing is bisected and at last sent to the failure queue,
		// which carries no claim (and some engines drop it at once): a wake-up gives the
		// claim a second path that needs neither (best effort: the sweeper is the last).
		if w.cfg.Scheduler != nil {
			if serr := w.cfg.Scheduler.Schedule(ctx, claim.PK, w.cfg.Now().Add(failedRecordWake)); serr != nil {
				attrs = append(attrs, slog.String("schedule_error", serr.Error()))
			}
		}
		w.cfg.Logger.LogAttrs(ctx, slog.LevelError, "record not processed", attrs...)
		return true
	})
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}} // [], not null
	for _, i := range failed {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: ev.Records[i].Change.SequenceNumber})
	}
	return resp, nil
}

// failedRecordWake is when a claim whose stream record could not be processed is woken again.
const failedRecordWake = 2 * time.Second

// claimOf decodes a record's claim when the record is one to act on.
func (w *Worker) claimOf(ctx context.Context, rec events.DynamoDBEventRecord) (*dedup.Claim, bool) {
	if rec.EventName != string(events.DynamoDBOperationTypeInsert) && rec.EventName != string(events.DynamoDBOperationTypeModify) {
		return nil, false // REMOVE: a TTL deletion or a cleanup; nothing to run
	}
	item, err := FromStreamImage(rec.Change.NewImage)
	if err == nil && !dedup.IsOutboxClaim(item) {
		return nil, false // an effect record, or a claim with nothing to run
	}
	if err == nil {
		var c *dedup.Claim
		if c, err = dedup.UnmarshalClaim(item); err == nil {
			return c, true
		}
	}
	// A claim we cannot read will not get better by replaying it: log it loudly, skip it.
	w.cfg.Logger.LogAttrs(ctx, slog.LevelError, "undecodable claim record",
		slog.String("sequence_number", rec.Change.SequenceNumber), slog.String("error", err.Error()))
	return nil, false
}

// FromStreamImage converts a Lambda stream record's image into SDK attribute values.
func FromStreamImage(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		av, err := fromStream(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

func fromStream(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		l := v.List()
		out := make([]types.AttributeValue, len(l))
		for i, e := range l {
			av, err := fromStream(e)
			if err != nil {
				return nil, err
			}
			out[i] = av
		}
		return &types.AttributeValueMemberL{Value: out}, nil
	case events.DataTypeMap:
		m, err := FromStreamImage(v.Map())
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unsupported stream attribute type %v", v.DataType())
}
