package dedup

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The table's attribute names. The CDK stack, the outbox worker and the operator's CLI read
// the same names from here.
const (
	PartitionKey      = "pk"
	SortKey           = "sk"
	TTLAttribute      = "expires_at" // TTL attribute, epoch seconds
	attrSource        = "source"
	attrEventID       = "event_id"
	attrEventType     = "event_type"
	attrDeliveryID    = "delivery_id"
	attrReceivedAt    = "received_at"
	attrOccurredAt    = "occurred_at"
	attrPayloadSHA256 = "payload_sha256"
	attrPayloadBytes  = "payload_bytes"
	attrCommitToken   = "commit_token"
	attrOutcome       = "outcome"
	attrEffects       = "effects"
	attrEffectTable   = "table" // in an effects entry: the table of an effect In another one
	attrAbsorbed      = "absorbed"
	attrBodyGuard     = "body_guard" // on a claim whose event guards its body: the hex SHA-256 its guard item is keyed by
	attrIntents       = "intents"
	IndexPartitionKey = "pending_shard" // sparse GSI hash key: a due shard while intents are open, a parked shard after
	IndexSortKey      = "pending_since" // sparse GSI range key, epoch milliseconds
	// attrWake is present only on writes that hand the outbox worker due work: the commit and
	// an operator's redrive. The stream filter passes MODIFY records only when it is there,
	// and the worker's lease removes it, so the worker's own lease and finish writes never
	// invoke it again.
	attrWake           = "wake"
	ClaimedByAttribute = "claimed_by" // on effect records: the pk of the claim that wrote them
	attrIntentTarget   = "target"
	attrIntentPayload  = "payload"
	attrIntentStatus   = "status"
	attrIntentAttempts = "attempts"
	// Written by an operator's redrive (outbox.RedriveBy): who re-drove the intent last, and
	// when (RFC 3339).
	attrIntentRedrivenBy = "redriven_by"
	attrIntentRedrivenAt = "redriven_at"
	// attrIntentRedriveID is the last redrive's nonce: how a redrive whose answer was lost
	// recognises its own write when the SDK sends it again (and not another's, made in the
	// same millisecond).
	attrIntentRedriveID = "redrive_id"
)

// ClaimSK is the sort key of every claim item; PendingIndex is the sparse GSI over claims
// with open intents (pending or running) or parked ones, spread over a number of hash keys of
// each kind (the shard count: PendingShards unless configured) so that no single GSI partition
// takes every write. A claim's place follows from its intents' statuses alone, and keeps its
// shard number: under its due shard ("P<n>") while an intent is open and none is parked, its
// due-parked shard ("due-parked-<n>") while one is open and one is parked, its parked shard
// ("parked-<n>") once none is open and one is parked, and out of the index once every intent is
// done or resolved. The sweeper reads the due and due-parked shards (OpenShards: the open
// work); the parked view and its alarm read the parked and due-parked ones (ParkedViewShards:
// every claim with a parked intent, and no other).
const (
	ClaimSK = "CLAIM"
	// BodySK is the sort key of a body guard (Event.GuardBody): pk EVT#<source>#<body sha256>.
	// Its key cannot meet a claim's (their sort keys differ) nor an effect's (EVT# is reserved).
	BodySK       = "BODY"
	ClaimPrefix  = "EVT#"
	PendingIndex = "pending"
	// PendingShards is the default shard count. docs/capacity.md says when to raise it.
	PendingShards = 16
	// MaxPendingShards bounds a configured shard count.
	MaxPendingShards = 1024
)

// MaxIntents bounds the intents of one event. A write that moves the claim in the pending index
// may name every other intent in its condition (so that the claim leaves the index only when
// all are finished), and DynamoDB limits an expression to 4 KB; 50 intents keep that condition
// under 3 KB whatever their names.
const MaxIntents = 50

// IntentBookkeepingBytes is the room Commit keeps free in the claim, per intent, for what the
// outbox worker and an operator's redrive add later. The longest is a done after earlier
// failures: the last_error of a failed attempt (up to 515 bytes) next to what the call sent (up
// to 515), with finished_at, lease_owner, attempts_base, a growing attempt count and the last
// redrive's record (redriven_by, up to MaxRedrivenBy bytes, redriven_at and its 16-byte
// redrive_id): about 1,270 bytes (a lease adds lease_until and next_attempt_at, never with
// sent), rounded up for the claim's shard name (due-parked-<n> the longest); and the history,
// HistoryLength entries of up to HistoryEntryBytes in a list (10 bytes): 2,250 more. A claim
// that would not leave it is refused with a *LimitError: DynamoDB refuses a write that takes an
// item over 400 KB, and a lease or a done that can never be written would leave the intent
// unrunnable, or called again after every lease expiry.
const IntentBookkeepingBytes = 3658

// MaxRedrivenBy bounds ClaimIntent.RedrivenBy, who re-drove the intent last.
const MaxRedrivenBy = 64

// Intent statuses. Commit writes every intent as pending; the outbox worker moves them on; an
// operator re-drives a parked intent (pending again) or resolves it (Claims.Resolve).
const (
	IntentPending = "pending"
	IntentRunning = "running"
	IntentDone    = "done"
	IntentParked  = "parked"
	// IntentResolved is a parked intent an operator closed without running it again (it will
	// never succeed, or was done by hand), with why: finished, like done, and out of the
	// parked view and its alarm.
	IntentResolved = "resolved"
)

// MaxResolution bounds the reason an operator gives for resolving an intent.
const MaxResolution = 200

// ClaimKey is the claim's partition key: EVT#<source>#<event_id>. Sources cannot contain '#',
// so the first '#' after the prefix ends the source and no two (source, id) pairs collide.
func ClaimKey(source, eventID string) string {
	return string(appendClaimKey(make([]byte, 0, len(ClaimPrefix)+len(source)+1+len(eventID)), source, eventID))
}

// ClaimItemKey is the key of the claim item whose partition key is pk (ClaimKey), for reads.
func ClaimItemKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{PartitionKey: str(pk), SortKey: str(ClaimSK)}
}

func appendClaimKey(b []byte, source, eventID string) []byte {
	b = append(b, ClaimPrefix...)
	b = append(b, source...)
	b = append(b, '#')
	return append(b, eventID...)
}

// PendingShard is the claim's due shard with the default shard count: DueShard(pk, PendingShards).
func PendingShard(pk string) string { return DueShard(pk, PendingShards) }

// DueShard spreads claims with open intents over shards due hash keys: "P" and the FNV-1a hash
// of the claim's key modulo shards. A claim keeps its shard number for life; raising the
// shard count later moves only new claims, so the count may grow but must never shrink (a
// claim under a shard the sweeper no longer reads would be left behind).
func DueShard(pk string, shards int) string {
	n := shardOf(pk, shards)
	if n < len(dueNames) {
		return dueNames[n]
	}
	return "P" + strconv.Itoa(n)
}

// ParkedShardFor is the parked hash key of the same number as another one ("P3" or
// "due-parked-3" -> "parked-3"): the outbox moves a claim between its shards without knowing
// the shard count.
func ParkedShardFor(shard string) string { return parkedPrefix + shardNumber(shard) }

// DueShardFor is the due hash key of the same number as another one ("parked-3" -> "P3").
func DueShardFor(shard string) string { return "P" + shardNumber(shard) }

// DueParkedShardFor is the due-parked hash key of the same number as another one ("P3" ->
// "due-parked-3"): a claim's place while one of its intents is open and another parked.
func DueParkedShardFor(shard string) string { return dueParkedPrefix + shardNumber(shard) }

// IsParkedShard reports whether a pending_shard value is a parked shard: nothing of its claims
// is open, and something is parked.
func IsParkedShard(s string) bool { return strings.HasPrefix(s, parkedPrefix) }

// IsDueParkedShard reports whether a pending_shard value is a due-parked shard: its claims
// have an intent open and one parked.
func IsDueParkedShard(s string) bool { return strings.HasPrefix(s, dueParkedPrefix) }

// InParkedView reports whether a claim under the pending_shard value s has a parked intent:
// s is a parked or a due-parked shard.
func InParkedView(s string) bool { return IsParkedShard(s) || IsDueParkedShard(s) }

// ShardNames lists every due and parked hash key for a shard count.
func ShardNames(shards int) (due, parked []string) {
	return shardNames("P", shards), shardNames(parkedPrefix, shards)
}

// DueParkedShards lists every due-parked hash key for a shard count.
func DueParkedShards(shards int) []string { return shardNames(dueParkedPrefix, shards) }

// OpenShards lists the hash keys whose claims have open intents, for a shard count: the due
// shards, then the due-parked ones. The sweeper reads them.
func OpenShards(shards int) []string {
	return append(shardNames("P", shards), DueParkedShards(shards)...)
}

// ParkedViewShards lists the hash keys whose claims have a parked intent, for a shard count:
// the parked shards, then the due-parked ones. The parked view (the console's Parked page,
// hookctl parked) lists their claims, and the sweeper counts them for the parked alarm.
func ParkedViewShards(shards int) []string {
	return append(shardNames(parkedPrefix, shards), DueParkedShards(shards)...)
}

// shardNames are the hash keys prefix0 to prefix<shards-1>.
func shardNames(prefix string, shards int) []string {
	names := make([]string, shards)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	return names
}

const (
	parkedPrefix    = "parked-"
	dueParkedPrefix = "due-parked-"
)

// shardNumber is the number of a due, parked or due-parked hash key.
func shardNumber(s string) string {
	for _, p := range [...]string{dueParkedPrefix, parkedPrefix, "P"} {
		if n, ok := strings.CutPrefix(s, p); ok {
			return n
		}
	}
	return s
}

func shardOf(pk string, shards int) int {
	h := uint32(2166136261) // FNV-1a, as hash/fnv's New32a, without its allocation
	for i := 0; i < len(pk); i++ {
		h ^= uint32(pk[i])
		h *= 16777619
	}
	return int(h % uint32(max(shards, 1)))
}

// dueNames are the first due shards' names, formatted once: the commit's hot path takes one.
var dueNames, _ = ShardNames(256)

// Claim is a claim item as stored, for readers (the outbox worker, the CLI, duplicate
// handling). Commit writes it field by field rather than through attributevalue, which keeps
// the hot path free of reflection; TestClaimRoundTrip keeps the two in step.
type Claim struct {
	PK            string      `dynamodbav:"pk"`
	SK            string      `dynamodbav:"sk"`
	Source        string      `dynamodbav:"source"`
	EventID       string      `dynamodbav:"event_id"`
	EventType     string      `dynamodbav:"event_type"`
	DeliveryID    string      `dynamodbav:"delivery_id,omitempty"`
	ReceivedAt    time.Time   `dynamodbav:"received_at"`
	OccurredAt    time.Time   `dynamodbav:"occurred_at,omitempty"`
	PayloadSHA256 string      `dynamodbav:"payload_sha256"`
	PayloadBytes  int         `dynamodbav:"payload_bytes"`
	ExpiresAt     int64       `dynamodbav:"expires_at"`
	CommitToken   string      `dynamodbav:"commit_token"`
	Outcome       string      `dynamodbav:"outcome"`
	Effects       []EffectKey `dynamodbav:"effects,omitempty"`
	Absorbed      []int       `dynamodbav:"absorbed,omitempty"`
	// BodyGuard is the hex SHA-256 the event's body guard is keyed by (ClaimKey(Source,
	// BodyGuard) / BodySK), for an event committed with GuardBody.
	BodyGuard    string                 `dynamodbav:"body_guard,omitempty"`
	Intents      map[string]ClaimIntent `dynamodbav:"intents,omitempty"`
	PendingShard string                 `dynamodbav:"pending_shard,omitempty"`
	PendingSince int64                  `dynamodbav:"pending_since,omitempty"`
	Wake         int64                  `dynamodbav:"wake,omitempty"`
	// Trace is the span context the claim was committed under, for a claim with intents
	// committed with a span in its context (see TraceContext).
	Trace StoredTrace `dynamodbav:"trace,omitempty"`
}

// Open reports whether any intent is pending or running.
func (c *Claim) Open() bool {
	for _, in := range c.Intents {
		if class(in.Status) == classOpen {
			return true
		}
	}
	return false
}

// ClaimIntent is one outbox entry inside a claim. Attempts doubles as the lease's fencing
// token: every lease increments it, and a worker may only finish the attempt it leased.
type ClaimIntent struct {
	Target        string `dynamodbav:"target"`
	Payload       []byte `dynamodbav:"payload"`
	Status        string `dynamodbav:"status"`
	Attempts      int    `dynamodbav:"attempts"`
	LeaseUntil    int64  `dynamodbav:"lease_until,omitempty"`     // epoch ms; a running intent past it may be taken again
	NextAttemptAt int64  `dynamodbav:"next_attempt_at,omitempty"` // epoch ms; a pending intent is not run before it
	LastError     string `dynamodbav:"last_error,omitempty"`
	FinishedAt    string `dynamodbav:"finished_at,omitempty"` // RFC 3339, when it became done or parked
	// AttemptsBase is the attempt count the budget counts from (an operator's redrive, a lease
	// given back): Attempts itself, the fencing token, only ever grows.
	AttemptsBase int `dynamodbav:"attempts_base,omitempty"`
	// LeaseOwner identifies the lease holder: a worker whose write was sent again after a lost
	// answer recognises its own.
	LeaseOwner string `dynamodbav:"lease_owner,omitempty"`
	// Sent is what the executor's call produced, when it says (a message id, an execution
	// ARN): recorded as the intent is done.
	Sent string `dynamodbav:"sent,omitempty"`
	// RedrivenBy and RedrivenAt record the last operator's redrive: who (as the operator's
	// tool named them) and when, RFC 3339.
	RedrivenBy string `dynamodbav:"redriven_by,omitempty"`
	RedrivenAt string `dynamodbav:"redriven_at,omitempty"`
	// RedriveID is the last redrive's nonce (attrIntentRedriveID), or the last resolve's.
	RedriveID string `dynamodbav:"redrive_id,omitempty"`
	// Resolution, ResolvedBy and ResolvedAt record an operator's resolve (Claims.Resolve): why,
	// who, and when (RFC 3339).
	Resolution string `dynamodbav:"resolution,omitempty"`
	ResolvedBy string `dynamodbav:"resolved_by,omitempty"`
	ResolvedAt string `dynamodbav:"resolved_at,omitempty"`
	// History is how the intent's last HistoryLength attempts ended, and the operator's
	// redrives and resolve among them, oldest first (in the order written): each written by the
	// transition it records, in the same write (Claims), or, for an attempt whose lease was
	// taken over before it recorded how its call ended, by a write of its own after the refused
	// one (Attempt.Late). An attempt whose worker stopped before recording it has no entry (its
	// number is missing), nor has a lease given back unused (GiveBack: no call).
	History []Attempt `dynamodbav:"history,omitempty"`
}

// Attempt is one entry of an intent's history: how a leased attempt ended (done, retry,
// parked), or an operator's redrive or resolve.
type Attempt struct {
	// Attempt is the intent's attempt count when the entry was written: the attempt's fencing
	// token, or for an operator's action the count it was taken at.
	Attempt int `dynamodbav:"attempt"`
	// Outcome is IntentDone, AttemptRetried or IntentParked for an attempt, AttemptRedriven or
	// IntentResolved for an operator's action.
	Outcome string `dynamodbav:"outcome"`
	// Code is the status code of the answer the attempt's call failed with (an HTTP
	// downstream's, an AWS service's), when one came back (Lease.Code).
	Code int `dynamodbav:"code,omitempty"`
	// At is when the entry was written, epoch milliseconds.
	At int64 `dynamodbav:"at"`
	// Error is why the attempt failed: its start, as last_error keeps it (unredacted: the
	// claims table's readers are the operators), cut to HistoryErrorBytes.
	Error string `dynamodbav:"error,omitempty"`
	// By is who redrove or resolved the intent, as the operator's tool named them.
	By string `dynamodbav:"by,omitempty"`
	// Late marks an attempt that recorded how its call ended after its lease was taken over
	// (its call outlived the lease, and a later attempt or a stranded park moved the intent
	// on): its call was made, but its outcome changed nothing of the intent.
	Late bool `dynamodbav:"late,omitempty"`
}

// Outcomes of an intent's history entries besides the statuses done, parked and resolved.
const (
	AttemptRetried  = "retry"
	AttemptRedriven = "redriven"
)

// HistoryLength is how many entries an intent's history keeps, the newest. Ten hold one whole
// attempt budget (the outbox's default MaxAttempts) between two operator's actions; the item's
// size bounds the rest: each entry is up to HistoryEntryBytes of the claim, counted in
// IntentBookkeepingBytes, and every later write of the claim (a lease, a finish) costs a write
// unit per KB of it (docs/outbox.md, "An intent's history").
const HistoryLength = 10

// HistoryErrorBytes bounds an entry's error (Attempt.Error), cut as Truncate cuts: the latest
// error is on the intent whole (last_error, 512 bytes); an entry keeps what tells attempts
// apart (the status, the kind of failure) at a third of the size.
const HistoryErrorBytes = 160

// HistoryEntryBytes is the most one history entry adds to the claim: a map of attempt (up to
// 6 digits), outcome, code, at (epoch ms), an error of HistoryErrorBytes plus an ellipsis and
// the late mark (an attempt's entry), or by of MaxRedrivenBy bytes (an operator's, never with
// an error).
const HistoryEntryBytes = 224

// EffectKey is the key of an effect record the claim's transaction wrote: in the claims' own
// table (Table "") its pk and sk, in another its key attributes' values as text.
type EffectKey struct {
	Table string `dynamodbav:"table,omitempty"`
	PK    string `dynamodbav:"pk"`
	SK    string `dynamodbav:"sk"`
}

// UnmarshalClaim decodes a claim item.
func UnmarshalClaim(item map[string]types.AttributeValue) (*Claim, error) {
	var c Claim
	if err := attributevalue.UnmarshalMap(item, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// commitToken identifies one Commit call's write. It is stored in the claim and, on a
// transaction, sent as ClientRequestToken: when a response is lost and the SDK retries,
// DynamoDB recognises the token (within its 10-minute window), and an engine without that
// feature still lets us recognise our own claim by this attribute, so the retry reports
// Accepted rather than Duplicate.
//
// It is derived from the delivery (source, event id, delivery id, receive time) plus a random
// nonce, never from the event alone: two deliveries of one event must not share a token, or the
// second would get IdempotentParameterMismatch, or be taken for our own lost write, instead of
// the claim condition's clean answer. The nonce keeps that true even for a provider that repeats
// a delivery id within one clock tick.
func commitToken(ev *Event, receivedAt time.Time, nonce uint64) string {
	return string(appendCommitToken(nil, ev, receivedAt, nonce))
}

// appendCommitToken appends the token's 32 hex digits: the first half of the SHA-256 of the
// delivery's fields and the nonce, each ended by a zero byte.
func appendCommitToken(b []byte, ev *Event, receivedAt time.Time, nonce uint64) []byte {
	var scratch [256]byte
	in := scratch[:0]
	for _, s := range [...]string{ev.Source, ev.ID, ev.DeliveryID} {
		in = append(in, s...)
		in = append(in, 0)
	}
	in = strconv.AppendInt(in, receivedAt.UnixNano(), 10)
	in = append(in, 0)
	in = strconv.AppendUint(in, nonce, 36)
	in = append(in, 0)
	sum := sha256.Sum256(in)
	return hex.AppendEncode(b, sum[:16])
}

// requestToken is the ClientRequestToken for one transaction attempt. Attempts after a
// cancellation get their own token, so DynamoDB evaluates them afresh.
func requestToken(commit string, attempt int) string {
	if attempt == 1 {
		return commit
	}
	sum := sha256.Sum256([]byte(commit + "#" + strconv.Itoa(attempt)))
	return hex.EncodeToString(sum[:16])
}

func payloadHash(p []byte) string { return string(appendPayloadHash(nil, p)) }

func appendPayloadHash(b, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	return hex.AppendEncode(b, sum[:])
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Spent is the attempts counted against the intent's budget: those since its last redrive,
// less the leases given back unused (Claims.GiveBack).
func (in ClaimIntent) Spent() int { return in.Attempts - in.AttemptsBase }

// WakeFilterPatterns are the DynamoDB Streams event filter patterns (OR'ed) that pass the writes
// handing the outbox due work: a claim's INSERT that carries intents (it is under the pending
// index), and a MODIFY whose new image has the wake marker (a claim re-admitted after expiry, an
// operator's redrive). A lease, a retry and a finish carry no marker, so they never pass; nor
// do effect records, TTL deletions and claims without intents.
func WakeFilterPatterns() []map[string]any {
	exists := []any{map[string]any{"exists": true}}
	return []map[string]any{
		{"eventName": []any{"INSERT"}, "dynamodb": map[string]any{"NewImage": map[string]any{IndexPartitionKey: map[string]any{"S": exists}}}},
		{"eventName": []any{"MODIFY"}, "dynamodb": map[string]any{"NewImage": map[string]any{attrWake: map[string]any{"N": exists}}}},
	}
}

// IsOutboxClaim reports whether item is a claim that carries intents (an outbox to run), as
// opposed to an effect record, a body guard or a claim without intents.
func IsOutboxClaim(item map[string]types.AttributeValue) bool {
	_, intents := item[attrIntents]
	return intents && attrString(item, SortKey) == ClaimSK
}
