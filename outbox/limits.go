package outbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/time/rate"

	"github.com/oncehook/oncehook/dedup"
)

// Limit is how fast a target may be called, across every worker (every invocation of the
// outbox function and the sweeper). The zero Limit is no limit. The limits are kept in the
// claims table, the one place every worker shares: Lambda's own controls cap invocations, not
// calls to one target. See docs/outbox.md, "Per-target limits".
type Limit struct {
	// MaxInFlight caps the calls to the target under way at once; 0: no cap. Each call holds a
	// slot item from right before its lease until it is recorded; a call that may still be
	// running at the downstream, or whose worker stopped, holds it until its lease and margin end.
	MaxInFlight int
	// Rate caps the calls to the target started per second; 0: no cap. Time is cut into windows
	// of RateQuota(Rate) calls, each a counter item: a span of T starts at most Rate*T calls
	// plus two quotas (a span across one window's end and the next one's start).
	Rate float64
}

// Bounds of Limit. A target's limit items share one DynamoDB partition (about 1,000 writes a
// second): a call under a rate writes it once, under max_in_flight twice.
const (
	MaxMaxInFlight = 1000
	MaxRate        = 500
)

// Validate reports a limit that cannot work, naming its field.
func (l Limit) Validate() error {
	switch {
	case l.MaxInFlight < 0 || l.MaxInFlight > MaxMaxInFlight:
		return &ConfigError{Field: "MaxInFlight", Reason: fmt.Sprintf("%d: must be between 1 and %d (0: no cap)", l.MaxInFlight, MaxMaxInFlight)}
	case math.IsNaN(l.Rate) || l.Rate < 0 || l.Rate > MaxRate || (l.Rate > 0 && l.Rate < 0.01):
		return &ConfigError{Field: "Rate", Reason: fmt.Sprintf("%g: must be between 0.01 and %d calls per second (0: no cap)", l.Rate, MaxRate)}
	}
	return nil
}

// IsZero reports whether l limits nothing.
func (l Limit) IsZero() bool { return l.MaxInFlight == 0 && l.Rate == 0 }

// RateQuota is the calls one rate window admits: a quarter of a second's worth, at least one,
// so that the window is long against a write's latency and short against the rate.
func RateQuota(rate float64) int { return max(1, int(math.Ceil(rate/4))) }

// LimitPK is the partition of a target's limit items: in the claims' key space, which effect
// records may not use, with a source no claim can have.
func LimitPK(target string) string { return dedup.ClaimPrefix + "#limit#" + target }

// The sort keys of a target's limit items.
const (
	limitSlotPrefix = "SLOT#"
	limitRatePrefix = "RATE#"
)

// errHeld is an intent a target's limit holds back: not leased, no attempt spent.
var errHeld = errors.New("outbox: held back by the target's limit")

// heldError says when a held-back intent may be tried again.
type heldError struct {
	target string
	wait   time.Duration
	why    string
}

func (e *heldError) Error() string {
	return fmt.Sprintf("outbox: target %s: %s; try again in %s", e.target, e.why, e.wait.Round(time.Millisecond))
}
func (e *heldError) Unwrap() error { return errHeld }

// limiter admits calls to the targets that have a Limit. A local token bucket and semaphore
// queue the process's own calls first, so that only what could be admitted asks the table,
// whose items hold across processes.
type limiter struct {
	api     API
	table   string
	now     func() time.Time
	limits  map[string]Limit
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	slots   map[string]chan struct{}
	// The paused targets as last read (Targets.Paused), and when (the real clock).
	pauseMu sync.Mutex
	pauses  map[string]Pause
	readAt  time.Time
}

func newLimiter(api API, table string, now func() time.Time, limits map[string]Limit) *limiter {
	l := &limiter{api: api, table: table, now: now, limits: map[string]Limit{},
		buckets: map[string]*rate.Limiter{}, slots: map[string]chan struct{}{}}
	for target, lim := range limits {
		if lim.IsZero() {
			continue
		}
		l.limits[target] = lim
		if lim.Rate > 0 {
			l.buckets[target] = rate.NewLimiter(rate.Limit(lim.Rate), RateQuota(lim.Rate))
		}
		if lim.MaxInFlight > 0 {
			l.slots[target] = make(chan struct{}, lim.MaxInFlight)
		}
	}
	return l
}

// admit waits until deadline at most for target's limits to let one call through; hold is how
// long a slot is held once taken (the call's lease and the margin). It returns when the slot
// ends by itself (zero without one): the call's lease must end first; and release, which gives
// the slot back once the call is recorded (keep leaves the table's slot held until it ends by
// itself: the call may still be running at the downstream). Past deadline it returns a
// *heldError naming when to try again. The slot is taken last, right before the lease, so that
// it is held for the call's lease, never for a wait.
func (l *limiter) admit(ctx context.Context, target string, hold time.Duration, deadline time.Time) (until time.Time, release func(keep bool), err error) {
	noSlot := func(bool) {}
	lim, ok := l.limits[target]
	if !ok {
		return time.Time{}, noSlot, nil
	}
	releaseLocal := func() {}
	if lim.MaxInFlight > 0 {
		local := l.slots[target]
		if !acquire(ctx, local, deadline) {
			return time.Time{}, nil, &heldError{target: target, wait: 200 * time.Millisecond, why: fmt.Sprintf("its %d calls in flight are this instance's", lim.MaxInFlight)}
		}
		releaseLocal = func() { <-local }
	}
	if lim.Rate > 0 {
		res := l.buckets[target].Reserve()
		if d := res.Delay(); time.Now().Add(d).After(deadline) {
			res.Cancel()
			releaseLocal()
			return time.Time{}, nil, &heldError{target: target, wait: d, why: fmt.Sprintf("%g calls a second, its rate", lim.Rate)}
		} else if err := sleep(ctx, d); err != nil {
			res.Cancel()
			releaseLocal()
			return time.Time{}, nil, err
		}
	}
	if lim.MaxInFlight == 0 {
		return time.Time{}, noSlot, nil
	}
	slot, until, err := l.takeSlot(ctx, target, lim.MaxInFlight, hold, deadline)
	if err != nil {
		releaseLocal()
		return time.Time{}, nil, err
	}
	return until, func(keep bool) {
		defer releaseLocal()
		if !keep { // kept: held in the table until it ends, the downstream may still be running the call
			slot.release(ctx)
		}
	}, nil
}

// rated reports whether target has a rate, and so a window to take once leased.
func (l *limiter) rated(target string) bool { return l.limits[target].Rate > 0 }

// rateHold is how long a leased call may wait for its rate window: the lease of a rated
// target is written this much longer, so the wait never shortens the call.
const rateHold = 5 * time.Second

// acquire takes a place in sem, waiting for one until deadline at most.
func acquire(ctx context.Context, sem chan struct{}, deadline time.Time) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case sem <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// takeWindow takes one call from target's current rate window with a conditional ADD on its
// counter item. A full window waits for the next until deadline; past it, a *heldError.
func (l *limiter) takeWindow(ctx context.Context, target string, deadline time.Time) error {
	r := l.limits[target].Rate
	quota := RateQuota(r)
	window := time.Duration(float64(quota) / r * float64(time.Second))
	for refused := 0; ; {
		now := l.now()
		index := now.UnixNano() / int64(window)
		next := time.Unix(0, (index+1)*int64(window))
		_, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(l.table),
			Key:       itemKey(LimitPK(target), limitRatePrefix+strconv.FormatInt(index, 10)),
			// Every attribute name aliased: DynamoDB reserves many words (CALL, COUNT...).
			UpdateExpression:          aws.String("ADD #calls :one SET #exp = :exp"),
			ConditionExpression:       aws.String("attribute_not_exists(#calls) OR #calls < :quota"),
			ExpressionAttributeNames:  map[string]string{"#calls": "calls", "#exp": dedup.TTLAttribute},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":quota": num(int64(quota)), ":exp": num(next.Add(time.Hour).Unix())},
		})
		switch {
		case err == nil && !l.now().After(next):
			return nil
		case err == nil:
			// The write outlasted its window: a call now would land in a window that did not
			// count it. The turn is forfeited (fewer calls than the rate, never more).
			if time.Now().After(deadline) {
				return &heldError{target: target, wait: window, why: fmt.Sprintf("%g calls a second, its rate: its window's writes outlasted the window", r)}
			}
			continue
		case !conditionFailed(err):
			return fmt.Errorf("rate window of target %s: %w", target, err)
		}
		// Others took this window. The wait spreads over more windows the more often it was
		// refused, so that waiting calls do not all ask at every window's start.
		refused++
		wait := next.Sub(now) + rand.N(window<<min(refused, 4)/2+1)
		if time.Now().Add(wait).After(deadline) {
			return &heldError{target: target, wait: wait, why: fmt.Sprintf("%g calls a second, its rate, taken by other workers", r)}
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// takeSlot reads target's n slot items (one Query) and takes a free one, or one whose hold has
// ended, until hold from now; while all are held it reads again after a pause, until deadline,
// and past it returns a *heldError.
func (l *limiter) takeSlot(ctx context.Context, target string, n int, hold time.Duration, deadline time.Time) (slot *heldItem, until time.Time, err error) {
	owner := newToken()
	pause := 20 * time.Millisecond
	for {
		now := l.now()
		held := map[int]int64{} // slot -> until, for the slots held now
		out, err := l.api.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(l.table),
			KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :slot)"),
			ExpressionAttributeNames:  map[string]string{"#pk": dedup.PartitionKey, "#sk": dedup.SortKey},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(LimitPK(target)), ":slot": str(limitSlotPrefix)},
			ConsistentRead:            aws.Bool(true),
		})
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("slots of target %s: %w", target, err)
		}
		for _, item := range out.Items {
			sk, _ := item[dedup.SortKey].(*types.AttributeValueMemberS)
			until, _ := item["until"].(*types.AttributeValueMemberN)
			if sk == nil || until == nil {
				continue
			}
			i, err1 := strconv.Atoi(strings.TrimPrefix(sk.Value, limitSlotPrefix))
			u, err2 := strconv.ParseInt(until.Value, 10, 64)
			if err1 == nil && err2 == nil && u >= now.UnixMilli() {
				held[i] = u
			}
		}
		var free []int
		soonest := int64(math.MaxInt64)
		for i := range n {
			if u, ok := held[i]; ok {
				soonest = min(soonest, u)
				continue
			}
			free = append(free, i)
		}
		if len(free) > 0 {
			i := free[rand.N(len(free))]
			slot := &heldItem{api: l.api, table: l.table, pk: LimitPK(target), sk: limitSlotPrefix + strconv.Itoa(i), owner: owner}
			holdUntil := l.now().Add(hold)
			taken, err := slot.take(ctx, now, holdUntil)
			switch {
			case err != nil:
				return nil, time.Time{}, fmt.Errorf("slot %d of target %s: %w", i, target, err)
			case taken:
				return slot, time.UnixMilli(holdUntil.UnixMilli()), nil
			}
			continue // another worker took it between the read and the write: read again
		}
		// All held: a slot frees when its call is recorded (soon, usually) or its lease ends.
		wait := max(min(pause, time.Until(time.UnixMilli(soonest))), time.Millisecond)
		if time.Now().Add(wait).After(deadline) {
			return nil, time.Time{}, &heldError{target: target, wait: max(wait, 200*time.Millisecond), why: fmt.Sprintf("%d calls in flight, its max_in_flight", n)}
		}
		if err := sleep(ctx, wait+rand.N(wait/2+1)); err != nil {
			return nil, time.Time{}, err
		}
		pause = min(pause*2, 500*time.Millisecond)
	}
}

// heldItem is an item taken until a time under its owner's token: a max_in_flight slot, the
// sweeper's lock.
type heldItem struct {
	api                  API
	table, pk, sk, owner string // owner: newToken
}

// take takes the item until until if it is free, its hold ended before now, or it is ours
// already (our own write, its answer lost and the SDK's retry refused); false when another
// holds it. The item expires an hour after until.
func (h *heldItem) take(ctx context.Context, now, until time.Time) (bool, error) {
	_, err := h.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(h.table),
		Key:       itemKey(h.pk, h.sk),
		// Every attribute name aliased: DynamoDB reserves many words.
		UpdateExpression:          aws.String("SET #holder = :me, #until = :until, #exp = :exp"),
		ConditionExpression:       aws.String("attribute_not_exists(#until) OR #until < :now OR #holder = :me"),
		ExpressionAttributeNames:  map[string]string{"#until": "until", "#holder": "holder", "#exp": dedup.TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(h.owner), ":until": num(until.UnixMilli()), ":now": num(now.UnixMilli()), ":exp": num(until.Add(time.Hour).Unix())},
	})
	if conditionFailed(err) {
		return false, nil
	}
	return err == nil, err
}

// release frees the item if we still hold it (one whose hold ended may be another's), in a few
// seconds of its own: ctx may have ended. Best effort: an item not released ends by itself.
func (h *heldItem) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = h.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(h.table),
		Key:                       itemKey(h.pk, h.sk),
		UpdateExpression:          aws.String("REMOVE #holder, #until"),
		ConditionExpression:       aws.String("#holder = :me"),
		ExpressionAttributeNames:  map[string]string{"#until": "until", "#holder": "holder"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(h.owner)},
	})
}

// The item that names the paused targets, an attribute "paused#<target>" each, in the claims'
// key space with a source no claim can have.
const (
	PausedPK = dedup.ClaimPrefix + "#targets"
	PausedSK = "PAUSED"
)

// pauseRead is how long a worker trusts the paused targets it read: one read a second per busy
// worker, nothing per intent.
const pauseRead = time.Second

// Pause says who paused a target, why, and when.
type Pause struct {
	By  string    `dynamodbav:"by"`
	Why string    `dynamodbav:"why"`
	At  time.Time `dynamodbav:"at"`
	// ID is the pause's nonce: ResumePause lifts the pause it names and no later one, and
	// PauseIfUnchanged replaces it and no later one. Empty on a pause written by an older release.
	ID string `dynamodbav:"id,omitempty"`
}

// ErrPauseChanged is returned by ResumePause and PauseIfUnchanged when the target's pause is not
// the one shown: paused since, resumed since, or paused again (by someone else, or for another
// reason).
var ErrPauseChanged = errors.New("outbox: the target's pause is not the one shown")

// Targets pauses and resumes the calls to a target across every worker, for an operator's
// tool (hookctl pause, the console) during a downstream's maintenance.
//
// A paused target's due intents are not leased: they spend no attempt and stay due, where the
// sweeper finds them after Resume. A worker reads the paused targets at most once a second,
// before each intent's limits, and looks again right before the lease, reading them anew when
// a wait on the limits outlasted its copy: a call leased before the worker read the pause (up
// to a second after Pause returned) is still made.
type Targets struct {
	API   API
	Table string
	// Now is the time recorded with a pause. Default time.Now.
	Now func() time.Time
}

// Pause pauses target, recording by (who) and why; pausing a paused target records the new
// ones. Invalid input is a *dedup.InvalidError naming the field, and nothing is written.
func (t *Targets) Pause(ctx context.Context, target, by, why string) error {
	return t.pause(ctx, target, by, why, "", nil, nil)
}

// PauseIfUnchanged pauses target as Pause does if its pause is still the one shown (as Paused
// returned it; nil: not paused), so that an operator's decision about what they were shown
// replaces no pause made since; otherwise it writes nothing and returns ErrPauseChanged.
func (t *Targets) PauseIfUnchanged(ctx context.Context, target, by, why string, shown *Pause) error {
	cond, names, values := shownCond(shown)
	return changed(t.pause(ctx, target, by, why, cond, names, values))
}

func (t *Targets) pause(ctx context.Context, target, by, why, cond string, names map[string]string, values map[string]types.AttributeValue) error {
	for _, f := range []struct {
		name, value string
		max         int
	}{{"target", target, dedup.MaxIntentTargetLen}, {"by", by, dedup.MaxRedrivenBy}, {"why", why, dedup.MaxResolution}} {
		if err := dedup.Printable(f.value, f.max); err != nil {
			return &dedup.InvalidError{Field: f.name, Reason: err.Error()}
		}
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	p, _ := attributevalue.Marshal(Pause{By: by, Why: why, At: now().UTC().Truncate(time.Second), ID: newToken()}) // cannot fail: strings and a time
	if values == nil {
		values = map[string]types.AttributeValue{}
	}
	values[":p"] = p
	return t.write(ctx, "SET #t = :p", target, values, cond, names)
}

// Resume resumes target's calls, whoever paused it; a target not paused is left as it is.
func (t *Targets) Resume(ctx context.Context, target string) error {
	return t.write(ctx, "REMOVE #t", target, nil, "", nil)
}

// ResumePause resumes target's calls if it is still paused by the pause shown (as Paused
// returned it), named by its ID (or, from an older release, by who, why and when); otherwise
// it lifts nothing and returns ErrPauseChanged.
func (t *Targets) ResumePause(ctx context.Context, target string, shown Pause) error {
	cond, names, values := shownCond(&shown)
	return changed(t.write(ctx, "REMOVE #t", target, values, cond, names))
}

// shownCond is the condition that target's pause (#t) is the one shown (nil: none), named by
// its ID, or by who, why and when for a pause without one (written by an older release).
func shownCond(shown *Pause) (string, map[string]string, map[string]types.AttributeValue) {
	switch {
	case shown == nil:
		return "attribute_not_exists(#t)", nil, nil
	case shown.ID != "":
		return "#t.#id = :id", map[string]string{"#id": "id"}, map[string]types.AttributeValue{":id": str(shown.ID)}
	}
	at, _ := attributevalue.Marshal(shown.At) // cannot fail: a time
	return "attribute_not_exists(#t.#id) AND #t.#by = :by AND #t.#why = :why AND #t.#at = :at",
		map[string]string{"#by": "by", "#why": "why", "#at": "at", "#id": "id"},
		map[string]types.AttributeValue{":by": str(shown.By), ":why": str(shown.Why), ":at": at}
}

// changed reads a refused condition of shownCond as ErrPauseChanged.
func changed(err error) error {
	if conditionFailed(err) {
		return ErrPauseChanged
	}
	return err
}

// conditionFailed reports whether a write was refused by its condition.
func conditionFailed(err error) bool { return is[*types.ConditionalCheckFailedException](err) }

// newToken is a random token naming its writer: a slot's holder, the sweeper lock's owner, a
// pause.
func newToken() string { return strconv.FormatUint(rand.Uint64(), 36) }

func (t *Targets) write(ctx context.Context, update, target string, values map[string]types.AttributeValue, cond string, names map[string]string) error {
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.Table),
		Key:                       itemKey(PausedPK, PausedSK),
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  map[string]string{"#t": pausedPrefix + target},
		ExpressionAttributeValues: values,
	}
	if cond != "" {
		in.ConditionExpression = aws.String(cond)
	}
	maps.Copy(in.ExpressionAttributeNames, names)
	if _, err := t.API.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("target %s: %w", target, err)
	}
	return nil
}

// Paused returns the paused targets, each with its Pause.
func (t *Targets) Paused(ctx context.Context) (map[string]Pause, error) {
	out, err := t.API.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(t.Table),
		Key:            itemKey(PausedPK, PausedSK),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("paused targets: %w", err)
	}
	paused := map[string]Pause{}
	for name, v := range out.Item {
		var p Pause
		if target, ok := strings.CutPrefix(name, pausedPrefix); ok && attributevalue.Unmarshal(v, &p) == nil {
			paused[target] = p
		}
	}
	return paused, nil
}

const pausedPrefix = "paused#"

// paused reports whether target is paused, as read at most pauseRead ago.
func (l *limiter) paused(ctx context.Context, target string) (bool, error) {
	l.pauseMu.Lock()
	defer l.pauseMu.Unlock()
	if time.Since(l.readAt) >= pauseRead {
		p, err := (&Targets{API: l.api, Table: l.table}).Paused(ctx)
		if err != nil {
			return false, err
		}
		l.pauses, l.readAt = p, time.Now()
	}
	_, ok := l.pauses[target]
	return ok, nil
}

// itemKey is the key of the table's item pk, sk.
func itemKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dedup.PartitionKey: str(pk), dedup.SortKey: str(sk)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
