package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/oncehook/oncehook/dedup"
)

// Scheduler wakes a claim at a given time, so that a retried intent runs close to its due time
// instead of waiting for the sweeper. It is best effort: a wake-up that cannot be scheduled,
// or is lost, leaves the intent to the sweeper, which reads the table.
type Scheduler interface {
	Schedule(ctx context.Context, claimPK string, due time.Time) error
}

// SQSAPI is the part of the SQS client SQSScheduler uses.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// MaxScheduleDelay is SQS's longest message delay. DefaultBackoff never waits longer; a
// longer wait is scheduled in steps (the worker schedules the rest when a wake-up comes early).
const MaxScheduleDelay = 15 * time.Minute

// SQSScheduler schedules wake-ups as messages on an SQS queue, delayed until they are due
// (DelaySeconds, at most 15 minutes), which the outbox function consumes (HandleRetries).
//
// Why a delay queue: a retry's own write cannot wake the worker at the right time (a stream
// record arrives at once, and a filter cannot compare with the clock), and the sweeper runs
// every few minutes. A delayed message costs one send and one receive per retry, nothing when
// there are no retries, and needs no scheduler of our own.
type SQSScheduler struct {
	API      SQSAPI
	QueueURL string
	Now      func() time.Time // time.Now when nil
}

// wakeup is the body of a scheduled message.
type wakeup struct {
	PK  string `json:"pk"`
	Due int64  `json:"due"` // epoch ms
}

// Schedule sends one delayed message for the claim.
func (s *SQSScheduler) Schedule(ctx context.Context, claimPK string, due time.Time) error {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	delay := min(max(due.Sub(now()), 0), MaxScheduleDelay)
	body, _ := json.Marshal(wakeup{PK: claimPK, Due: due.UnixMilli()})
	_, err := s.API.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(s.QueueURL),
		MessageBody:  aws.String(string(body)),
		DelaySeconds: int32((delay + time.Second - 1) / time.Second),
	})
	if err != nil {
		return fmt.Errorf("schedule %s: %w", claimPK, err)
	}
	return nil
}

// HandleRetries processes a batch of scheduled wake-ups (SQSScheduler's messages): it reads
// each claim as stored and runs what is due. A wake-up that came before its intent is due (a
// backoff longer than MaxScheduleDelay, or a clock apart) is scheduled again for the rest.
// Messages whose claim could not be processed are returned as batch item failures, so SQS
// delivers them again after their visibility timeout.
func (w *Worker) HandleRetries(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	// An empty list, not null: some engines (MiniStack) cannot read a null list.
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	var mu sync.Mutex
	w.each(len(ev.Records), func(i int) {
		msg := ev.Records[i]
		var wk wakeup
		if err := json.Unmarshal([]byte(msg.Body), &wk); err != nil || wk.PK == "" {
			// Nothing will make it readable: drop it (the sweeper still has the truth).
			w.cfg.Logger.LogAttrs(ctx, slog.LevelError, "unreadable wake-up", slog.String("message_id", msg.MessageId))
			return
		}
		if err := w.wake(ctx, wk); err != nil {
			w.cfg.Logger.LogAttrs(ctx, slog.LevelError, "wake-up not processed",
				slog.String("message_id", msg.MessageId), slog.String("pk", wk.PK), slog.String("error", err.Error()))
			mu.Lock()
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			mu.Unlock()
		}
	})
	return resp, nil
}

func (w *Worker) wake(ctx context.Context, wk wakeup) error {
	item, err := w.readClaim(ctx, wk.PK)
	if err != nil || item == nil {
		return err // nil: expired and deleted, nothing left to do
	}
	claim, err := dedup.UnmarshalClaim(item)
	if err != nil {
		w.cfg.Logger.LogAttrs(ctx, slog.LevelError, "undecodable claim", slog.String("pk", wk.PK), slog.String("error", err.Error()))
		return nil
	}
	sum, err := w.Process(ctx, claim)
	if err != nil || len(sum) > 0 || w.cfg.Scheduler == nil {
		return err
	}
	// Nothing was due: early. Wake again when the earliest open intent is due: a pending one at
	// its next attempt, a running one when its lease has ended (its worker may have stopped, or
	// failed to record the call: the woken claim runs it again, or parks it at most once), a
	// margin after, as lease does.
	now := w.cfg.Now().UnixMilli()
	var next int64
	for _, in := range claim.Intents {
		at := int64(0)
		switch in.Status {
		case dedup.IntentPending:
			at = in.NextAttemptAt
		case dedup.IntentRunning:
			at = in.LeaseUntil + w.cfg.Margin.Milliseconds()
		}
		if at > now && (next == 0 || at < next) {
			next = at
		}
	}
	if next == 0 {
		return nil
	}
	return w.cfg.Scheduler.Schedule(ctx, claim.PK, time.UnixMilli(next))
}

// readClaim reads the claim item of pk as stored (nil when it is gone).
func (w *Worker) readClaim(ctx context.Context, pk string) (map[string]types.AttributeValue, error) {
	out, err := w.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(w.cfg.Table), Key: dedup.ClaimItemKey(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read claim: %w", err)
	}
	return out.Item, nil
}

// Handle is the outbox function's Lambda handler: it takes the table's DynamoDB stream
// batches (HandleStream) and the scheduled wake-ups from SQS (HandleRetries), told apart by
// their records' event source, and answers each with its partial batch response.
func (w *Worker) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var peek struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	if err := json.Unmarshal(raw, &peek); err != nil {
		return nil, fmt.Errorf("outbox: not an event this function takes: %w", err)
	}
	if len(peek.Records) == 0 {
		return events.DynamoDBEventResponse{}, nil
	}
	switch src := peek.Records[0].EventSource; src {
	case "aws:dynamodb":
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		return w.HandleStream(ctx, ev)
	case "aws:sqs":
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		return w.HandleRetries(ctx, ev)
	default:
		return nil, errors.New("outbox: records from " + src + " are not this function's")
	}
}
