package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// --- parked and redrive ---

type parkedView struct {
	Filter parkedFilter
	Since  string // the window as asked: since, from, to
	From   string
	To     string
	Window window
	Rows   []parkedRow
	// Total counts the matching intents read; AtLeast: the read bound stopped first, and it
	// counts those parked after Complete (zero: a shard was not read at all).
	Total    int
	AtLeast  bool
	Complete time.Time
	// Cautious counts the rows that are at-most-once, Uncertain those whose target's delivery
	// the console cannot know (intentRow.Unknown): both left unticked by the confirmation.
	Cautious, Uncertain int
	NoSources           bool
	Max                 int // the rows listed at most (maxRedrive)
	Reads               int // the index entries read at most (MaxIndexReads)
}

func (c *Console) parkedPage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := parkedFilter{Source: q.Get("source"), Target: q.Get("target"), Error: q.Get("error")}
	if f.Source != "" {
		if err := c.checkSource(f.Source); err != nil {
			return err
		}
	}
	if len(f.Target) > 256 || len(f.Error) > 256 {
		return failure(http.StatusBadRequest, "Filter too long", "target and error filters are at most 256 bytes.")
	}
	win, err := c.windowOf(r)
	if err != nil {
		return err
	}
	rows, complete, err := c.parked(r.Context(), f, win)
	if err != nil {
		return awsErr("reading the parked intents", err)
	}
	v := parkedView{Filter: f, Since: q.Get("since"), From: q.Get("from"), To: q.Get("to"), Window: win, Rows: rows[:min(len(rows), maxRedrive)],
		Total: len(rows), AtLeast: complete != allRead, Max: maxRedrive, Reads: c.cfg.MaxIndexReads, NoSources: c.cfg.Sources == nil}
	if v.AtLeast && complete != noneSure {
		v.Complete = time.UnixMilli(complete)
	}
	for _, row := range v.Rows {
		switch {
		case row.Unknown:
			v.Uncertain++
		case row.AtMostOnce:
			v.Cautious++
		}
	}
	return c.render(w, r, http.StatusOK, "parked", page{Title: "Parked intents", Nav: "parked", Data: v})
}

// intentRow is one intent as a page shows it: the Parked page, a confirmation, its event.
type intentRow struct {
	Source, EventID, Intent, Target string
	Attempts                        int
	ParkedAt, LastError             string
	RedrivenBy, RedrivenAt          string
	Ref                             string // names it, in the state shown, in a form
	// AtMostOnce, MaySent: see Console.caution. Unknown: flagged only because the sources file
	// does not say the target's delivery, not marked maybe sent by the outbox.
	AtMostOnce, MaySent, Unknown bool
}

func (c *Console) rowOf(cl *dedup.Claim, name string) intentRow {
	in := cl.Intents[name]
	row := intentRow{Source: cl.Source, EventID: cl.EventID, Intent: name, Target: in.Target, Attempts: in.Attempts,
		ParkedAt: in.FinishedAt, LastError: c.intentError(in, in.LastError), RedrivenBy: in.RedrivenBy, RedrivenAt: in.RedrivenAt,
		Ref: encodeRef(cl, name)}
	row.AtMostOnce, row.MaySent = c.caution(in)
	row.Unknown = !row.MaySent && c.src.Targets[in.Target] == nil
	return row
}

// A ref names one parked intent in a form, URL-encoded, and the state the page showed it in:
// its attempt count (every attempt increments it) and its claim's incarnation (the commit
// token). An action is conditional on that state in DynamoDB's own write, so a form sent again
// later (a reload, a stale tab) acts on nothing the operator was not shown.
func encodeRef(cl *dedup.Claim, intent string) string {
	return url.Values{"s": {cl.Source}, "e": {cl.EventID}, "i": {intent},
		"a": {strconv.Itoa(cl.Intents[intent].Attempts)}, "c": {cl.CommitToken}}.Encode()
}

type ref struct {
	Source, EventID, Intent string
	// Seen is whether the ref carries the state it was shown in (Attempts, Commit); a ref
	// without it can be confirmed, not re-driven.
	Seen     bool
	Attempts int
	Commit   string
}

func decodeRef(v string) (ref, error) {
	q, err := url.ParseQuery(v)
	if err != nil || len(q["s"]) != 1 || len(q["e"]) != 1 || len(q["i"]) != 1 || len(q["a"]) > 1 || len(q["c"]) > 1 || len(q) > 5 {
		return ref{}, errors.New("not an intent reference")
	}
	r := ref{Source: q.Get("s"), EventID: q.Get("e"), Intent: q.Get("i"), Commit: q.Get("c")}
	// A ref names a claim the console listed from the table: its source's syntax is checked,
	// not whether the sources file still has it (a source renamed or retired keeps its claims,
	// and their parked intents, for its retention).
	if err := cmp.Or(dedup.ValidateSourceName("source", r.Source), dedup.ValidateEventID(r.EventID)); err != nil {
		return ref{}, err
	}
	if r.Intent == "" || len(r.Intent) > dedup.MaxIntentNameLen {
		return ref{}, errors.New("intent name is empty or too long")
	}
	hasA := q.Has("a")
	if hasA {
		n, err := strconv.Atoi(q.Get("a"))
		if err != nil || n < 0 || strconv.Itoa(n) != q.Get("a") {
			return ref{}, errors.New("the attempt count is not a number")
		}
		r.Attempts = n
	}
	if len(r.Commit) > 64 || strings.Trim(r.Commit, "0123456789abcdef") != "" {
		return ref{}, errors.New("the incarnation is not a commit token")
	}
	// Seen only with both: the redrive's condition then names the attempt and the incarnation.
	r.Seen = hasA && r.Commit != ""
	return r, nil
}

// caution reports whether an intent may be at-most-once, and whether it may have been sent
// (the outbox parked it saying so): either is a person's call to re-drive, after checking the
// downstream, never preselected by a confirmation nor re-driven by query. It may be
// at-most-once when the sources file says so of its target, or does not name the target: a
// clean refusal (a 422) of an at-most-once call carries no mark of it.
func (c *Console) caution(in dedup.ClaimIntent) (atMostOnce, maySent bool) {
	t := c.src.Targets[in.Target]
	maySent = outbox.MayHaveBeenSent(in)
	return t == nil || t.Delivery == sources.AtMostOnce || maySent, maySent
}

// maxRedrive bounds one redrive request, and the rows the Parked page lists.
const maxRedrive = 200

// maxRedriveBody bounds a redrive form: maxRedrive refs of the longest ids and intent names,
// escaped twice (in the ref, then in the form).
const maxRedriveBody = maxRedrive*8<<10 + 4<<10

// confirmRow is one intent of the confirmation: as the table holds it now.
type confirmRow struct {
	intentRow
	Found  bool // the claim and the intent exist
	Parked bool
	// Changed: parked, but not in the state the list showed (parked again since, or claimed
	// again): shown, and left unticked, as are the cautious ones (intentRow).
	Changed bool
	Note    string
}

// An action is what a form of parked intents does to each one the operator confirmed, still
// parked as shown: a redrive (POST /redrive) or a resolve with the form's why (POST /resolve),
// recorded as done by the console's Operator. Both share one form, confirmation and result page.
type action struct {
	Name, Verb, Done string // "redrive", "Re-drive", "re-driven"
	Why              string // a resolve's reason
	apply            func(ctx context.Context, cl *dedup.Claim, intent string) error
}

func (c *Console) actionOf(r *http.Request) action {
	claims := &dedup.Claims{API: c.cfg.DynamoDB, Table: c.cfg.Table, Now: c.cfg.Now}
	if r.URL.Path == "/resolve" {
		why := r.PostFormValue("why")
		return action{Name: "resolve", Verb: "Resolve", Done: "resolved", Why: why, apply: func(ctx context.Context, cl *dedup.Claim, intent string) error {
			return claims.Resolve(ctx, cl, intent, c.cfg.Operator, why)
		}}
	}
	return action{Name: "redrive", Verb: "Re-drive", Done: "re-driven", apply: func(ctx context.Context, cl *dedup.Claim, intent string) error {
		return claims.RedriveBy(ctx, cl, intent, c.cfg.Operator)
	}}
}

type redriveResult struct {
	ref
	OK     bool
	Result string
}

// actionForm reads the form of an action (a redrive, a resolve, a pause, a resume), of at
// most limit bytes, and refuses it on a read-only console, unreadable, or without this
// browser's CSRF token (a cross-origin POST was refused before, by guard).
func (c *Console) actionForm(w http.ResponseWriter, r *http.Request, limit int64) error {
	if c.cfg.ReadOnly {
		return failure(http.StatusForbidden, "Read-only", "This console is read-only: it re-drives, resolves, pauses and resumes nothing.")
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		return failure(http.StatusBadRequest, "Unreadable form", "The form could not be read (too large, or not a form).")
	}
	if !c.csrfOK(r) {
		return failure(http.StatusForbidden, "Form expired", "The form's CSRF token is missing or wrong: reload the page and try again.")
	}
	return nil
}

// actOnParked re-drives or resolves (actionOf) the parked intents a form names: without
// confirm=yes it shows them as the table holds them now (confirm), with it acts on each.
func (c *Console) actOnParked(w http.ResponseWriter, r *http.Request) error {
	if err := c.actionForm(w, r, maxRedriveBody); err != nil {
		return err
	}
	act := c.actionOf(r)
	verb := strings.ToLower(act.Verb)
	values := r.PostForm["ref"]
	if len(values) == 0 {
		return failure(http.StatusBadRequest, "Nothing selected", "Select at least one parked intent to "+verb+".")
	}
	if len(values) > maxRedrive {
		return failure(http.StatusBadRequest, "Too many at once", fmt.Sprintf("%d intents selected; %s at most %d at once.", len(values), verb, maxRedrive))
	}
	if err := dedup.Printable(act.Why, dedup.MaxResolution); act.Name == "resolve" && err != nil {
		return failure(http.StatusBadRequest, "Say why", "A resolve records why: the reason "+err.Error()+".")
	}
	refs, pks := make([]ref, len(values)), make([]string, len(values))
	for i, v := range values {
		rf, err := decodeRef(v)
		if err != nil {
			return failure(http.StatusBadRequest, "Not an intent", fmt.Sprintf("%s: %v", strconv.Quote(clip(v, 120)), err))
		}
		refs[i], pks[i] = rf, dedup.ClaimKey(rf.Source, rf.EventID)
	}
	claims, err := c.readClaims(r.Context(), pks)
	if err != nil {
		return awsErr("reading the claims", err)
	}
	if r.PostFormValue("confirm") != "yes" {
		return c.confirm(w, r, act, refs, claims)
	}
	results := make([]redriveResult, 0, len(refs))
	for _, rf := range refs {
		res := redriveResult{ref: rf}
		cl, missing := lookup(claims, rf)
		switch {
		case cl == nil:
			res.Result = missing
		case !rf.Seen && cl.Intents[rf.Intent].Status != dedup.IntentParked:
			res.Result = notParked
		case !rf.Seen:
			res.Result = "not " + act.Done + ": the form does not say which parked state you confirmed (open the Parked page again)"
		default:
			res.OK, res.Result = c.actSeen(r, act, cl, rf)
		}
		results = append(results, res)
	}
	return c.render(w, r, http.StatusOK, "redriven", page{Title: act.Verb, Nav: "parked", Data: redrivenView{Results: results}})
}

// lookup is the claim holding the intent rf names, or why there is none.
func lookup(claims map[string]*dedup.Claim, rf ref) (*dedup.Claim, string) {
	cl := claims[dedup.ClaimKey(rf.Source, rf.EventID)]
	if cl == nil {
		return nil, "no claim (expired?)"
	}
	if _, ok := cl.Intents[rf.Intent]; !ok {
		return nil, "the claim has no such intent"
	}
	return cl, ""
}

const notParked = "not parked any more (re-driven or resolved already, or running)"

// actSeen re-drives or resolves one intent on condition, in the write itself, that it is
// still parked in the state the operator confirmed (rf's attempts and incarnation): cl, read
// before, gives the claim's shard and explains a refusal.
func (c *Console) actSeen(r *http.Request, act action, cl *dedup.Claim, rf ref) (bool, string) {
	seen := *cl
	seen.CommitToken = rf.Commit
	seen.Intents = maps.Clone(cl.Intents)
	in := seen.Intents[rf.Intent]
	in.Attempts = rf.Attempts
	seen.Intents[rf.Intent] = in
	err := act.apply(r.Context(), &seen, rf.Intent)
	switch now := cl.Intents[rf.Intent]; {
	case err == nil && act.Name == "resolve":
		return true, "resolved by " + c.cfg.Operator + ": " + act.Why
	case err == nil:
		return true, "re-driven by " + c.cfg.Operator + "; idempotency key " + dedup.IdempotencyKey(rf.Source, rf.EventID, rf.Intent)
	case !errors.Is(err, dedup.ErrNotParked):
		return false, "failed: " + c.logged(r, "the "+act.Name, err)
	case now.Status != dedup.IntentParked: // notParked
	case cl.CommitToken != rf.Commit:
		return false, "not " + act.Done + ": the event was claimed again since you confirmed (another incarnation); look at it again"
	case now.Attempts != rf.Attempts:
		return false, fmt.Sprintf("not %s: parked again since you confirmed (now after attempt %d, was %d); look at it again", act.Done, now.Attempts, rf.Attempts)
	}
	return false, notParked
}

// confirm shows the intents an action's form names as the table holds them now, each with the
// state shown carried in its ref: what the operator confirms is what this page shows.
func (c *Console) confirm(w http.ResponseWriter, r *http.Request, act action, refs []ref, claims map[string]*dedup.Claim) error {
	rows := make([]confirmRow, 0, len(refs))
	parked := 0
	for _, rf := range refs {
		cl, missing := lookup(claims, rf)
		if cl == nil {
			rows = append(rows, confirmRow{intentRow: intentRow{Source: rf.Source, EventID: rf.EventID, Intent: rf.Intent}, Note: missing})
			continue
		}
		in := cl.Intents[rf.Intent]
		row := confirmRow{intentRow: c.rowOf(cl, rf.Intent), Found: true, Parked: in.Status == dedup.IntentParked}
		if !row.Parked || act.Name != "redrive" { // a resolve calls no downstream: nothing to be careful of
			row.AtMostOnce, row.MaySent, row.Unknown = false, false, false
		}
		switch {
		case !row.Parked:
			row.Note = "not parked any more (" + in.Status + "): nothing to " + strings.ToLower(act.Verb)
		case rf.Seen && (rf.Attempts != in.Attempts || rf.Commit != cl.CommitToken):
			row.Changed = true
			row.Note = "changed since the list was read (parked again, or claimed again): look at it before ticking it"
		case row.MaySent:
			row.Note = "at-most-once, and may have been sent: check the downstream before ticking it"
		case row.Unknown:
			row.Note = "delivery unknown: this console has no sources file (-sources), or the file does not name the target, so it may be at-most-once; check the downstream before ticking it"
		case row.AtMostOnce:
			row.Note = "at-most-once: a second call is not absorbed by the downstream; check it before ticking it"
		}
		if row.Parked {
			parked++
		}
		rows = append(rows, row)
	}
	title := act.Verb + " " + strconv.Itoa(parked) + " intents?"
	return c.render(w, r, http.StatusOK, "confirm", page{Title: title, Nav: "parked", Data: confirmView{Action: act, Rows: rows, Parked: parked}})
}

type confirmView struct {
	Action action
	Rows   []confirmRow
	Parked int
}

// bulkView is a redrive by query's page: the query, the round just run, the totals the forms
// carry, and the next round.
type bulkView struct {
	Filter                        parkedFilter
	From, To                      time.Time
	Results                       []redriveResult // the round just run (none on the first page)
	Done, Changed, Failed, Rounds int             // so far, as the forms carry them
	Remaining                     int             // matching intents still parked, at-most-once ones aside
	AtLeast                       bool            // the read bound stopped first: Remaining is at least
	Excluded                      int             // those that may be at-most-once: never re-driven by query
	Unknown                       int             // of Excluded, those whose target's delivery cannot be known
	NoSources                     bool            // the console has no sources file
	Next                          int             // the next round's size (0: read on first)
	Finished, Stuck               bool
	Fields                        map[string]string // the next form's
	Max                           int
}

// redriveQuery re-drives every parked intent matching a query (source, target, error, and a
// window from and to, epoch milliseconds, to fixed when first read, no later than now) in
// rounds of at most maxRedrive, those that may be at-most-once (caution) aside. A round (lo
// given) re-drives the matches parked in (lo, to], each on condition it is still parked as the
// round read it, and offers the next, whose range lies below: a form sent again re-drives
// nothing more (what it re-drove is not parked any more, and one parked again since entered
// the index after to).
func (c *Console) redriveQuery(w http.ResponseWriter, r *http.Request) error {
	if err := c.actionForm(w, r, 16<<10); err != nil {
		return err
	}
	f := parkedFilter{Source: r.PostFormValue("source"), Target: r.PostFormValue("target"), Error: r.PostFormValue("error")}
	n := map[string]int64{}
	for _, k := range []string{"from", "to", "lo", "done", "changed", "failed", "rounds"} {
		v, err := strconv.ParseInt(r.PostFormValue(k), 10, 64)
		if r.PostFormValue(k) != "" && (err != nil || (v < 0 && k != "lo")) {
			return failure(http.StatusBadRequest, "Not a query", k+": not a count or a time in epoch milliseconds.")
		}
		n[k] = v
	}
	if (f.Source != "" && dedup.ValidateSourceName("source", f.Source) != nil) || len(f.Target) > 256 || len(f.Error) > 256 {
		return failure(http.StatusBadRequest, "Not a query", "The source, target or error cannot be one: open the Parked page again.")
	}
	// The window's end is fixed no later than now: by the plan (the first page), whose rounds
	// carry it, so that none re-drives an intent parked after the plan, whatever to it was given.
	win := window{From: n["from"], To: n["to"]}
	if now := c.cfg.Now().UnixMilli(); win.To == 0 || win.To > now {
		win.To = now
	}
	if win.From > win.To {
		return failure(http.StatusBadRequest, "Not a query", "from is after the window's end (to, or now): the window holds nothing. Open the Parked page again.")
	}
	rows, complete, err := c.parked(r.Context(), f, win)
	if err != nil {
		return awsErr("reading the parked intents", err)
	}
	v := bulkView{Filter: f, From: time.UnixMilli(win.From), To: time.UnixMilli(win.To), Done: int(n["done"]), Changed: int(n["changed"]),
		Failed: int(n["failed"]), Rounds: int(n["rounds"]), AtLeast: complete != allRead, Max: maxRedrive, NoSources: c.cfg.Sources == nil}
	if win.From == 0 {
		v.From = time.Time{}
	}
	var todo []parkedRow
	for _, row := range rows {
		if !row.AtMostOnce {
			todo = append(todo, row)
			continue
		}
		v.Excluded++
		if row.Unknown {
			v.Unknown++
		}
	}
	hi := win.To
	if _, round := r.PostForm["lo"]; round {
		// Only what this read is sure of: every entry above complete.
		hi = min(max(n["lo"], complete), win.To)
		act := c.actionOf(r)
		for _, row := range todo {
			if row.Since.UnixMilli() <= hi {
				continue
			}
			rf := ref{Source: row.Source, EventID: row.EventID, Intent: row.Intent, Seen: true, Attempts: row.Attempts, Commit: row.claim.CommitToken}
			ok, res := c.actSeen(r, act, row.claim, rf)
			switch {
			case ok:
				v.Done++
			case strings.HasPrefix(res, "failed: "):
				v.Failed++
			default:
				v.Changed++
			}
			v.Results = append(v.Results, redriveResult{ref: rf, OK: ok, Result: res})
		}
		v.Rounds++
	}
	// The next round: the newest maxRedrive left (all of a millisecond's, should more than a
	// round share it), of those this read is sure of.
	var sure []parkedRow
	for _, row := range todo {
		if at := row.Since.UnixMilli(); at <= hi {
			v.Remaining++
			if at > complete {
				sure = append(sure, row)
			}
		}
	}
	v.Fields = map[string]string{"source": f.Source, "target": f.Target, "error": f.Error, "from": strconv.FormatInt(win.From, 10),
		"to": strconv.FormatInt(hi, 10), "done": strconv.Itoa(v.Done), "changed": strconv.Itoa(v.Changed), "failed": strconv.Itoa(v.Failed),
		"rounds": strconv.Itoa(v.Rounds)}
	lo := complete
	switch {
	case len(sure) > maxRedrive:
		lo = sure[maxRedrive].Since.UnixMilli()
		if sure[0].Since.UnixMilli() == lo {
			lo--
		}
	case len(sure) > 0 && complete == allRead:
		lo = win.From - 1
	case len(sure) > 0:
	case complete == allRead:
		v.Finished = true
	case complete >= win.To:
		v.Stuck = true // the bound cannot read past one millisecond's entries
	default:
		v.Fields["to"] = strconv.FormatInt(min(hi, complete), 10) // nothing sure above it: read on from there
	}
	if len(sure) > 0 {
		v.Fields["lo"] = strconv.FormatInt(lo, 10)
		for _, row := range sure {
			if row.Since.UnixMilli() > lo {
				v.Next++
			}
		}
	}
	title := "Re-drive every matching parked intent?"
	if v.Rounds > 0 {
		title = "Re-drive by query: round " + strconv.Itoa(v.Rounds)
	}
	return c.render(w, r, http.StatusOK, "redriven", page{Title: title, Nav: "parked", Data: redrivenView{Results: v.Results, Bulk: &v}})
}

// redrivenView is the redrive's result page: its results, and a redrive by query's progress.
type redrivenView struct {
	Results []redriveResult
	Bulk    *bulkView
}
