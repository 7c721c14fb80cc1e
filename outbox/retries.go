package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/oncehook/oncehook/dedup"
)

// Scheduler wakes a claim at a given time, so that a retried intent runs close to its due time.
// Best effort: a wake-up not scheduled, or lost, leaves the intent to the sweeper.
type Scheduler interface {
	Schedule(ctx context.Context, claimPK string, due time.Time) error
}

// SQSAPI is the part of the SQS client SQSScheduler uses.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// MaxScheduleDelay is SQS's longest message delay; a longer wait is scheduled in steps.
const MaxScheduleDelay = 15 * time.Minute

// SQSScheduler schedules wake-ups as messages on an SQS queue, delayed until they are due,
// which the outbox function consumes (HandleRetries). A retry's own write cannot wake the
// worker at the right time (a stream record arrives at once), and the sweeper runs every few
// minutes; a delayed message costs a send and a receive per retry, and nothing without.
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
		DelaySeconds: int32(ceilSecond(delay) / time.Second),
	})
	if err != nil {
		return fmt.Errorf("schedule %s: %w", claimPK, err)
	}
	return nil
}

// HandleRetries processes a batch of SQSScheduler's wake-ups: it reads each claim and runs what
// is due; a wake-up that came early is scheduled again for the rest. Messages whose claim could
// not be processed are returned as batch item failures, for SQS to deliver again.
func (w *Worker) HandleRetries(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	failed := w.each(len(ev.Records), func(i int) bool {
		msg := ev.Records[i]
		var wk wakeup
		if err := json.Unmarshal([]byte(msg.Body), &wk); err != nil || wk.PK == "" {
			// Nothing will make it readable: drop it (the sweeper still has the truth).
			w.cfg.Logger.LogAttrs(ctx, slog.LevelError, "unreadable wake-up", slog.String("message_id", msg.MessageId))
			return false
		}
		err := w.wake(ctx, wk)
		if err != nil {
			w.cfg.Logger.LogAttrs(ctx, slog.LevelError, "wake-up not processed",
				slog.String("message_id", msg.MessageId), slog.String("pk", wk.PK), slog.String("error", err.Error()))
		}
		return err != nil
	})
	// An empty list, not null: some engines (MiniStack) cannot read a null list.
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, i := range failed {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
	}
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
	// its next attempt, a running one a margin after its lease ends (its worker may have stopped).
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

// Handle is the outbox function's Lambda handler: stream batches (HandleStream) and wake-ups
// (HandleRetries), told apart by their records' event source (EventSource).
func (w *Worker) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	src, err := EventSource(raw)
	if err != nil {
		return nil, fmt.Errorf("outbox: not an event this function takes: %w", err)
	}
	switch src {
	case "":
		return events.DynamoDBEventResponse{}, nil
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

// EventSource is the eventSource of a Lambda event's first record ("aws:dynamodb" for the
// table's stream, "aws:sqs" for the retry queue), read that far and no further: a stream batch
// is up to 6 MB. Its Records key is matched as encoding/json matches it, in any letter case.
// It is "" for an event without records, and an error for what is not an object, or a first
// record without an eventSource.
func EventSource(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t == nil {
		return "", err // null: no records
	} else if t != json.Delim('{') {
		return "", errors.New("not a JSON object")
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", err
		}
		// The key as the decoder of the whole event matches it: in any letter case.
		if k, _ := key.(string); !strings.EqualFold(k, "Records") {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", err
			}
			continue
		}
		if t, err := dec.Token(); err != nil {
			return "", err
		} else if t == nil { // "Records": null, no records unless a later key has some
			continue
		} else if t != json.Delim('[') {
			return "", errors.New("Records is not an array")
		}
		if !dec.More() {
			if _, err := dec.Token(); err != nil { // ], or the error of a body cut short
				return "", err
			}
			continue
		}
		var first struct {
			EventSource string `json:"eventSource"`
		}
		if err := dec.Decode(&first); err != nil {
			return "", err
		}
		if first.EventSource == "" {
			return "", errors.New("a record without an eventSource")
		}
		return first.EventSource, nil
	}
	_, err := dec.Token() // }, or the error of a body cut short
	return "", err
}
