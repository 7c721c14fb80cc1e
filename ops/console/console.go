// Package console is oncehook's operator console: a web UI over a deployment's table, run by
// the operator with their own AWS credentials (hookctl console), or mounted by a team in a
// server of their own. It is an http.Handler:
//
//	c, err := console.New(console.Config{DynamoDB: dynamodb.NewFromConfig(cfg), Table: table, Sources: file, Token: token})
//	http.ListenAndServe("127.0.0.1:8030", c)
//
// Pages: an event (/events/{source}/{id}), search by id or by an effect's key (/events), the
// parked intents with redrive and resolve (/parked), the backlog per target (/backlog), the
// overview with pause and resume (/), and the leak audit (/audit). Every page is built from
// key lookups and queries, never a Scan, and bounded (Config.MaxIndexReads); a count the bound
// cut is written "≥ N".
//
// It is safe by default: a Content-Security-Policy that allows no script; every action a POST
// with a CSRF token, refused cross-origin; ReadOnly refuses every action; payloads only with
// ShowPayloads; nothing of the sources file but names, types and deliveries. Every request
// needs the Token, on loopback too; guesses at it are bounded, and a weak one guards only
// loopback requests to a loopback host. A framed load, or another site's request other than a
// navigation, is refused before any read or guess. CheckAddr is the rule a server should apply
// before listening.
package console

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/time/rate"

	"github.com/trustelem/zxcvbn"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// API is the part of the DynamoDB client the console uses: key lookups (GetItem,
// BatchGetItem), index queries, the redrive's and the pause's updates and the table's
// description. It has no Scan. *dynamodb.Client implements it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Config configures a Console.
type Config struct {
	DynamoDB API
	// Table is the deployment's table (hookctl's -table).
	Table string
	// Sources is the deployment's sources file, optional: with it, an unknown source is
	// refused by name, search by id alone tries every source, the overview lists every source
	// and target, and targets show their type and delivery.
	Sources *sources.File
	// PendingShards is the pending index's shard count as deployed. Default dedup.PendingShards.
	PendingShards int
	// ReadOnly hides every action and refuses every POST but the login.
	ReadOnly bool
	// ShowPayloads shows intent payloads and the values of effect records in oncehook's
	// table. Off, only their sizes and keys are shown.
	ShowPayloads bool
	// Token is required of every request, and of Config (NewToken makes one). A token
	// CheckAddr would refuse for a non-loopback address guards only requests from a loopback
	// peer (RemoteAddr) addressed to a loopback host.
	Token string
	// Operator is who a redrive, a resolve or a pause is recorded as done by (the intent's
	// redriven_by or resolved_by, the pause's by), 1 to dedup.MaxRedrivenBy printable bytes. Default
	// "console".
	Operator string
	// Metrics, when set, draws the overview's charts, and counts its failures per target,
	// from the stack's metrics (CloudWatch); otherwise they come from the pending index.
	Metrics Metrics
	// MaxIndexReads bounds the entries of the pending index one page reads, as DynamoDB
	// counts what a query evaluates (before a filter), and so the claims it reads; and the
	// records a search by an effect's key reads. Default 500.
	MaxIndexReads int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives what a page could not show a person (an AWS error's details). Default:
	// discarded.
	Logger *slog.Logger
}

// maxIndexReadsLimit is the largest Config.MaxIndexReads.
const maxIndexReadsLimit = 100_000

// Console is the operator console's http.Handler.
type Console struct {
	cfg     Config
	key     []byte // signs CSRF and login cookies; per process
	handler http.Handler

	red *Redactor
	// src is the sources file, empty without one, so that a lookup needs no nil check: a
	// source or target it does not name (renamed, retired, or no file) is nil. cfg.Sources ==
	// nil still says there is no file.
	src *sources.File
	// strongToken: Token guards the console from other machines (StrongToken); without it
	// the console answers this machine only.
	strongToken bool
	tableOK     atomic.Bool // CheckTable passed: it is not asked again

	// guesses bounds the presented tokens the console compares with its own (guess).
	guessMu sync.Mutex
	guesses *rate.Limiter
}

// Guesses at the token (a /login form, an Authorization header) are compared at most
// guessBurst at once and then one per guessEvery: past that, none is compared, the right one
// neither, until the bound allows again.
const (
	guessBurst = 10
	guessEvery = 6 * time.Second
)

// New checks cfg and returns the console. It makes no AWS call: the table is checked on the
// first request (and by CheckTable, which a command should call at start).
func New(cfg Config) (*Console, error) {
	if cfg.DynamoDB == nil {
		return nil, &dedup.InvalidError{Field: "DynamoDB", Reason: "is required"}
	}
	if cfg.Table == "" {
		return nil, &dedup.InvalidError{Field: "Table", Reason: "is required"}
	}
	if cfg.Token == "" {
		return nil, &dedup.InvalidError{Field: "Token", Reason: "is required: every request must present it (NewToken makes one)"}
	}
	if cfg.PendingShards == 0 {
		cfg.PendingShards = dedup.PendingShards
	}
	if cfg.PendingShards < 0 || cfg.PendingShards > dedup.MaxPendingShards {
		return nil, &dedup.InvalidError{Field: "PendingShards", Reason: fmt.Sprintf("must be between 1 and %d", dedup.MaxPendingShards)}
	}
	if cfg.Operator == "" {
		cfg.Operator = "console"
	}
	if err := dedup.Printable(cfg.Operator, dedup.MaxRedrivenBy); err != nil {
		return nil, &dedup.InvalidError{Field: "Operator", Reason: err.Error()}
	}
	if cfg.MaxIndexReads == 0 {
		cfg.MaxIndexReads = 500
	}
	// The bound is a query's Limit (an int32) and a page's cost: a page of 100,000 index
	// entries already reads as many claims.
	if cfg.MaxIndexReads < 0 || cfg.MaxIndexReads > maxIndexReadsLimit {
		return nil, &dedup.InvalidError{Field: "MaxIndexReads", Reason: fmt.Sprintf("must be between 1 and %d", maxIndexReadsLimit)}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	src := cmp.Or(cfg.Sources, &sources.File{})
	c := &Console{cfg: cfg, key: make([]byte, 32), guesses: rate.NewLimiter(rate.Every(guessEvery), guessBurst),
		red: NewRedactor(src), src: src, strongToken: StrongToken(cfg.Token)}
	rand.Read(c.key)
	c.handler = c.guard(c.routes())
	return c, nil
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// CheckAddr is the listening rule: an address on a loopback interface, or any with a strong
// token (StrongToken) and TLS (the token, the login cookie and every page cross the network).
// Its error names what to do.
func CheckAddr(addr, token string, tls bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("console: address %q: %w", addr, err)
	}
	if loopbackHost(host) {
		return nil
	}
	if token == "" {
		return fmt.Errorf("console: %s is not a loopback address: set a token (-token or ONCEHOOK_CONSOLE_TOKEN) to serve it", addr)
	}
	if !StrongToken(token) {
		return fmt.Errorf("console: %s is not a loopback address, and the token is guessable: use at least %d random characters (openssl rand -hex 32)", addr, MinTokenBytes)
	}
	if !tls {
		return fmt.Errorf("console: %s is not a loopback address: serve it over TLS (-tls-cert and -tls-key)", addr)
	}
	return nil
}

// NewToken returns a token from 32 random bytes (64 hex digits): strong (StrongToken).
func NewToken() string { return randomHex(32) }

// randomHex is n random bytes in hex: a token, a CSRF cookie, a log reference.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// MinTokenBytes is the shortest token that guards a console other machines can reach
// (CheckAddr).
const MinTokenBytes = 32

// minTokenBits is the least log2 of the guesses zxcvbn estimates a token needs: 32 random hex
// digits estimate at 91 bits at the least seen in 1,000 draws (zxcvbn reads dates and
// sequences into them); a passphrase, a keyboard row, a date or a repeat below, however long.
const minTokenBits = 80

// StrongToken reports whether token looks generated: at least MinTokenBytes bytes, and at
// least 2^80 guesses by zxcvbn's estimate, which knows the shapes people choose (words,
// common passwords, keyboard patterns, sequences, dates), so "oncehook-console-token-2026" is
// refused. The bound on guesses would not stop a list of well-known strings for a day.
func StrongToken(token string) bool {
	if len(token) < MinTokenBytes {
		return false
	}
	return math.Log2(zxcvbn.PasswordStrength(token, nil).Guesses) >= minTokenBits
}

func loopbackHost(host string) bool {
	return host == "localhost" || loopbackIP(strings.Trim(host, "[]"))
}

func loopbackIP(s string) bool {
	ip := net.ParseIP(s)
	return ip != nil && ip.IsLoopback()
}

// hostOf is addr's host, without its port when it has one.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// noTableError is CheckTable's answer for a table that does not exist.
type noTableError struct{ table string }

func (e *noTableError) Error() string {
	return fmt.Sprintf("table %s does not exist (check -table and the region)", e.table)
}

// ErrNotOncehookTable is what CheckTable's error matches when the table exists but is not
// shaped as oncehook's.
var ErrNotOncehookTable = errors.New("not an oncehook table")

// CheckTable reports whether table is an oncehook table: keyed, and its pending index keyed,
// as dedup.CreateTableInput keys them, names and types (the pages query pk/sk as strings and
// the index by pending_shard and a window on pending_since). One DescribeTable call.
func CheckTable(ctx context.Context, api API, table string) error {
	out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if _, ok := errors.AsType[*types.ResourceNotFoundException](err); ok {
		return &noTableError{table}
	}
	if err != nil {
		return fmt.Errorf("table %s: %w", table, err)
	}
	got, want := out.Table, dedup.CreateTableInput(table)
	if g, w := keyOf(got.KeySchema, got.AttributeDefinitions), keyOf(want.KeySchema, want.AttributeDefinitions); g != w {
		return fmt.Errorf("table %s is %w: its key is %s, not %s", table, ErrNotOncehookTable, g, w)
	}
	var wantIndex string
	for _, g := range want.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == dedup.PendingIndex {
			wantIndex = keyOf(g.KeySchema, want.AttributeDefinitions)
		}
	}
	for _, g := range got.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) != dedup.PendingIndex {
			continue
		}
		if k := keyOf(g.KeySchema, got.AttributeDefinitions); k != wantIndex {
			return fmt.Errorf("table %s is %w: its %q index is keyed %s, not %s", table, ErrNotOncehookTable, dedup.PendingIndex, k, wantIndex)
		}
		return nil
	}
	return fmt.Errorf("table %s is %w: it has no %q index keyed %s", table, ErrNotOncehookTable, dedup.PendingIndex, wantIndex)
}

// keyOf reads a key schema with its attributes' types, in the schema's order (DynamoDB's:
// hash first), as `"pk" (hash, S) + "sk" (range, S)`: names quoted, since a foreign table's
// are its owner's text, shown to a terminal and a page.
func keyOf(schema []types.KeySchemaElement, attrs []types.AttributeDefinition) string {
	parts := make([]string, len(schema))
	for i, k := range schema {
		name, typ := aws.ToString(k.AttributeName), types.ScalarAttributeType("none")
		for _, a := range attrs {
			if aws.ToString(a.AttributeName) == name {
				typ = a.AttributeType
			}
		}
		parts[i] = fmt.Sprintf("%q (%s, %s)", name, strings.ToLower(string(k.KeyType)), typ)
	}
	return strings.Join(parts, " + ")
}

func (c *Console) checkTable(ctx context.Context) error {
	if c.tableOK.Load() {
		return nil
	}
	err := CheckTable(ctx, c.cfg.DynamoDB, c.cfg.Table)
	c.tableOK.Store(err == nil)
	return err
}

const (
	csrfCookie  = "oncehook_csrf"
	loginCookie = "oncehook_console"
)

// csp allows no script, no inline style, nothing from elsewhere: the pages are HTML and SVG
// with one stylesheet of their own.
const csp = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// guard applies what every request gets: the security headers, the host or token check, the
// table check, and a page instead of a stack trace when a handler panics.
func (c *Console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				c.cfg.Logger.Error("console: page failed", "path", r.URL.Path, "panic", fmt.Sprint(v))
				c.fail(w, r, http.StatusInternalServerError, "Internal error", "The page failed; the console's log has the details.")
			}
		}()
		if crossOrigin.Check(r) != nil || foreignFetch(r) {
			c.fail(w, r, http.StatusForbidden, "Cross-origin request refused",
				"This request came from another site, or from a frame (the console is never shown in one). Use the console's own pages.")
			return
		}
		// Without a strong token the console is for this machine only: addressed to a loopback
		// host (the Host header stops a DNS-rebinding page, whose requests come from the
		// operator's own browser, a loopback peer), from a loopback peer (the Host header is
		// the client's to write), and not relayed by a proxy on this machine (whose peer is
		// loopback whoever its client is). All before any guess at a weak token is taken
		// (/login included): a weak token must not make the console easier to reach than none.
		if !c.strongToken {
			if !loopbackHost(hostOf(r.Host)) {
				c.fail(w, r, http.StatusMisdirectedRequest, "Not a loopback host",
					"This console answers only requests addressed to 127.0.0.1, ::1 or localhost.")
				return
			}
			if !loopbackIP(hostOf(r.RemoteAddr)) || proxied(r) { // a hostname is never a loopback peer
				c.fail(w, r, http.StatusForbidden, "Not a loopback client",
					"This console answers only clients on this machine.")
				return
			}
		}
		if r.URL.Path != "/login" && r.URL.Path != "/static/console.css" {
			switch c.authorized(r) {
			case guessLimited:
				c.tooManyGuesses(w, r)
				return
			case guessWrong:
				c.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in"})
				return
			}
			// Past the access checks: the pages may name the deployment (render).
			r = r.WithContext(context.WithValue(r.Context(), accessKey{}, true))
			if err := c.checkTable(r.Context()); err != nil {
				status, detail := http.StatusBadGateway, err.Error()
				_, none := errors.AsType[*noTableError](err)
				switch {
				case errors.Is(err, ErrNotOncehookTable):
					status = http.StatusInternalServerError
					fallthrough
				case none:
					c.cfg.Logger.Error("console: table check", "error", err)
				default: // DescribeTable's own error names the account: logged, not shown
					detail = c.logged(r, "describing table "+c.cfg.Table, err) + "."
				}
				c.fail(w, r, status, "The table cannot be read as oncehook's", detail)
				return
			}
		}
		// A query read leniently drops what it cannot decode, and the page would answer another
		// question (an unfiltered Parked list for an unreadable source): refuse it, naming it.
		if name, bad := unreadableQuery(r.URL.RawQuery); bad {
			c.fail(w, r, http.StatusBadRequest, "Unreadable address", "The address's query parameter "+strconv.Quote(name)+" is not valid percent-encoding.")
			return
		}
		if c.eventRoute(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses an unsafe method (a POST) another origin's page made a browser send,
// by its Sec-Fetch-Site or Origin header, before the CSRF token is even looked at.
var crossOrigin = http.NewCrossOriginProtection()

// foreignFetch reports, by Fetch Metadata, a request another page made a browser send other
// than by navigating to the console, refused before any read (CrossOriginProtection lets every
// GET through, and a page costs up to MaxIndexReads) and any guess at the token: a framed load
// from any site (the console is never shown framed, so it would only spend reads or guesses,
// unseen), and anything but a navigation from another origin (same-site included: another port
// of localhost is the same site). Without Fetch Metadata (curl) it is not one.
func foreignFetch(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Dest") {
	case "iframe", "frame", "fencedframe", "object", "embed":
		return true
	}
	if !fromAnotherOrigin(r) {
		return false
	}
	return r.Header.Get("Sec-Fetch-Mode") != "navigate"
}

// fromAnotherOrigin reports a request the browser says (Sec-Fetch-Site) another origin's page
// made, a navigation included: not the console's own pages, not the operator's typing or
// opening a link from outside the browser (none), and not a client without Fetch Metadata.
func fromAnotherOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return false
	}
	return true
}

// unreadableQuery reports the first parameter of a raw query that is not valid
// percent-encoding (its name as far as it can be read).
func unreadableQuery(raw string) (string, bool) {
	for _, pair := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(pair, "=")
		name, errK := url.QueryUnescape(k)
		if _, errV := url.QueryUnescape(v); errK != nil || errV != nil {
			if errK != nil {
				name = strings.ToValidUTF8(k, "?")
			}
			return name, true
		}
	}
	return "", false
}

// proxied reports whether r was relayed by a proxy that says so: its peer is the proxy, on
// loopback when the proxy runs on this machine, whoever the proxy's client is.
func proxied(r *http.Request) bool {
	return slices.ContainsFunc([]string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip", "Via"},
		func(h string) bool { return r.Header.Get(h) != "" })
}

// accessKey marks, in a request's context, a request that passed the access checks: a page
// for one that did not (the sign-in page, a refusal) names nothing of the deployment (render).
type accessKey struct{}

func (c *Console) sign(what, v string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(what + "\x00" + v))
	return hex.EncodeToString(m.Sum(nil))
}

// The answers to a presented token.
const (
	guessRight = iota
	guessWrong
	guessLimited // not compared: past the bound on guesses
)

// authorized reports whether r carries the token: as a bearer token (a guess, bounded) or as
// the login cookie (an HMAC under the console's key: not a guess at the token).
func (c *Console) authorized(r *http.Request) int {
	if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return c.guess(auth)
	}
	if ck, err := r.Cookie(loginCookie); err == nil && c.loginValid(ck.Value) {
		return guessRight
	}
	return guessWrong
}

// loginFor is how long a sign-in lasts: the login cookie's Max-Age, and the end the console
// signs into it (a copied cookie stops working then too).
const loginFor = 12 * time.Hour

// loginValue is the login cookie's value for a sign-in ending at end (Unix seconds): the end,
// and an HMAC of the token and that end under the console's key.
func (c *Console) loginValue(end string) string {
	return end + "." + c.sign("login", c.cfg.Token+"\x00"+end)
}

func (c *Console) loginValid(v string) bool {
	end, _, _ := strings.Cut(v, ".")
	n, err := strconv.ParseInt(end, 10, 64)
	return hmac.Equal([]byte(v), []byte(c.loginValue(end))) && err == nil && c.cfg.Now().Unix() < n
}

// guess compares a presented token with the console's, within the bound on guesses: only a
// wrong one spends it (the right one is never limited), and past the bound nothing is compared.
// The bound is shared, so what another site's page makes the browser send never reaches it
// (foreignFetch, crossOrigin, login).
func (c *Console) guess(presented string) int {
	c.guessMu.Lock()
	defer c.guessMu.Unlock()
	now := c.cfg.Now()
	if c.guesses.TokensAt(now) < 1 {
		return guessLimited
	}
	if subtle.ConstantTimeCompare([]byte(presented), []byte(c.cfg.Token)) == 1 {
		return guessRight
	}
	c.guesses.AllowN(now, 1)
	return guessWrong
}

func (c *Console) tooManyGuesses(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Retry-After", strconv.Itoa(int(guessEvery/time.Second)))
	return c.render(w, r, http.StatusTooManyRequests, "login", page{Title: "Sign in",
		Detail: "Too many wrong tokens: the console compares no more for a while. Try again in a minute."})
}

// csrf returns the request's CSRF token, setting its cookie on the response when the request
// has none: the token is the cookie's value signed with the console's key, so a form's token
// proves it was read from this console by the cookie's holder.
func (c *Console) csrf(w http.ResponseWriter, r *http.Request) string {
	v := csrfValue(r)
	if v == "" {
		v = randomHex(16)
		setCookie(w, r, csrfCookie, v, 0)
	}
	return c.sign("csrf", v)
}

// setCookie sets one of the console's cookies: for its pages only (HttpOnly), never sent by
// another site's request (SameSite strict), only over TLS when it is served so.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

func (c *Console) csrfOK(r *http.Request) bool {
	v := csrfValue(r)
	return v != "" && hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(c.sign("csrf", v)))
}

// csrfValue is the request's CSRF cookie, "" when it has none of the console's making.
func csrfValue(r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 32 {
		return ck.Value
	}
	return ""
}
