package console

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
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
	PK     string
	Since  time.Time
	Parked bool
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

// indexKeys reads the keys under the given shards of the pending index, newest first within
// a shard when newest is set, at most limit in all (more reports whether any were left), each
// with a pk starting with prefix when one is given (a filter on the index's projected key).
func (c *Console) indexKeys(ctx context.Context, shards []string, prefix string, newest bool, limit int) (keys []indexEntry, more bool, err error) {
	for _, shard := range shards {
		in := &dynamodb.QueryInput{
			TableName:                 aws.String(c.cfg.Table),
			IndexName:                 aws.String(dedup.PendingIndex),
			KeyConditionExpression:    aws.String(dedup.AttrPendingShard + " = :s"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: shard}},
			ScanIndexForward:          aws.Bool(!newest),
		}
		if prefix != "" {
			in.FilterExpression = aws.String("begins_with(" + dedup.AttrPK + ", :p)")
			in.ExpressionAttributeValues[":p"] = &types.AttributeValueMemberS{Value: prefix}
		}
		p := dynamodb.NewQueryPaginator(c.cfg.DynamoDB, in)
		for p.HasMorePages() {
			if len(keys) >= limit {
				return keys, true, nil
			}
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, false, err
			}
			for _, item := range page.Items {
				if len(keys) >= limit {
					return keys, true, nil
				}
				e := indexEntry{Parked: dedup.IsParkedShard(shard)}
				if v, ok := item[dedup.AttrPK].(*types.AttributeValueMemberS); ok {
					e.PK = v.Value
				}
				if v, ok := item[dedup.AttrPendingSince].(*types.AttributeValueMemberN); ok {
					e.Since = epochMillis(v.Value)
				}
				keys = append(keys, e)
			}
		}
	}
	return keys, false, nil
}

// indexed reads the claims under shards, at most MaxIndexReads (more: some were left), with
// outbox.IndexedClaims: the code hookctl parked reads them with.
func (c *Console) indexed(ctx context.Context, shards []string) (claims []*dedup.Claim, more bool, err error) {
	for _, shard := range shards {
		for cl, err := range outbox.IndexedClaims(ctx, c.cfg.DynamoDB, c.cfg.Table, shard) {
			if err != nil {
				return nil, false, err
			}
			if len(claims) == c.cfg.MaxIndexReads {
				return claims, true, nil
			}
			claims = append(claims, cl)
		}
	}
	return claims, false, nil
}

// parkedRow is one parked intent, for the Parked page.
type parkedRow struct {
	Source, EventID, Intent, Target string
	Attempts                        int
	ParkedAt, LastError             string
	RedrivenBy, RedrivenAt          string
	Ref                             string // the form value naming it for a redrive
}

type parkedFilter struct{ Source, Target, Error string }

func (f parkedFilter) match(r parkedRow) bool {
	return (f.Source == "" || r.Source == f.Source) && (f.Target == "" || r.Target == f.Target) &&
		(f.Error == "" || strings.Contains(strings.ToLower(r.LastError), strings.ToLower(f.Error)))
}

// parked lists the parked intents under the parked shards (outbox.ParkedClaims, as hookctl
// parked), filtered.
func (c *Console) parked(ctx context.Context, f parkedFilter) (rows []parkedRow, more bool, err error) {
	read := 0
	for cl, err := range outbox.ParkedClaims(ctx, c.cfg.DynamoDB, c.cfg.Table, c.cfg.PendingShards) {
		if err != nil {
			return nil, false, err
		}
		if read == c.cfg.MaxIndexReads {
			more = true
			break
		}
		read++
		for _, name := range slices.Sorted(maps.Keys(cl.Intents)) {
			in := cl.Intents[name]
			if in.Status != dedup.IntentParked {
				continue
			}
			r := parkedRow{Source: cl.Source, EventID: cl.EventID, Intent: name, Target: in.Target, Attempts: in.Attempts,
				ParkedAt: in.FinishedAt, LastError: redact(in.LastError), RedrivenBy: in.RedrivenBy, RedrivenAt: in.RedrivenAt,
				Ref: encodeRef(cl.Source, cl.EventID, name)}
			if f.match(r) {
				rows = append(rows, r)
			}
		}
	}
	return rows, more, nil
}

// targetLoad is one target's open and parked work, for the backlog and the overview.
type targetLoad struct {
	Target                      string
	Due, Waiting, Running       int // pending and due now; pending, due later; leased
	Parked                      int
	Oldest                      time.Time // the oldest open intent's claim entered the due index
	OldestSource, OldestEventID string
}

// loads reads the claims under the due shards (and the parked ones when withParked) and
// counts their intents per target.
func (c *Console) loads(ctx context.Context, withParked bool) (rows []*targetLoad, cls []*dedup.Claim, more bool, err error) {
	due, parked := dedup.ShardNames(c.cfg.PendingShards)
	shards := due
	if withParked {
		shards = append(slices.Clone(due), parked...)
	}
	cls, more, err = c.indexed(ctx, shards)
	if err != nil {
		return nil, nil, false, err
	}
	now := c.cfg.Now().UnixMilli()
	by := map[string]*targetLoad{}
	if c.cfg.Sources != nil {
		for name := range c.cfg.Sources.Targets {
			by[name] = &targetLoad{Target: name}
		}
	}
	for _, cl := range cls {
		since := time.UnixMilli(cl.PendingSince)
		if cl.PendingSince == 0 {
			since = cl.ReceivedAt
		}
		for _, in := range cl.Intents {
			t := by[in.Target]
			if t == nil {
				t = &targetLoad{Target: in.Target}
				by[in.Target] = t
			}
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
	for _, name := range slices.Sorted(maps.Keys(by)) {
		rows = append(rows, by[name])
	}
	return rows, cls, more, nil
}

// recent lists a source's most recent claims in the pending index (those with intents open or
// parked), newest first.
func (c *Console) recent(ctx context.Context, source string, limit int) ([]indexEntry, bool, error) {
	due, parked := dedup.ShardNames(c.cfg.PendingShards)
	keys, more, err := c.indexKeys(ctx, append(due, parked...), dedup.ClaimKey(source, ""), true, c.cfg.MaxIndexReads)
	if err != nil {
		return nil, false, err
	}
	sort.SliceStable(keys, func(i, j int) bool { return keys[i].Since.After(keys[j].Since) })
	if len(keys) > limit {
		keys, more = keys[:limit], true
	}
	return keys, more, nil
}

// bodyGuard reads the claim's body guard, when it names one.
type guardView struct {
	Key, HeldBy string
	Expires     time.Time
	Found, Ours bool
}

func (c *Console) bodyGuard(ctx context.Context, cl *dedup.Claim) (*guardView, error) {
	if cl.BodyGuard == "" {
		return nil, nil
	}
	pk := dedup.ClaimKey(cl.Source, cl.BodyGuard)
	out, err := c.cfg.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.cfg.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{dedup.AttrPK: &types.AttributeValueMemberS{Value: pk}, dedup.AttrSK: &types.AttributeValueMemberS{Value: dedup.BodySK}}})
	if err != nil {
		return nil, err
	}
	g := &guardView{Key: pk + " / " + dedup.BodySK}
	if out.Item == nil {
		return g, nil
	}
	g.Found = true
	if v, ok := out.Item[dedup.AttrEventID].(*types.AttributeValueMemberS); ok {
		g.HeldBy = v.Value
		g.Ours = v.Value == cl.EventID
	}
	if v, ok := out.Item[dedup.AttrExpiresAt].(*types.AttributeValueMemberN); ok {
		g.Expires = epochSeconds(v.Value)
	}
	return g, nil
}

// effectValue reads an effect record of oncehook's own table (ShowPayloads only).
func (c *Console) effectValue(ctx context.Context, k dedup.EffectKey) (map[string]types.AttributeValue, error) {
	out, err := c.cfg.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.cfg.Table),
		Key: map[string]types.AttributeValue{dedup.AttrPK: &types.AttributeValueMemberS{Value: k.PK}, dedup.AttrSK: &types.AttributeValueMemberS{Value: k.SK}}})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// audits reads the leak audit's last results: oncehook's table's, and each audited table's
// of the sources file.
func (c *Console) audits(ctx context.Context) ([]*dedup.AuditRecord, []string, error) {
	names := []string{""}
	if c.cfg.Sources != nil {
		for _, name := range slices.Sorted(maps.Keys(c.cfg.Sources.Tables)) {
			// A bound table not bound here has no name ("" would read as oncehook's own).
			if t := c.cfg.Sources.Tables[name]; t.Audit && t.PhysicalName(name) != "" {
				names = append(names, t.PhysicalName(name))
			}
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

var errNoClaim = dedup.ErrNoClaim

func isNoClaim(err error) bool { return errors.Is(err, errNoClaim) }
