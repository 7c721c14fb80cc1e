package console

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

//go:embed templates/*.html static/console.css
var files embed.FS

var pageNames = []string{"overview", "search", "recent", "event", "parked", "confirm", "redriven", "pause", "backlog", "audit", "login", "error"}

var templates = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"eventURL": eventURL,
		"ts": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"ago": ago,
		"split": func(pk string) []string {
			s, id, _ := splitClaimPK(pk)
			return []string{s, id}
		},
		"millis": time.UnixMilli,
		"num":    num,
		"clip":   clip,
		"kept":   func() int { return dedup.HistoryLength },
		"dash": func(s string) string {
			if s == "" {
				return "-"
			}
			return s
		},
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		out[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html"))
	}
	return out
}()

// page is what every template gets.
type page struct {
	Title    string
	Nav      string
	CSRF     string
	ReadOnly bool
	Payloads bool
	Table    string
	Sources  []string
	Data     any
	// Error pages.
	Status int
	Detail string
	// Public: the page of a request without access (the sign-in page, a refusal): nothing of
	// the deployment on it.
	Public bool
}

func (c *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", c.only(http.MethodGet, c.overview))
	mux.HandleFunc("/events", c.only(http.MethodGet, c.search))
	// /events/{source}/{id} is routed by eventRoute, before the mux: the mux cleans paths
	// (an id "a//b" or ".." would be redirected elsewhere), and ids are any printable text.
	mux.HandleFunc("/parked", c.only(http.MethodGet, c.parkedPage))
	mux.HandleFunc("/redrive", c.only(http.MethodPost, c.actOnParked))
	mux.HandleFunc("/resolve", c.only(http.MethodPost, c.actOnParked))
	mux.HandleFunc("/redrive/query", c.only(http.MethodPost, c.redriveQuery))
	mux.HandleFunc("/pause", c.only(http.MethodPost, c.pauseTarget))
	mux.HandleFunc("/resume", c.only(http.MethodPost, c.pauseTarget))
	mux.HandleFunc("/backlog", c.only(http.MethodGet, c.backlog))
	mux.HandleFunc("/audit", c.only(http.MethodGet, c.audit))
	mux.HandleFunc("/login", c.only("", c.login))
	mux.HandleFunc("/static/console.css", c.only(http.MethodGet, func(w http.ResponseWriter, r *http.Request) error {
		// Written whole, not by http.ServeFileFS: a stylesheet this small is never asked in ranges.
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "max-age=300")
		b, _ := files.ReadFile("static/console.css")
		w.Write(b)
		return nil
	}))
	mux.HandleFunc("/", c.only("", func(w http.ResponseWriter, r *http.Request) error {
		return failure(http.StatusNotFound, "No such page", "The console has no page at "+strconv.Quote(r.URL.Path)+".")
	}))
	return mux
}

// A handler writes its page, or returns why it cannot: a pageError, or an AWS call's failure
// (awsErr). Only answer turns an error into a page.
type handler func(w http.ResponseWriter, r *http.Request) error

// only serves h for method ("": any) and answers other methods with a page (the mux's own 405
// is plain text).
func (c *Console) only(method string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if method != "" && r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			c.answer(w, r, failure(http.StatusMethodNotAllowed, "Method not allowed", "This page answers "+method+" only."))
			return
		}
		c.answer(w, r, h(w, r))
	}
}

// pageError is a request the console answers with an error page: its status, title and detail.
type pageError struct {
	status        int
	title, detail string
}

func (e *pageError) Error() string { return e.title + ": " + e.detail }

func failure(status int, title, detail string) error { return &pageError{status, title, detail} }

// awsError is an AWS call that failed: what it was, for the page, and the error, for the log.
type awsError struct {
	what string
	err  error
}

func (e *awsError) Error() string { return e.what + ": " + e.err.Error() }

func awsErr(what string, err error) error { return &awsError{what, err} }

// answer shows a handler's error: a pageError as it says; an AWS call's failure as what failed
// (the log has the error itself).
func (c *Console) answer(w http.ResponseWriter, r *http.Request, err error) {
	var pe *pageError
	var ae *awsError
	switch {
	case err == nil:
	case errors.As(err, &pe):
		c.fail(w, r, pe.status, pe.title, pe.detail)
	case errors.As(err, &ae) && errors.Is(ae.err, dedup.ErrUnprocessed):
		w.Header().Set("Retry-After", "30")
		c.fail(w, r, http.StatusServiceUnavailable, "The table is throttling reads",
			ae.what+" gave up after "+strconv.Itoa(maxUnprocessedRounds)+" rounds of keys DynamoDB left unprocessed: the table's read capacity is spent (the outbox needs it too). Try again in a while.")
	case errors.As(err, &ae):
		c.fail(w, r, http.StatusBadGateway, "DynamoDB did not answer", c.logged(r, ae.what, ae.err)+".")
	default:
		c.fail(w, r, http.StatusInternalServerError, "Internal error", c.logged(r, "the page", err)+".")
	}
}

// render executes a page into a buffer first, so that a template error is a clean 500 and
// never half a page. It returns nil, for a handler to end with.
//
// A request that has not passed the access checks gets the page bare (Public): no table, no
// modes, no sources, no navigation, no CSRF cookie.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) error {
	if ok, _ := r.Context().Value(accessKey{}).(bool); ok {
		p.CSRF = c.csrf(w, r)
		p.ReadOnly = c.cfg.ReadOnly
		p.Payloads = c.cfg.ShowPayloads
		p.Table = c.cfg.Table
		p.Sources = c.src.Names()
	} else {
		p.Public = true
	}
	var buf bytes.Buffer
	if err := templates[name].Execute(&buf, p); err != nil {
		c.cfg.Logger.Error("console: template", "page", name, "error", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintln(w, "internal error: the page could not be rendered")
		return nil
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
	return nil
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	c.render(w, r, status, "error", page{Title: title, Status: status, Detail: detail})
}

// logged logs an AWS call's failure under a reference and returns what a page may say of it:
// what failed, the AWS error code when there is one, and the reference. Never the error's
// text: it names the account, the IAM identity and the request id.
func (c *Console) logged(r *http.Request, what string, err error) string {
	ref := randomHex(4)
	c.cfg.Logger.Error("console: "+what, "error", err, "ref", ref, "path", r.URL.Path)
	out := what + " failed"
	if api, ok := errors.AsType[smithy.APIError](err); ok {
		out += " (" + api.ErrorCode() + ")"
	} else if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		out += " (cancelled, or out of time)"
	}
	return out + "; the console's log has the details, reference " + ref
}

// eventURL is an event page's address: /events/{source}/{id}, the id path-escaped ('/' too).
// An id that is a dot segment ("." or "..") goes in the query instead, since browsers and
// proxies resolve dot segments in a path whatever their escaping.
func eventURL(source, id string) string {
	if id == "." || id == ".." || id == "" {
		return "/events/" + url.PathEscape(source) + "/?id=" + url.QueryEscape(id)
	}
	return "/events/" + url.PathEscape(source) + "/" + url.PathEscape(id)
}

// eventRoute serves /events/{source}/{id} from the escaped path itself, and /events/{source}
// as that source's recent events.
func (c *Console) eventRoute(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/events/")
	if !ok {
		return false
	}
	c.only(http.MethodGet, func(w http.ResponseWriter, r *http.Request) error {
		srcEsc, idEsc, hasID := strings.Cut(rest, "/")
		source, err1 := url.PathUnescape(srcEsc)
		id, err2 := url.PathUnescape(idEsc)
		if err1 != nil || err2 != nil {
			return failure(http.StatusBadRequest, "Unreadable address", "The event's address is not valid percent-encoding.")
		}
		if !hasID {
			r.URL.RawQuery = url.Values{"source": {source}}.Encode()
			return c.search(w, r)
		}
		if id == "" {
			id = r.URL.Query().Get("id")
		}
		return c.event(w, r, source, id)
	})(w, r)
	return true
}

// redirect answers 303 to a path of the console as it is, uncleaned (http.Redirect would
// clean it, resolving an id's dot segments).
func redirect(w http.ResponseWriter, to string) error {
	w.Header().Set("Location", to)
	w.WriteHeader(http.StatusSeeOther)
	return nil
}

func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t).Round(time.Second)
	if d < 0 {
		return "in " + span(-d)
	}
	return span(d) + " ago"
}

// span is a duration as a person reads it: seconds to hours as Go writes them, days past two.
func span(d time.Duration) string {
	if d >= 48*time.Hour {
		return strconv.Itoa(int(d/(24*time.Hour))) + " days"
	}
	return d.String()
}

func epochMillis(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(n)
}

// checkSource checks a source a person typed: its syntax (400) and, with a sources file,
// whether the deployment has it (404).
func (c *Console) checkSource(source string) error {
	if dedup.ValidateSourceName("source", source) != nil {
		return failure(http.StatusBadRequest, "Not a source name", fmt.Sprintf("source %s: a source is 1 to %d characters of a-z, 0-9, - and _.", strconv.Quote(source), dedup.MaxSourceLen))
	}
	if _, ok := c.src.Sources[source]; !ok && c.cfg.Sources != nil {
		return failure(http.StatusNotFound, "Unknown source", fmt.Sprintf("source %s is not in the sources file; it names %s.", strconv.Quote(source), strings.Join(c.src.Names(), ", ")))
	}
	return nil
}

// windowOf reads a page's time window on when claims entered the pending index: since (a
// duration back from now: 2h, 90m, 3d), or from and to (RFC 3339), either end open.
func (c *Console) windowOf(r *http.Request) (window, error) {
	q := r.URL.Query()
	var win window
	bad := func(detail string) (window, error) {
		return window{}, failure(http.StatusBadRequest, "Not a time window", detail)
	}
	if s := q.Get("since"); s != "" {
		d, err := sources.ParseDuration(s)
		if err != nil || d <= 0 || q.Get("from") != "" {
			return bad("since: a duration back from now, such as 2h, 90m or 3d (and no from with it).")
		}
		win.From = c.cfg.Now().Add(-d).UnixMilli()
	}
	for _, end := range []struct {
		name string
		at   *int64
	}{{"from", &win.From}, {"to", &win.To}} {
		if s := q.Get(end.name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil || t.UnixMilli() <= 0 {
				return bad(end.name + ": a time in RFC 3339, such as 2026-01-02T15:04:05Z.")
			}
			*end.at = t.UnixMilli()
		}
	}
	if win.To != 0 && win.From > win.To {
		return bad("from is after to.")
	}
	return win, nil
}

// scopeHint says how to find a delivery of source from the id its provider shows, when a
// header scopes source's ids (GitHub's X-GitHub-Hook-ID) and id names no scope: the claim is
// <that header's value>:<id>, a key lookup once the scope is given (the console never scans
// the table for it). "" otherwise, and without a sources file.
func (c *Console) scopeHint(source, id string) string {
	s := c.src.Sources[source]
	if !s.ScopedIDs() || strings.Contains(id, ":") {
		return ""
	}
	header := s.EventID.ScopeHeader
	return fmt.Sprintf("Source %s's ids are scoped by %s: its claims are <%s>:<id>, so %s is claimed as <scope>:%s. "+
		"Search again with the scope (for GitHub, the hook's id, shown in the hook's settings and in every delivery's %s header): "+
		"/events?source=%s&scope=<scope>&id=%s, or paste <scope>:%s.",
		source, header, header, strconv.Quote(id), id, header, url.QueryEscape(source), url.QueryEscape(id), id)
}

// checkID checks an event id a person typed: printable UTF-8, at most dedup.MaxEventIDBytes.
func checkID(id string) error {
	err := dedup.ValidateEventID(id)
	if err == nil {
		return nil
	}
	reason := err.Error()
	if inv, ok := errors.AsType[*dedup.InvalidError](err); ok {
		reason = inv.Field + " " + inv.Reason
	}
	return failure(http.StatusBadRequest, "Not an event id", fmt.Sprintf("%s (got %s).", reason, strconv.Quote(clip(id, 80))))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// --- search and the event page ---

type searchView struct {
	Source, ID, Key string
	Matches         []indexEntry
	Notes           []string // what a search by key did not search or read
	// Partial: the read bound (Reads entries of the index) stopped the recent events before
	// they were known to be the newest; they are, for the claims after Cutoff (when set).
	Partial bool
	Cutoff  time.Time
	Reads   int
}

func (c *Console) search(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	source, id := strings.TrimSpace(q.Get("source")), q.Get("id")
	// A source whose ids a header scopes (GitHub's X-GitHub-Hook-ID) claims <scope>:<id>; the
	// provider's dashboard shows the id alone.
	if scope := strings.TrimSpace(q.Get("scope")); scope != "" && id != "" {
		id = scope + ":" + strings.TrimSpace(id)
	}
	// A pasted id often brings a space or a line end along; an id may also really end in a
	// space. The id as given is used when it is valid and claimed, else the trimmed one.
	if trimmed := strings.TrimSpace(id); trimmed != id {
		if trimmed == "" || checkID(id) != nil || !c.claimed(r.Context(), source, id) {
			id = trimmed
		}
	}
	key := strings.TrimSpace(q.Get("key"))
	switch {
	case key != "":
		return c.byKey(w, r, key)
	case source != "" && id != "":
		if err := cmp.Or(c.checkSource(source), checkID(id)); err != nil {
			return err
		}
		return redirect(w, eventURL(source, id))
	case id != "":
		return c.searchSources(w, r, id)
	case source != "":
		if err := c.checkSource(source); err != nil {
			return err
		}
		win, err := c.windowOf(r)
		if err != nil {
			return err
		}
		keys, partial, cutoff, err := c.recent(r.Context(), source, win, 50)
		if err != nil {
			return awsErr("reading the pending index", err)
		}
		return c.render(w, r, http.StatusOK, "recent", page{Title: "Recent events of " + source, Nav: "events",
			Data: searchView{Source: source, Matches: keys, Partial: partial, Cutoff: cutoff, Reads: c.cfg.MaxIndexReads}})
	}
	return c.render(w, r, http.StatusOK, "search", page{Title: "Find an event", Nav: "events"})
}

// searchSources answers a search by an id alone: a key lookup per source of the sources file.
func (c *Console) searchSources(w http.ResponseWriter, r *http.Request, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if c.cfg.Sources == nil {
		return failure(http.StatusBadRequest, "Which source?", "Without the sources file the console cannot try every source: name the source too.")
	}
	found, err := c.claimsOf(r.Context(), c.src.Names(), id)
	if err != nil {
		return awsErr("reading the claim", err)
	}
	switch len(found) {
	case 0:
		var hints []string
		for _, s := range c.src.Names() {
			if h := c.scopeHint(s, id); h != "" {
				hints = append(hints, h)
			}
		}
		if len(hints) > 0 {
			return failure(http.StatusNotFound, "Give the scope", fmt.Sprintf("No source has a claim for %s as it is. ", strconv.Quote(id))+strings.Join(hints, " "))
		}
		return failure(http.StatusNotFound, "No such event", fmt.Sprintf("No source has a claim for %s now: no event of this deployment has that id, or its claim expired after its retention. ", strconv.Quote(id))+searchTakes)
	case 1:
		return redirect(w, eventURL(found[0].Source, id))
	}
	v := searchView{ID: id}
	for _, cl := range found {
		v.Matches = append(v.Matches, indexEntry{PK: cl.PK, Since: cl.ReceivedAt})
	}
	return c.render(w, r, http.StatusOK, "recent", page{Title: "Events " + id, Nav: "events", Data: v})
}

// claimsOf reads id's claim of each of sources (GetClaim reads none for a name that cannot be
// a source): those found, and the first read that failed.
func (c *Console) claimsOf(ctx context.Context, sources []string, id string) (found []*dedup.Claim, err error) {
	for _, s := range sources {
		cl, e := dedup.GetClaim(ctx, c.cfg.DynamoDB, c.cfg.Table, s, id)
		switch {
		case e == nil:
			found = append(found, cl)
		case !errors.Is(e, dedup.ErrNoClaim) && !errors.Is(e, dedup.ErrInvalid):
			err = cmp.Or(err, e)
		}
	}
	return found, err
}

// claimed reports whether source (or, when it is "", any source of the sources file) has a
// claim for id; a failed read counts as no.
func (c *Console) claimed(ctx context.Context, source, id string) bool {
	names := []string{source}
	if source == "" {
		names = c.src.Names()
	}
	found, _ := c.claimsOf(ctx, names, id)
	return len(found) > 0
}

// searchTakes is what a search that found nothing says it takes: an order number or a
// delivery id is not the provider's event id, and "not found" is not "never arrived".
const searchTakes = "The search takes the provider's event id (with its source, or alone to try every source), " +
	"or an effect's key as the planner wrote it (key=, the partition key, e.g. ORDER#ord_10484) to find the event that wrote it."

// byKey answers a search by an effect's key: the event that wrote it (a redirect), the events
// that did (a list), or a 404 saying what a key not found means.
func (c *Console) byKey(w http.ResponseWriter, r *http.Request, key string) error {
	if len(key) > 2048 {
		return failure(http.StatusBadRequest, "Not a key", "key: a partition key is at most 2048 bytes.")
	}
	pks, notes, err := c.writers(r, key)
	if err != nil {
		return awsErr("querying the table by key", err)
	}
	if len(pks) == 0 {
		return failure(http.StatusNotFound, "No effect record holds this key",
			fmt.Sprintf("Nothing found under %s: no effect record holds it now (it expired with its claim, or was never written under this key), which says nothing of whether the event arrived. %s%s",
				strconv.Quote(clip(key, 120)), strings.Join(append(notes, ""), ". "), searchTakes))
	}
	claims, err := c.readClaims(r.Context(), pks)
	if err != nil {
		return awsErr("reading the claims", err)
	}
	if s, id, _ := splitClaimPK(pks[0]); len(pks) == 1 && claims[pks[0]] != nil {
		return redirect(w, eventURL(s, id))
	}
	v := searchView{Key: key, Notes: notes}
	for _, pk := range pks {
		e := indexEntry{PK: pk}
		if cl := claims[pk]; cl != nil {
			e.Since = cl.ReceivedAt
		}
		v.Matches = append(v.Matches, e)
	}
	return c.render(w, r, http.StatusOK, "recent", page{Title: "Events that wrote " + clip(key, 80), Nav: "events", Data: v})
}

type eventView struct {
	Source, ID string
	Claim      *dedup.Claim
	Expires    time.Time
	Effects    []effectView
	Intents    []intentView
	Guard      *guardView
	Guarded    bool // the source guards bodies, but this claim names no guard
}

type effectView struct {
	Table, PK, SK string
	Value         string
	Missing       bool
}

// intentView is an intent on its event's page: a parked one with its Ref and MaySent.
type intentView struct {
	intentRow
	Kind, Status, Key, Sent string
	Budget, PayloadBytes    int
	Payload                 string
	Steps                   []step
	History                 []dedup.Attempt // newest first, errors redacted
}

type step struct {
	At     time.Time
	What   string
	Detail string
}

func (c *Console) event(w http.ResponseWriter, r *http.Request, source, id string) error {
	if dedup.ValidateSourceName("source", source) != nil {
		return c.checkSource(source) // says what a source name is
	}
	if err := checkID(id); err != nil {
		return err
	}
	ctx := r.Context()
	cl, err := dedup.GetClaim(ctx, c.cfg.DynamoDB, c.cfg.Table, source, id)
	if errors.Is(err, dedup.ErrNoClaim) {
		// No claim of a source the sources file does not have is a typo, said so; a claim of a
		// source it no longer has (renamed, retired) is shown all the same: the Parked page lists
		// its intents for as long as it is kept.
		if err := c.checkSource(source); err != nil {
			return err
		}
		if h := c.scopeHint(source, id); h != "" {
			return failure(http.StatusNotFound, "Give the scope", h)
		}
		return failure(http.StatusNotFound, "No such event", fmt.Sprintf("%s has no claim for %s now: none of its events has that id, or its claim expired after the source's retention. ", source, strconv.Quote(id))+searchTakes)
	}
	if err != nil {
		return awsErr("reading the claim", err)
	}
	v := eventView{Source: source, ID: id, Claim: cl, Expires: time.Unix(cl.ExpiresAt, 0)}
	for _, k := range cl.Effects {
		e := effectView{Table: k.Table, PK: k.PK, SK: k.SK}
		if c.cfg.ShowPayloads && k.Table == "" {
			item, err := c.getItem(ctx, k.PK, k.SK, false)
			if err != nil {
				return awsErr("reading an effect record", err)
			}
			e.Missing = item == nil
			e.Value = itemJSON(item)
		}
		v.Effects = append(v.Effects, e)
	}
	if v.Guard, err = c.bodyGuard(ctx, cl); err != nil {
		return awsErr("reading the body guard", err)
	}
	if s := c.src.Sources[source]; s != nil && v.Guard == nil {
		v.Guarded = s.Guarded()
	}
	for _, name := range slices.Sorted(maps.Keys(cl.Intents)) {
		v.Intents = append(v.Intents, c.intentView(cl, name))
	}
	return c.render(w, r, http.StatusOK, "event", page{Title: source + " " + id, Nav: "events", Data: v})
}

func (c *Console) intentView(cl *dedup.Claim, name string) intentView {
	in := cl.Intents[name]
	// What the target reported it sent is redacted as an error is: a Step Functions execution's
	// ARN names the account and the state machine (the target's ARN).
	sent := c.red.redact(in.Sent)
	v := intentView{intentRow: c.rowOf(cl, name), Kind: c.targetKind(in.Target), Status: in.Status,
		Key: dedup.IdempotencyKey(cl.Source, cl.EventID, name), Sent: sent, Budget: in.Spent(), PayloadBytes: len(in.Payload)}
	if in.Status != dedup.IntentParked {
		v.Ref, v.MaySent = "", false
	}
	if c.cfg.ShowPayloads {
		v.Payload = text(in.Payload)
	}
	for _, a := range slices.Backward(in.History) {
		a.Error = c.intentError(in, a.Error)
		v.History = append(v.History, a)
	}
	v.Steps = append(v.Steps, step{At: cl.ReceivedAt, What: "claimed", Detail: "committed with the claim, pending"})
	if t, err := time.Parse(time.RFC3339, in.RedrivenAt); err == nil {
		v.Steps = append(v.Steps, step{At: t, What: "re-driven", Detail: "by " + in.RedrivenBy + ", with a fresh attempt budget from attempt " + strconv.Itoa(in.AttemptsBase)})
	}
	switch in.Status {
	case dedup.IntentPending:
		if in.NextAttemptAt != 0 {
			what := "next attempt due"
			if in.Attempts > 0 {
				what = "retry due"
			}
			v.Steps = append(v.Steps, step{At: time.UnixMilli(in.NextAttemptAt), What: what, Detail: fmt.Sprintf("after %d attempts", in.Attempts)})
		}
	case dedup.IntentRunning:
		v.Steps = append(v.Steps, step{At: time.UnixMilli(in.LeaseUntil), What: "attempt " + strconv.Itoa(in.Attempts) + " leased until", Detail: "a worker holds it; another may take it after the lease"})
	case dedup.IntentDone, dedup.IntentParked, dedup.IntentResolved:
		if t, err := time.Parse(time.RFC3339Nano, in.FinishedAt); err == nil {
			d := fmt.Sprintf("after %d attempts", in.Attempts)
			if sent != "" {
				d += "; sent " + sent
			}
			what := in.Status
			if what == dedup.IntentResolved {
				what = dedup.IntentParked // it was parked then; the resolve is a step of its own
			}
			v.Steps = append(v.Steps, step{At: t, What: what, Detail: d})
		}
		if t, err := time.Parse(time.RFC3339, in.ResolvedAt); err == nil && in.Status == dedup.IntentResolved {
			v.Steps = append(v.Steps, step{At: t, What: "resolved", Detail: "by " + in.ResolvedBy + ": " + in.Resolution + "; never run again"})
		}
	}
	slices.SortStableFunc(v.Steps, func(a, b step) int { return a.At.Compare(b.At) })
	return v
}

// targetKind is a target's type and delivery from the sources file: never its URL, ARN or
// headers.
func (c *Console) targetKind(target string) string {
	t := c.src.Targets[target]
	if t == nil {
		return ""
	}
	kind := cmp.Or(t.Type, "http")
	if t.Delivery == sources.AtMostOnce {
		kind += ", at-most-once"
	}
	return kind
}

func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return "hex " + hex.EncodeToString(b)
}

func itemJSON(item map[string]types.AttributeValue) string {
	if item == nil {
		return ""
	}
	var m map[string]any
	if err := attributevalue.UnmarshalMap(item, &m); err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	return string(b)
}

// --- backlog, overview, audit, login ---

type backlogView struct {
	Rows   []*targetLoad
	Claims int
	More   bool
	Now    time.Time
}

func (c *Console) backlog(w http.ResponseWriter, r *http.Request) error {
	rows, cls, more, err := c.loads(r.Context(), false)
	if err != nil {
		return awsErr("reading the pending index", err)
	}
	return c.render(w, r, http.StatusOK, "backlog", page{Title: "Backlog", Nav: "backlog", Data: backlogView{Rows: rows, Claims: len(cls), More: more, Now: c.cfg.Now()}})
}

type auditView struct {
	Records []*dedup.AuditRecord
	Never   []string
}

func (c *Console) audit(w http.ResponseWriter, r *http.Request) error {
	recs, never, err := c.audits(r.Context())
	if err != nil {
		return awsErr("reading the audit's record", err)
	}
	return c.render(w, r, http.StatusOK, "audit", page{Title: "Leak audit", Nav: "audit", Data: auditView{Records: recs, Never: never}})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		// The sign-in link (hookctl console prints it) carries the token in its query. The
		// operator opens it from a terminal or the address bar (Sec-Fetch-Site: none); one
		// another site's page navigates to is not theirs, and is not compared: it would spend
		// the bound on guesses, and lock them out of their own console (guess).
		q := r.URL.Query()
		switch {
		case q.Has("token") && fromAnotherOrigin(r):
			return c.render(w, r, http.StatusForbidden, "login", page{Title: "Sign in",
				Detail: "A sign-in link opened from another site's page is not taken. Open the console's link from your terminal or the address bar, or enter the token here."})
		case q.Has("token"):
			return c.signIn(w, r, q.Get("token"))
		}
		return c.render(w, r, http.StatusOK, "login", page{Title: "Sign in"})
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		if err := r.ParseForm(); err != nil {
			return c.render(w, r, http.StatusBadRequest, "login", page{Title: "Sign in", Detail: "The form could not be read."})
		}
		return c.signIn(w, r, r.PostFormValue("token"))
	}
	w.Header().Set("Allow", "GET, POST")
	return failure(http.StatusMethodNotAllowed, "Method not allowed", "The login page answers GET and POST.")
}

// signIn sets the login cookie for the right token, and sends the browser on to the overview
// (the token leaves the address bar); a wrong one is a guess.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request, token string) error {
	switch c.guess(token) {
	case guessLimited:
		return c.tooManyGuesses(w, r)
	case guessWrong:
		return c.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Detail: "That is not the console's token."})
	}
	end := strconv.FormatInt(c.cfg.Now().Add(loginFor).Unix(), 10)
	setCookie(w, r, loginCookie, c.loginValue(end), int(loginFor/time.Second))
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}
