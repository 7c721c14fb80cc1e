package console

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// indexEntry is one key of the pending index: a claim's pk and when it entered its shard.
type indexEntry struct {
	PK    string
	Since time.Time
}

// source and id of a claim's pk (EVT#<source>#<id>: the first '#' after the prefix ends the
// source).
func splitClaimPK(pk string) (source, id string, ok bool) {
	rest, ok := strings.CutPrefix(pk, dedup.ClaimPrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "#")
}

// window bounds when claims entered the pending index (its sort key, epoch milliseconds),
// both ends included; a zero end is open.
type window struct{ From, To int64 }

// shardRead is one Query of a shard of the pending index within w: at most limit entries
// evaluated (with prefix, those whose pk starts with it are kept), newest first when newest is
// set, from start (nil: the shard's first). It returns the entries kept, where the next read
// starts (nil: the shard is read to its end), and the entries evaluated (the bound it spent).
func (c *Console) shardRead(ctx context.Context, shard, prefix string, w window, newest bool, start map[string]types.AttributeValue, limit int) (
	entries []indexEntry, next map[string]types.AttributeValue, spent int, err error) {
	in := dedup.IndexQuery(c.cfg.Table, shard)
	in.ScanIndexForward, in.ExclusiveStartKey, in.Limit = aws.Bool(!newest), start, aws.Int32(int32(limit))
	if w != (window{}) {
		*in.KeyConditionExpression += " AND " + dedup.IndexSortKey + " BETWEEN :from AND :to"
		in.ExpressionAttributeValues[":from"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(w.From, 10)}
		in.ExpressionAttributeValues[":to"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(cmp.Or(w.To, math.MaxInt64), 10)}
	}
	if prefix != "" {
		in.FilterExpression = aws.String("begins_with(" + dedup.PartitionKey + ", :p)")
		in.ExpressionAttributeValues[":p"] = &types.AttributeValueMemberS{Value: prefix}
	}
	out, err := c.cfg.DynamoDB.Query(ctx, in)
	if err != nil {
		return nil, nil, 0, err
	}
	for _, item := range out.Items {
		var e indexEntry
		if v, ok := item[dedup.PartitionKey].(*types.AttributeValueMemberS); ok {
			e.PK = v.Value
		}
		if v, ok := item[dedup.IndexSortKey].(*types.AttributeValueMemberN); ok {
			e.Since = epochMillis(v.Value)
		}
		entries = append(entries, e)
	}
	// A page that evaluated nothing but says there is more would never end a loop: count it
	// as one.
	spent = max(int(out.ScannedCount), len(out.Items), min(1, len(out.LastEvaluatedKey)))
	return entries, out.LastEvaluatedKey, spent, nil
}

// indexed reads the claims under shards, oldest first within each, shard by shard, at most
// MaxIndexReads index entries in all; more reports that some were left unread.
func (c *Console) indexed(ctx context.Context, shards []string) (claims []*dedup.Claim, more bool, err error) {
	left := c.cfg.MaxIndexReads
	for _, shard := range shards {
		var start map[string]types.AttributeValue
		for {
			if left == 0 {
				return claims, true, nil
			}
			entries, next, spent, err := c.shardRead(ctx, shard, "", window{}, false, start, left)
			if err != nil {
				return nil, false, err
			}
			left = max(0, left-spent)
			read, err := c.claimsAt(ctx, entries)
			if err != nil {
				return nil, false, err
			}
			claims = append(claims, slices.DeleteFunc(read, func(cl *dedup.Claim) bool { return cl == nil })...)
			if start = next; start == nil {
				break
			}
		}
	}
	return claims, false, nil
}

// parkedRow is one parked intent, for the Parked page and a redrive by query.
type parkedRow struct {
	intentRow
	Since time.Time // its claim entered the parked index
	claim *dedup.Claim
}

type parkedFilter struct{ Source, Target, Error string }

func (f parkedFilter) match(r parkedRow) bool {
	return (f.Source == "" || r.Source == f.Source) && (f.Target == "" || r.Target == f.Target) &&
		(f.Error == "" || strings.Contains(strings.ToLower(r.LastError), strings.ToLower(f.Error)))
}

// parked lists the parked intents under the parked and due-parked shards (every claim with a
// parked intent: the list hookctl parked shows) that entered them within w and match f, newest
// first, merged across shards: every match parked after complete is listed (allRead: every
// one in w).
func (c *Console) parked(ctx context.Context, f parkedFilter, w window) (rows []parkedRow, complete int64, err error) {
	shards := dedup.ParkedViewShards(c.cfg.PendingShards)
	prefix := ""
	if f.Source != "" {
		prefix = dedup.ClaimKey(f.Source, "")
	}
	entries, complete, err := c.newest(ctx, shards, prefix, w, 0)
	if err != nil {
		return nil, 0, err
	}
	read, err := c.claimsAt(ctx, entries)
	if err != nil {
		return nil, 0, err
	}
	for i, e := range entries {
		cl := read[i]
		if cl == nil {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(cl.Intents)) {
			if cl.Intents[name].Status != dedup.IntentParked {
				continue
			}
			if r := (parkedRow{intentRow: c.rowOf(cl, name), Since: e.Since, claim: cl}); f.match(r) {
				rows = append(rows, r)
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b parkedRow) int { return b.Since.Compare(a.Since) })
	return rows, complete, nil
}

// targetLoad is one target's open and parked work, for the backlog and the overview.
type targetLoad struct {
	Target                      string
	Due, Waiting, Running       int // pending and due now; pending, due later; leased
	Parked                      int
	Oldest                      time.Time // the oldest open intent's claim entered the due index
	OldestSource, OldestEventID string
	Paused                      *outbox.Pause // who paused it, why and when (outbox.Targets); nil: not paused
}

// loads counts the intents of the claims with open intents (and parked ones too when
// withParked) per target, with the paused targets: a paused target has a row, whether or not
// the sources file or an intent names it.
func (c *Console) loads(ctx context.Context, withParked bool) (rows []*targetLoad, cls []*dedup.Claim, more bool, err error) {
	paused, err := (&outbox.Targets{API: c.cfg.DynamoDB, Table: c.cfg.Table}).Paused(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	shards := dedup.OpenShards(c.cfg.PendingShards)
	if withParked {
		_, parked := dedup.ShardNames(c.cfg.PendingShards)
		shards = append(shards, parked...)
	}
	cls, more, err = c.indexed(ctx, shards)
	if err != nil {
		return nil, nil, false, err
	}
	now := c.cfg.Now().UnixMilli()
	by := map[string]*targetLoad{}
	row := func(name string) *targetLoad {
		if by[name] == nil {
			by[name] = &targetLoad{Target: name}
		}
		return by[name]
	}
	for name := range c.src.Targets {
		row(name)
	}
	for _, cl := range cls {
		since := time.UnixMilli(cl.PendingSince)
		if cl.PendingSince == 0 {
			since = cl.ReceivedAt
		}
		for _, in := range cl.Intents {
			t := row(in.Target)
			switch in.Status {
			case dedup.IntentPending:
				if in.NextAttemptAt > now {
					t.Waiting++
				} else {
					t.Due++
				}
			case dedup.IntentRunning:
				t.Running++
			case dedup.IntentParked:
				t.Parked++
				continue
			default:
				continue
			}
			if t.Oldest.IsZero() || since.Before(t.Oldest) {
				t.Oldest, t.OldestSource, t.OldestEventID = since, cl.Source, cl.EventID
			}
		}
	}
	for name, p := range paused {
		row(name).Paused = &p
	}
	rows = slices.SortedFunc(maps.Values(by), func(a, b *targetLoad) int { return strings.Compare(a.Target, b.Target) })
	return rows, cls, more, nil
}

// What newest says was read: every entry (allRead), or none for sure (noneSure: a shard was
// not read at all), or every entry after a time (epoch milliseconds).
const (
	allRead  = math.MinInt64
	noneSure = math.MaxInt64
)

// newest reads shards newest first within w, merged, at most MaxIndexReads entries in all (as
// DynamoDB counts what it evaluates): each shard's first few, then a few at a time of the
// shard whose unread entries may be the newest. It returns the entries read (those whose pk
// starts with prefix), and complete: every entry that entered the index after it has been
// read. It stops when limit of them (0: no limit) are newer than anything unread, every shard
// is read, or the bound is spent.
func (c *Console) newest(ctx context.Context, shards []string, prefix string, w window, limit int) (read []indexEntry, complete int64, err error) {
	type cursor struct {
		shard    string
		start    map[string]types.AttributeValue
		read     bool      // read at least once: frontier is known
		frontier time.Time // its unread entries entered the index at or before this
		done     bool
	}
	var cursors []*cursor
	for _, s := range shards {
		cursors = append(cursors, &cursor{shard: s})
	}
	left := c.cfg.MaxIndexReads
	readOn := func(cur *cursor, n int) error {
		entries, next, spent, err := c.shardRead(ctx, cur.shard, prefix, w, true, cur.start, n)
		if err != nil {
			return err
		}
		left = max(0, left-spent)
		read = append(read, entries...)
		cur.read, cur.start = true, next
		if next == nil {
			cur.done = true
		} else if v, ok := next[dedup.IndexSortKey].(*types.AttributeValueMemberN); ok {
			cur.frontier = epochMillis(v.Value)
		}
		return nil
	}
	// First a few of each shard's newest, so that every shard has a frontier; then more of the
	// shard that may hold the newest unread entries.
	first := max(1, c.cfg.MaxIndexReads/(2*len(cursors)))
	for _, cur := range cursors {
		if left == 0 {
			break
		}
		if err := readOn(cur, min(first, left)); err != nil {
			return nil, 0, err
		}
	}
	for {
		var best *cursor
		for _, cur := range cursors {
			if cur.done {
				continue
			}
			if best == nil || !cur.read || (best.read && cur.frontier.After(best.frontier)) {
				best = cur
			}
			if !best.read {
				break
			}
		}
		if best == nil {
			return read, allRead, nil // every shard read to its end
		}
		if !best.read && left == 0 {
			return read, noneSure, nil // a shard not read at all: nothing is sure
		}
		if best.read && (left == 0 || limit > 0 && newerThan(read, best.frontier) >= limit) {
			return read, best.frontier.UnixMilli(), nil // the bound is spent, or the newest limit are known
		}
		// A few at a time: a read past the next shard's frontier spends the bound on entries
		// the list may not need.
		if err := readOn(best, min(left, max(first, 4))); err != nil {
			return nil, 0, err
		}
	}
}

// newerThan counts the entries that entered the index after t.
func newerThan(entries []indexEntry, t time.Time) int {
	n := 0
	for _, e := range entries {
		if e.Since.After(t) {
			n++
		}
	}
	return n
}

// recent lists a source's most recent claims in the pending index (those with intents open
// or parked) within w, newest first, at most limit, reading at most MaxIndexReads index
// entries (newest). When the bound stops it before the limit newest are known, partial is set
// and the list is exact only for claims that entered the index after cutoff (older ones may be
// missing; a zero cutoff: a shard was not read at all).
func (c *Console) recent(ctx context.Context, source string, w window, limit int) (keys []indexEntry, partial bool, cutoff time.Time, err error) {
	due, parked := dedup.ShardNames(c.cfg.PendingShards)
	shards := append(append(due, parked...), dedup.DueParkedShards(c.cfg.PendingShards)...)
	keys, complete, err := c.newest(ctx, shards, dedup.ClaimKey(source, ""), w, limit)
	if err != nil {
		return nil, false, time.Time{}, err
	}
	slices.SortStableFunc(keys, func(a, b indexEntry) int { return b.Since.Compare(a.Since) })
	keys = keys[:min(limit, len(keys))]
	if complete != allRead && (len(keys) < limit || !keys[limit-1].Since.After(time.UnixMilli(complete))) {
		partial = true
		if complete != noneSure {
			cutoff = time.UnixMilli(complete)
		}
	}
	return keys, partial, cutoff, nil
}

// guardView is a claim's body guard, as the event page shows it.
type guardView struct {
	Key, HeldBy string
	Expires     time.Time
	Found, Ours bool
}

// bodyGuard reads the claim's body guard, when it names one.
func (c *Console) bodyGuard(ctx context.Context, cl *dedup.Claim) (*guardView, error) {
	if cl.BodyGuard == "" {
		return nil, nil
	}
	pk := dedup.ClaimKey(cl.Source, cl.BodyGuard)
	item, err := c.getItem(ctx, pk, dedup.BodySK, true)
	if err != nil {
		return nil, err
	}
	g := &guardView{Key: pk + " / " + dedup.BodySK, Found: item != nil}
	// A body guard holds the event id it guards for, and expires with its claim.
	if held, err := dedup.UnmarshalClaim(item); item != nil && err == nil {
		g.HeldBy, g.Ours = held.EventID, held.EventID != "" && held.EventID == cl.EventID
		if held.ExpiresAt != 0 {
			g.Expires = time.Unix(held.ExpiresAt, 0)
		}
	}
	return g, nil
}

// getItem reads one item of oncehook's table by its key: nil when there is none.
func (c *Console) getItem(ctx context.Context, pk, sk string, consistent bool) (map[string]types.AttributeValue, error) {
	out, err := c.cfg.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.cfg.Table), ConsistentRead: aws.Bool(consistent),
		Key: map[string]types.AttributeValue{dedup.PartitionKey: &types.AttributeValueMemberS{Value: pk}, dedup.SortKey: &types.AttributeValueMemberS{Value: sk}}})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// audits reads the leak audit's last results: oncehook's table's, and each audited table's
// of the sources file.
func (c *Console) audits(ctx context.Context) ([]*dedup.AuditRecord, []string, error) {
	names := []string{""}
	for _, name := range slices.Sorted(maps.Keys(c.src.Tables)) {
		// A bound table not bound here has no name ("" would read as oncehook's own).
		if t := c.src.Tables[name]; t.Audit && t.PhysicalName(name) != "" {
			names = append(names, t.PhysicalName(name))
		}
	}
	var out []*dedup.AuditRecord
	var never []string
	for _, n := range names {
		rec, err := dedup.LastAudit(ctx, c.cfg.DynamoDB, c.cfg.Table, n)
		if err != nil {
			return nil, nil, err
		}
		if rec == nil {
			never = append(never, n)
			continue
		}
		out = append(out, rec)
	}
	return out, never, nil
}

// readClaims reads claims by pk (dedup.GetClaims, at most maxUnprocessedRounds calls per 100
// keys): a pk without a claim is absent from the map.
func (c *Console) readClaims(ctx context.Context, pks []string) (map[string]*dedup.Claim, error) {
	items, err := dedup.GetClaims(ctx, c.cfg.DynamoDB, c.cfg.Table, pks, maxUnprocessedRounds)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*dedup.Claim, len(items))
	for pk, item := range items {
		if out[pk], err = dedup.UnmarshalClaim(item); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// claimsAt reads the claims entries name, in their order: nil for one gone between the query
// and the read.
func (c *Console) claimsAt(ctx context.Context, entries []indexEntry) ([]*dedup.Claim, error) {
	pks := make([]string, len(entries))
	for i, e := range entries {
		pks[i] = e.PK
	}
	read, err := c.readClaims(ctx, pks)
	out := make([]*dedup.Claim, len(entries))
	for i, pk := range pks {
		out[i] = read[pk]
	}
	return out, err
}

// maxUnprocessedRounds bounds the BatchGetItem calls one batch gets while DynamoDB leaves keys
// unprocessed (throttling): a page opened during an incident gives up and says so, rather than
// spend the capacity the outbox needs.
const maxUnprocessedRounds = 5

// writers finds the claims that wrote the effect records whose partition key is key (a put
// effect's item names its claim, dedup.ClaimedByAttribute): a Query in oncehook's table and in
// each of the sources file's tables whose name it knows, at most MaxIndexReads items in all.
// notes says what was not searched, not read (the operator's credentials may not reach an
// application's table), or found without a claim.
func (c *Console) writers(r *http.Request, key string) (pks, notes []string, err error) {
	type table struct{ label, name, pk string }
	tables := []table{{"oncehook's table", c.cfg.Table, dedup.PartitionKey}}
	for _, name := range slices.Sorted(maps.Keys(c.src.Tables)) {
		t := c.src.Tables[name]
		if t.PhysicalName(name) == "" {
			notes = append(notes, "table "+name+" is bound: its name is not in the sources file, so it was not searched")
			continue
		}
		tables = append(tables, table{"table " + name, t.PhysicalName(name), t.PartitionKey})
	}
	left := c.cfg.MaxIndexReads
	for i, t := range tables {
		in := &dynamodb.QueryInput{TableName: aws.String(t.name), KeyConditionExpression: aws.String("#k = :k"),
			ProjectionExpression:      aws.String("#by"),
			ExpressionAttributeNames:  map[string]string{"#k": t.pk, "#by": dedup.ClaimedByAttribute},
			ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: key}}}
		unclaimed := 0
		for {
			if left == 0 {
				notes = append(notes, fmt.Sprintf("more records hold this key than one page reads (%d): the list may be incomplete", c.cfg.MaxIndexReads))
				return pks, notes, nil
			}
			in.Limit = aws.Int32(int32(left))
			out, err := c.cfg.DynamoDB.Query(r.Context(), in)
			if err != nil && i == 0 {
				return nil, nil, err
			}
			if err != nil {
				notes = append(notes, t.label+" could not be read: "+c.logged(r, "querying "+t.label, err))
				break
			}
			left = max(0, left-max(int(out.ScannedCount), len(out.Items), 1))
			for _, item := range out.Items {
				if v, ok := item[dedup.ClaimedByAttribute].(*types.AttributeValueMemberS); !ok {
					unclaimed++
				} else if !slices.Contains(pks, v.Value) {
					pks = append(pks, v.Value)
				}
			}
			if in.ExclusiveStartKey = out.LastEvaluatedKey; in.ExclusiveStartKey == nil {
				break
			}
		}
		if unclaimed > 0 {
			notes = append(notes, fmt.Sprintf("%s holds %d record(s) under this key that name no claim (an update effect's, or written outside a claim)", t.label, unclaimed))
		}
	}
	return pks, notes, nil
}
