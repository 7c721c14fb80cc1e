// Package console is oncehook's operator console: a web UI over a deployment's table, run by
// the operator against their own stack with their own AWS credentials (hookctl console), or
// mounted by a team in a server of their own. It is an http.Handler:
//
//	c, err := console.New(console.Config{DynamoDB: dynamodb.NewFromConfig(cfg), Table: table, Sources: file, Token: token})
//	http.ListenAndServe("127.0.0.1:8030", c)
//
// Pages: the event page (/events/{source}/{id}: the claim, its effects, each intent's
// timeline and attempt history, the body guard), search (/events?source=&id=, or an effect's
// key: /events?key=), the parked intents in a time window with redrive, of some or of every
// match in rounds, and resolve with a reason (/parked), the backlog per target (/backlog), an
// overview of charts, of what failed most today and of the paused targets, with pause and
// resume (/), and the leak audit's last result (/audit). Every page is built from key lookups and queries (of the pending
// index, or by an effect's key), never a Scan, and bounded (Config.MaxIndexReads); a count the
// bound cut is written "≥ N".
//
// It is safe by default: every response carries a Content-Security-Policy that allows no
// script at all; every state-changing request is a POST carrying a CSRF token bound to a
// cookie, and is refused cross-origin; ReadOnly hides and refuses every action; intent
// payloads and effect values are shown only with ShowPayloads; nothing from the sources file
// but names, types and deliveries is rendered (never a secret reference, a URL or a header).
// It serves no request without its Token (a sign-in form or link sets a cookie, or an
// Authorization: Bearer header), on loopback too; guesses at it are bounded; a weak one
// guards only requests from a loopback peer addressed to a loopback host (neither a remote
// client nor a DNS-rebinding page can reach it). A request another site's page makes, other
// than a navigation, and a framed load from any page, is refused before any read and any
// guess at the token; a sign-in link another site's page opens is not compared. CheckAddr is the rule a server should apply
// before listening: loopback only, unless a strong token is set and TLS serves it.
package console

import (
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
	"strconv"
	"strings"
	"sync"
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
	mux     *http.ServeMux
	key     []byte // signs CSRF and login cookies; per process
	handler http.Handler

	red *redactor
	// strongToken: Token guards the console from other machines (StrongToken); without it
	// the console answers this machine only.
	strongToken bool
	mu          sync.Mutex
	tableOK     bool

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
	if err := dedup.ValidRedrivenBy(cfg.Operator); err != nil {
		return nil, &dedup.InvalidError{Field: "Operator", Reason: strings.TrimPrefix(err.Error(), "dedup: redriven_by ")}
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
	c := &Console{cfg: cfg, mux: http.NewServeMux(), key: make([]byte, 32), guesses: rate.NewLimiter(rate.Every(guessEvery), guessBurst),
		red: newRedactor(cfg.Sources), strongToken: StrongToken(cfg.Token)}
	rand.Read(c.key)
	c.routes()
	c.handler = c.guard(c.mux)
	return c, nil
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// CheckAddr is the listening rule: an address on a loopback interface, or, with a strong
// token and TLS (the token, the login cookie and every page cross the network), any. A token
// guards a non-loopback address only when it is strong (StrongToken). It names what to do
// when addr cannot be served that way.
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
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// MinTokenBytes is the shortest token that guards a console other machines can reach
// (CheckAddr).
const MinTokenBytes = 32

// minTokenBits is the least log2 of the guesses zxcvbn estimates a token needs. zxcvbn counts
// a random character as 10 guesses at most, and reads dates and sequences into random hex, so
// 32 random hex digits (`openssl rand -hex 16`) estimate at 91 bits at the least seen in 1,000
// draws, well above; a word, a passphrase of common words, a keyboard row, a sequence, a date
// or a repeat estimate below, however long.
const minTokenBits = 80

// StrongToken reports whether token looks generated: at least MinTokenBytes bytes, and at
// least 2^80 guesses by zxcvbn's estimate, which knows the shapes people choose (dictionary
// words and common passwords, keyboard patterns, sequences, repeats, dates), so a passphrase
// or "oncehook-console-token-2026" is refused where a count of characters' variety would take
// it. Guesses at a token are also bounded (10, then one every 6 s), but a list of the
// well-known strings would get through that in a day.
//
// zxcvbn (github.com/trustelem/zxcvbn, a port of Dropbox's) is used rather than a rule of our
// own: what makes a string guessable is its frequency lists and pattern matchers, which are
// the hard part.
func StrongToken(token string) bool {
	if len(token) < MinTokenBytes {
		return false
	}
	return math.Log2(zxcvbn.PasswordStrength(token, nil).Guesses) >= minTokenBits
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// loopbackPeer reports whether a request's RemoteAddr is a loopback IP (a hostname never is).
func loopbackPeer(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// noTableError is CheckTable's answer for a table that does not exist.
type noTableError struct{ table string }

func (e *noTableError) Error() string {
	return fmt.Sprintf("table %s does not exist (check -table and the region)", e.table)
}

// ErrNotOncehookTable is what CheckTable's error matches when the table exists but is not
// shaped as oncehook's.
var ErrNotOncehookTable = errors.New("not an oncehook table")

// CheckTable reports whether table is an oncehook table: pk/sk string keys and the pending
// index over pending_shard. One DescribeTable call.
func CheckTable(ctx context.Context, api API, table string) error {
	out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return &noTableError{table}
	}
	if err != nil {
		return fmt.Errorf("table %s: %w", table, err)
	}
	t := out.Table
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, d := range t.AttributeDefinitions {
		attrTypes[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	keys := map[string]types.KeyType{}
	for _, k := range t.KeySchema {
		keys[aws.ToString(k.AttributeName)] = k.KeyType
	}
	if keys[dedup.PartitionKey] != types.KeyTypeHash || keys[dedup.SortKey] != types.KeyTypeRange || len(keys) != 2 {
		return fmt.Errorf("table %s is %w: its key is not pk (hash) + sk (range)", table, ErrNotOncehookTable)
	}
	// The types too: a table keyed by numbers under these names would pass the names and
	// refuse every read the pages make.
	if attrTypes[dedup.PartitionKey] != types.ScalarAttributeTypeS || attrTypes[dedup.SortKey] != types.ScalarAttributeTypeS {
		return fmt.Errorf("table %s is %w: its key pk + sk is not two strings", table, ErrNotOncehookTable)
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) != dedup.PendingIndex {
			continue
		}
		ok := false
		for _, k := range g.KeySchema {
			name := aws.ToString(k.AttributeName)
			switch {
			case name == dedup.IndexPartitionKey && k.KeyType == types.KeyTypeHash && attrTypes[name] == types.ScalarAttributeTypeS:
				ok = true
			case name == dedup.IndexSortKey && k.KeyType == types.KeyTypeRange && attrTypes[name] == types.ScalarAttributeTypeN:
			default:
				return fmt.Errorf("table %s is %w: its %q index is not keyed %s (string) + %s (number)", table, ErrNotOncehookTable,
					dedup.PendingIndex, dedup.IndexPartitionKey, dedup.IndexSortKey)
			}
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("table %s is %w: it has no %q index over %s", table, ErrNotOncehookTable, dedup.PendingIndex, dedup.IndexPartitionKey)
}

func (c *Console) checkTable(ctx context.Context) error {
	c.mu.Lock()
	ok := c.tableOK
	c.mu.Unlock()
	if ok {
		return nil
	}
	if err := CheckTable(ctx, c.cfg.DynamoDB, c.cfg.Table); err != nil {
		return err
	}
	c.mu.Lock()
	c.tableOK = true
	c.mu.Unlock()
	return nil
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
			host := r.Host
			if h, _, err := net.SplitHostPort(r.Host); err == nil {
				host = h
			}
			if !loopbackHost(host) {
				c.fail(w, r, http.StatusMisdirectedRequest, "Not a loopback host",
					"This console answers only requests addressed to 127.0.0.1, ::1 or localhost.")
				return
			}
			if !loopbackPeer(r.RemoteAddr) || proxied(r) {
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
				var none *noTableError
				switch {
				case errors.Is(err, ErrNotOncehookTable):
					c.cfg.Logger.Error("console: table check", "error", err)
					c.fail(w, r, http.StatusInternalServerError, "The table cannot be read as oncehook's", err.Error())
				case errors.As(err, &none):
					c.cfg.Logger.Error("console: table check", "error", err)
					c.fail(w, r, http.StatusBadGateway, "The table cannot be read as oncehook's", err.Error())
				default:
					c.fail(w, r, http.StatusBadGateway, "The table cannot be read as oncehook's", c.logged(r, "describing table "+c.cfg.Table, err)+".")
				}
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

// foreignFetch reports a request another page made a browser send other than by navigating
// the window to the console: Fetch Metadata's Resource Isolation Policy, refused before any
// read (CrossOriginProtection lets every GET through, and a page costs up to MaxIndexReads of
// the index), and before any guess at the token.
//
//   - A framed load (an <iframe>, a <frame>, an <object>, an <embed>), from any site: the
//     console is never shown framed (frame-ancestors 'none', X-Frame-Options: DENY), so serving
//     one would only spend reads, or guesses at /login, for the page that framed it, unseen.
//   - From another origin (cross-site, or same-site: another port of localhost is the same
//     site, and the SameSite=Strict cookies go with its requests), anything but a navigation
//     (an <img>, a <script>, a fetch()).
//
// Without Fetch Metadata (curl, an older browser) it is not one.
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
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip", "Via"} {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

// accessKey marks, in a request's context, a request that passed the access checks.
type accessKey struct{}

// hasAccess reports whether r passed the access checks: a page for one that did not (the
// sign-in page, a refusal) names nothing of the deployment.
func hasAccess(r *http.Request) bool {
	ok, _ := r.Context().Value(accessKey{}).(bool)
	return ok
}

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

// loginValue is the login cookie's value: its end (Unix seconds) and an HMAC of the token and
// that end under the console's key.
func (c *Console) loginValue() string {
	end := strconv.FormatInt(c.cfg.Now().Add(loginFor).Unix(), 10)
	return end + "." + c.sign("login", c.cfg.Token+"\x00"+end)
}

func (c *Console) loginValid(v string) bool {
	end, mac, ok := strings.Cut(v, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(c.sign("login", c.cfg.Token+"\x00"+end))) {
		return false
	}
	n, err := strconv.ParseInt(end, 10, 64)
	return err == nil && c.cfg.Now().Unix() < n
}

// guess compares a presented token with the console's, within the bound on guesses: only a
// wrong one spends it, so an operator's scripts with the right token are never limited, and
// past the bound nothing is compared (the answer says nothing of the token). The bound is
// shared, so what another site's page makes the operator's browser send never reaches it: a
// framed or sub-resource load is refused first (foreignFetch), and a sign-in link another
// origin navigates to is not compared (login); a cross-origin POST is refused (crossOrigin).
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
	ck, err := r.Cookie(csrfCookie)
	if err != nil || len(ck.Value) != 32 {
		b := make([]byte, 16)
		rand.Read(b)
		ck = &http.Cookie{Name: csrfCookie, Value: hex.EncodeToString(b), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
		http.SetCookie(w, ck)
	}
	return c.sign("csrf", ck.Value)
}

func (c *Console) csrfOK(r *http.Request) bool {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || len(ck.Value) != 32 {
		return false
	}
	return hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(c.sign("csrf", ck.Value)))
}
