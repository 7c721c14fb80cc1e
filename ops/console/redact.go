package console

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// redacted replaces what an error message must not show.
const redacted = "[redacted]"

// urlInText finds absolute URLs in an error message.
var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

// A Redactor hides, in the errors the console shows (an intent's last error, what it sent),
// what a deployment's targets hold secret; another tool that prints them (hookctl inspect,
// parked) shows them through it too. A downstream's error quotes what it was called with in
// whatever shape its framework writes: an absolute URL, the path alone ("Cannot POST
// /hooks/<token>"), a query value, a header, escaped for a URL, JSON or HTML, cut off by a
// truncation. So every absolute URL is cut to its scheme and host, and every form (encodings)
// of every secret part of the targets (their URLs' paths and queries, the segments, values and
// headers that could be a secret, the userinfo) is replaced, whole or cut short.
type Redactor struct{ formSet }

// NewRedactor is the Redactor of a deployment's sources file, which names the targets'
// secrets; nil for none, where every absolute URL is still cut to its scheme and host.
func NewRedactor(f *sources.File) *Redactor {
	f = cmp.Or(f, &sources.File{})
	var pieces []string
	for _, name := range slices.Sorted(maps.Keys(f.Targets)) {
		t := f.Targets[name]
		pieces = append(pieces, urlSecrets(t.URL)...)
		for _, v := range t.Headers {
			if secretLike(v) {
				pieces = append(pieces, v)
			}
			if i := strings.LastIndexByte(v, ' '); i >= 0 && secretLike(v[i+1:]) {
				pieces = append(pieces, v[i+1:]) // the credential of "Bearer <token>"
			}
		}
	}
	return &Redactor{compile(pieces)}
}

// minSecret is the shortest text redacted as a secret, and the shortest truncated start of
// one: shorter, it would hide ordinary words and reveal next to nothing.
const minSecret = 4

// urlSecrets are the parts of a target's URL that may be, or hold, its secret.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return []string{raw}
	}
	var out []string
	if u.User != nil {
		out = append(out, u.User.String())
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
			// Go's client sends the userinfo as "Authorization: Basic base64(user:password)",
			// and a 401 may quote the header it refused.
			out = append(out, basicForms(u.User.Username()+":"+pw)...)
		}
		if secretLike(u.User.Username()) {
			out = append(out, u.User.Username())
		}
	}
	for _, p := range []string{u.EscapedPath(), u.Path} {
		if len(p) > 1 {
			out = append(out, p)
			if u.RawQuery != "" {
				out = append(out, p+"?"+u.RawQuery)
			}
		}
		for _, seg := range strings.Split(p, "/") {
			if secretLike(seg) {
				out = append(out, seg)
			}
		}
	}
	if u.RawQuery != "" {
		out = append(out, u.RawQuery)
		out = append(out, strings.Split(u.RawQuery, "&")...)
		for k, vs := range u.Query() {
			for _, v := range vs {
				out = append(out, k+"="+v)
				if secretLike(v) {
					out = append(out, v)
				}
			}
		}
	}
	if u.Fragment != "" {
		out = append(out, u.Fragment)
	}
	return out
}

// secretLike reports whether a path segment, query value or header value could be a secret
// on its own: at least 6 bytes, and a digit, a capital, a sign or 20 bytes in it (a token, an
// id). A plain word ("hooks", "services", "json") is not, and stays readable; the URL's path
// and query are redacted whole wherever they appear all the same.
func secretLike(s string) bool {
	if len(s) < 6 {
		return false
	}
	if len(s) >= 20 {
		return true
	}
	for _, r := range s {
		if unicode.IsDigit(r) || unicode.IsUpper(r) || !unicode.IsLetter(r) {
			return true
		}
	}
	return false
}

// encodings are the forms an error may quote s in.
func encodings(s string) []string {
	bases := []string{s}
	if d, err := url.PathUnescape(s); err == nil && d != s {
		bases = append(bases, d)
	}
	if d, err := url.QueryUnescape(s); err == nil && d != s {
		bases = append(bases, d)
	}
	var out []string
	for _, b := range bases {
		goJSON, _ := json.Marshal(b)
		plainJSON := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(b)
		// No HTML-escaped form: a message is read with its character references decoded
		// (views), whichever an escaper writes (&#39;, &#x27;, &apos;).
		for _, f := range []string{b, url.PathEscape(b), url.QueryEscape(b), escapeAll(b),
			string(goJSON[1 : len(goJSON)-1]), plainJSON} {
			out = append(out, f, strings.ReplaceAll(f, "/", `\/`))
		}
	}
	return out
}

func escapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// redact returns msg as the console may show it.
func (x *Redactor) redact(msg string) string {
	msg = urlInText.ReplaceAllStringFunc(msg, func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return "[url]"
		}
		out := u.Scheme + "://" + strings.TrimSuffix(u.Host, ":") // an IPv6 host keeps its brackets
		if len(raw) > len(out) {
			out += "/…"
		}
		return out
	})
	return x.formSet.redact(redactAWS(msg))
}

// A formSet is the texts to redact: every form of each (encodings), minSecret bytes or more.
type formSet struct {
	lower []string       // lower-cased, longest first, for a truncated end
	known *regexp.Regexp // any of them, in any letter case; nil: none
}

// redact replaces, in msg, every form, and the start of one wherever a message may have been
// cut (cutEnds). Both are looked for in each of msg's views (its JSON escapes decoded, then its
// HTML character references too), and replaced where they stand in msg.
func (f formSet) redact(msg string) string {
	if f.known == nil {
		return msg
	}
	// Cut-off secrets are read with the whole ones, before any is replaced: a replacement
	// would hide what they start.
	var spans []region
	for _, v := range views(msg) {
		found := cutStarts(v.text, f.lower)
		for _, m := range f.known.FindAllStringIndex(v.text, -1) {
			found = append(found, region{m[0], m[1]})
		}
		for _, sp := range found {
			spans = append(spans, region{v.at[sp.from], v.at[sp.to]})
		}
	}
	msg = replaceSpans(msg, spans)
	// Again until nothing changes: a form replaced at one position can leave another (a
	// segment) that started inside it.
	for range 4 {
		next := f.known.ReplaceAllLiteralString(msg, redacted)
		if next == msg {
			break
		}
		msg = next
	}
	return msg
}

// A view is a message as a form is looked for in it: text, and for each of its bytes, and its
// end, the offset in the message where that byte's source starts.
type view struct {
	text string
	at   []int
}

// views are the ways msg may hold a form: with its JSON escapes decoded, since a JSON encoder
// may escape any character (Python's json.dumps every non-ASCII one, Go's <, > and &); and that
// with its HTML character references decoded too, once and twice, since an HTML page quotes a
// value escaped in whatever way its escaper writes (Python's html.escape &#x27;, Django's
// &quot;, Go's &#39;, &apos;, decimal or hexadecimal): one decoding (html.UnescapeString)
// rather than a list of escapers' forms.
func views(msg string) []view {
	v := decode(view{msg, identity(len(msg))}, jsonEscape, unescapeJSON)
	out := []view{v}
	for range 2 {
		next := decode(v, htmlReference, unescapeHTML)
		if next.text == v.text {
			break
		}
		out, v = append(out, next), next
	}
	return out
}

func identity(n int) []int {
	at := make([]int, n+1)
	for i := range at {
		at[i] = i
	}
	return at
}

// decode is v with each match of pat replaced by dec of it, its offsets carried through: each
// byte a match decodes to starts where the match does.
func decode(v view, pat *regexp.Regexp, dec func(string) string) view {
	var b strings.Builder
	at := make([]int, 0, len(v.text)+1)
	next := 0
	for _, m := range append(pat.FindAllStringIndex(v.text, -1), []int{len(v.text), len(v.text)}) {
		for ; next < m[0]; next++ {
			b.WriteByte(v.text[next])
			at = append(at, v.at[next])
		}
		src := v.text[m[0]:m[1]]
		if src == "" { // the end
			break
		}
		if r := dec(src); r != src {
			b.WriteString(r)
			// What it decodes to starts where it does, but for what it kept of its own end (the
			// quote after a reference cut short), which stays where it stands.
			kept := 0
			for kept < len(r) && kept < len(src) && r[len(r)-1-kept] == src[len(src)-1-kept] {
				kept++
			}
			for range len(r) - kept {
				at = append(at, v.at[m[0]])
			}
			for i := m[1] - kept; i < m[1]; i++ {
				at = append(at, v.at[i])
			}
		} else { // left as it is: each byte its own source
			for i := m[0]; i < m[1]; i++ {
				b.WriteByte(v.text[i])
				at = append(at, v.at[i])
			}
		}
		next = m[1]
	}
	return view{b.String(), append(at, v.at[len(v.text)])}
}

// jsonEscape is one character JSON-escaped, its backslash escaped or not: \uXXXX, a surrogate
// pair, or an escape cut short by a truncation (before its u too: a history's error is cut at
// HistoryErrorBytes, marked "…").
var jsonEscape = regexp.MustCompile(`\\\\?u[dD][89abAB][0-9a-fA-F]{2}\\\\?u[dD][c-fC-F][0-9a-fA-F]{2}|\\\\?u[0-9a-fA-F]{0,4}|\\\\?…$`)

// unescapeJSON is the character a jsonEscape stands for; one cut short, nothing.
func unescapeJSON(esc string) string {
	var r string
	json.Unmarshal([]byte(`"`+strings.ReplaceAll(esc, `\\`, `\`)+`"`), &r)
	return r
}

// htmlReference is one HTML character reference, named, decimal or hexadecimal, with the
// semicolon every escaper writes; or one cut short by a truncation, just before where a quoted
// text or the message may have been cut (cutEnds: a quote, the worker's "…", the end).
var htmlReference = regexp.MustCompile(`&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z][a-zA-Z0-9]{1,31});|&#?[xX]?[0-9a-zA-Z]{0,31}(?:["']|…$|$)`)

// unescapeHTML is the character an htmlReference stands for (html.UnescapeString: a name it
// does not know is left as it is); one cut short, nothing but the cut it stands before.
func unescapeHTML(ref string) string {
	if strings.HasSuffix(ref, ";") {
		return html.UnescapeString(ref)
	}
	return strings.TrimLeft(ref[1:], "#0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
}

// cutEnds are the places where a quoted text may have been cut short: the outbox keeps the
// first 256 bytes of a downstream's answer, quoted and unmarked; Lambda's %.200s of a
// function error; the worker's own truncation, which ends in "…"; the end of the message.
// A quote (escaped or not) follows the cut in the first two, the end of the message in the rest.
func cutEnds(msg string) []int {
	var ends []int
	for i := 0; i < len(msg); i++ {
		if msg[i] == '"' || msg[i] == '\'' {
			ends = append(ends, i)
		}
	}
	if body, ok := strings.CutSuffix(msg, "…"); ok {
		ends = append(ends, len(body))
	}
	return append(ends, len(msg))
}

type region struct{ from, to int }

// cutStarts are, at each cut end, the longest start (minSecret bytes or more) of a form that
// the text before it ends with.
func cutStarts(msg string, forms []string) []region {
	lower := strings.ToLower(msg)
	var spans []region
	for _, end := range cutEnds(msg) {
		cut := 0
		for _, f := range forms {
			for k := min(len(f)-1, end); k >= minSecret && k > cut; k-- {
				if strings.HasSuffix(lower[:end], f[:k]) {
					cut = k
					break
				}
			}
		}
		if cut > 0 {
			spans = append(spans, region{end - cut, end})
		}
	}
	return spans
}

// replaceSpans replaces each span of msg with redacted, overlapping ones as one.
func replaceSpans(msg string, spans []region) string {
	slices.SortFunc(spans, func(a, b region) int { return a.from - b.from })
	var merged []region
	for _, r := range spans {
		if n := len(merged); n > 0 && merged[n-1].to > r.from {
			merged[n-1].to = max(merged[n-1].to, r.to)
			continue
		}
		merged = append(merged, r)
	}
	// From the last: earlier offsets stay right.
	for i := len(merged) - 1; i >= 0; i-- {
		msg = msg[:merged[i].from] + redacted + msg[merged[i].to:]
	}
	return msg
}

// What an AWS service's error, or what a target reports it sent, names of the deployment:
// ARNs (the target's, the role and session of the caller), account ids, request ids.
// docs/console.md: an AWS error's details go to the log, never to a page; the intent's last
// error may quote one. An ARN keeps its service, for the operator to read what failed; a Step
// Functions execution's keeps its resource type and its name too (the name after the state
// machine's, an express execution's run id after it), by which the operator finds it, while
// the region, the account and the state machine (the target's ARN) are redacted.
var (
	executionInText = regexp.MustCompile(`\barn:(aws[a-z-]*):states:[a-z0-9-]*:[0-9]{12}:(execution|express):[^:\s"'<>,;()\\]+:([^\s"'<>,;()\\]+)`)
	arnInText       = regexp.MustCompile(`\barn:(aws[a-z-]*):([a-z0-9-]+):[a-z0-9-]*:[0-9]{12}:[^\s"'<>,;()\\]+`)
	accountInText   = regexp.MustCompile(`\b[0-9]{12}\b`)
	requestIDInText = regexp.MustCompile(`(?i)\b(request ?id|x-amzn-requestid|x-amz-request-id)(["\\]*[:=]\s*["\\]*)[A-Za-z0-9/+=-]+`)
)

func redactAWS(msg string) string {
	msg = executionInText.ReplaceAllString(msg, "arn:$1:states:"+redacted+":$2:"+redacted+":$3")
	msg = arnInText.ReplaceAllString(msg, "arn:$1:$2:"+redacted)
	msg = accountInText.ReplaceAllLiteralString(msg, redacted)
	return requestIDInText.ReplaceAllString(msg, "$1$2"+redacted)
}

// basicForms are the base64 forms of a Basic credential, as a client sends it and as
// encoders print it (padded or not, standard or URL alphabet).
func basicForms(userPass string) []string {
	b := []byte(userPass)
	return []string{base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b)}
}

// minPayloadDigits is the fewest digits a JSON number of a payload has for its text to be
// hidden where an error quotes it: a phone, account, card or order number, a postcode, an
// amount in cents of 100.00 and up. A shorter one (a count, a status code, a year) would hide
// the error's own words and identifies no one.
const minPayloadDigits = 5

// payloadForms are the texts of an intent's payload an error may quote back: the payload
// whole, each of its JSON string values of minSecret bytes or more, and each of its numbers
// of minPayloadDigits digits or more, as written and as a float prints (a downstream that
// refuses a request often echoes it, or names a field and its value).
func payloadForms(payload []byte) []string {
	if len(payload) == 0 {
		return nil
	}
	pieces := []string{string(payload)}
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber() // a number's text as written, not as a float64 prints it
	var v any
	if d.Decode(&v) == nil {
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				pieces = append(pieces, v)
			case json.Number:
				if len(strings.Map(keepDigits, v.String())) >= minPayloadDigits {
					pieces = append(pieces, v.String())
					if f, err := v.Float64(); err == nil {
						pieces = append(pieces, strconv.FormatFloat(f, 'f', -1, 64))
					}
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			case map[string]any:
				for _, e := range v {
					walk(e)
				}
			}
		}
		walk(v)
	}
	return pieces
}

// keepDigits is a strings.Map function keeping only decimal digits.
func keepDigits(r rune) rune {
	if '0' <= r && r <= '9' {
		return r
	}
	return -1
}

// compile is the formSet of pieces.
func compile(pieces []string) formSet {
	seen := map[string]bool{}
	var forms []string
	for _, p := range pieces {
		for _, form := range encodings(p) {
			if len(form) >= minSecret && !seen[strings.ToLower(form)] {
				seen[strings.ToLower(form)] = true
				forms = append(forms, form)
			}
		}
	}
	if len(forms) == 0 {
		return formSet{}
	}
	// Longest first: at one position the longest form is replaced whole.
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	quoted := make([]string, len(forms))
	for i, form := range forms {
		quoted[i] = regexp.QuoteMeta(form)
		forms[i] = strings.ToLower(form)
	}
	return formSet{forms, regexp.MustCompile(`(?i)(?:` + strings.Join(quoted, "|") + `)`)}
}

// intentError is an error of in (its last error, or one of its history's) as the console may
// show it: redacted, and, unless ShowPayloads, without the payload the page hides (IntentError).
func (c *Console) intentError(in dedup.ClaimIntent, msg string) string {
	if c.cfg.ShowPayloads {
		return c.red.redact(msg)
	}
	return c.red.IntentError(in, msg)
}

// IntentError is an error of in (its last error, or one of its history's) as the console shows
// it without ShowPayloads: redacted, and without the intent's payload where the downstream
// quoted it back.
func (x *Redactor) IntentError(in dedup.ClaimIntent, msg string) string {
	msg = x.redact(msg)
	if msg == "" {
		return msg
	}
	return compile(payloadForms(in.Payload)).redact(msg)
}
