package console

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// redacted replaces what an error message must not show.
const redacted = "[redacted]"

// urlInText finds absolute URLs in an error message.
var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

// redactor hides, in the error messages the console shows (an intent's last error), what a
// deployment's targets hold secret. A downstream's error quotes what it was called with in
// whatever shape its framework writes: an absolute URL, the path alone ("Cannot POST
// /hooks/<token>"), a query value, a header, escaped for a URL, JSON or HTML, cut off by the
// outbox's truncation. So, after every absolute URL is cut to its scheme and host, every form
// of every secret part of the sources file's targets is replaced: their URLs' paths and
// queries whole, the path segments, query values and header values that could be a secret
// (secretLike), the userinfo; each as configured and decoded, path-, query- and
// fully-percent-escaped, JSON- and HTML-escaped, in any letter case; and a message's truncated
// start of one wherever a quoted text or the message may have been cut (cutEnds).
type redactor struct {
	known *regexp.Regexp // nil: no target's secrets known (no sources file)
	forms []string       // every form, lower-case, for a truncated end
}

func newRedactor(f *sources.File) *redactor {
	x := &redactor{}
	if f == nil {
		return x
	}
	var pieces []string
	for _, name := range slices.Sorted(maps.Keys(f.Targets)) {
		t := f.Targets[name]
		if t.URL != "" {
			pieces = append(pieces, urlSecrets(t.URL)...)
		}
		for _, v := range t.Headers {
			if secretLike(v) {
				pieces = append(pieces, v)
			}
			if i := strings.LastIndexByte(v, ' '); i >= 0 && secretLike(v[i+1:]) {
				pieces = append(pieces, v[i+1:]) // the credential of "Bearer <token>"
			}
		}
	}
	x.forms, x.known = compile(pieces)
	return x
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
		for _, pair := range strings.Split(u.RawQuery, "&") {
			out = append(out, pair)
		}
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
		for _, f := range []string{b, url.PathEscape(b), url.QueryEscape(b), escapeAll(b), html.EscapeString(b),
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
func (x *redactor) redact(msg string) string {
	msg = urlInText.ReplaceAllStringFunc(msg, func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return "[url]"
		}
		out := u.Scheme + "://" + u.Hostname()
		if p := u.Port(); p != "" {
			out += ":" + p
		}
		if len(raw) > len(out) {
			out += "/…"
		}
		return out
	})
	msg = redactAWS(msg)
	return x.redactForms(msg, x.forms, x.known)
}

// redactForms replaces, in msg, every form matched by known (forms lower-cased, longest first),
// and the start of one wherever a message may have been cut (cutEnds). Both are looked for in
// msg with its \uXXXX escapes decoded (unescaped), since a JSON encoder may escape any
// character (Python's json.dumps every non-ASCII one, Go's <, > and &), and replaced where they
// stand in msg.
func (x *redactor) redactForms(msg string, forms []string, known *regexp.Regexp) string {
	if known == nil {
		return msg
	}
	// Cut-off secrets are read with the whole ones, before any is replaced: a replacement
	// would hide what they start.
	d, at := unescaped(msg)
	spans := cutStarts(d, forms)
	for _, m := range known.FindAllStringIndex(d, -1) {
		spans = append(spans, region{m[0], m[1]})
	}
	for i := range spans {
		spans[i] = region{at[spans[i].from], at[spans[i].to]}
	}
	msg = replaceSpans(msg, spans)
	// Again until nothing changes: a form replaced at one position can leave another (a
	// segment) that started inside it.
	for range 4 {
		next := known.ReplaceAllLiteralString(msg, redacted)
		if next == msg {
			break
		}
		msg = next
	}
	return msg
}

// jsonEscape is one character JSON-escaped, its backslash escaped or not: \uXXXX, a surrogate
// pair, or an escape cut short by a truncation (before its u too: a history's error is cut at
// HistoryErrorBytes, marked "…").
var jsonEscape = regexp.MustCompile(`\\\\?u[dD][89abAB][0-9a-fA-F]{2}\\\\?u[dD][c-fC-F][0-9a-fA-F]{2}|\\\\?u[0-9a-fA-F]{0,4}|\\\\?…$`)

// unescaped is msg with its JSON escapes (jsonEscape) decoded, one cut short as nothing, and
// for each byte of it, and its end, the offset in msg where that byte's source starts.
func unescaped(msg string) (string, []int) {
	var b strings.Builder
	at := make([]int, 0, len(msg)+1)
	next := 0
	for _, m := range append(jsonEscape.FindAllStringIndex(msg, -1), []int{len(msg), len(msg)}) {
		for ; next < m[0]; next++ {
			b.WriteByte(msg[next])
			at = append(at, next)
		}
		var r string
		json.Unmarshal([]byte(`"`+strings.ReplaceAll(msg[m[0]:m[1]], `\\`, `\`)+`"`), &r)
		b.WriteString(r)
		for range len(r) {
			at = append(at, m[0])
		}
		next = m[1]
	}
	return b.String(), append(at, len(msg))
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

// What an AWS service's error names of the deployment: ARNs (the target's, the role and
// session of the caller), account ids, request ids. docs/console.md: an AWS error's details go
// to the log, never to a page; the intent's last error may quote one. An ARN keeps its
// service, for the operator to read what failed.
var (
	arnInText       = regexp.MustCompile(`\barn:(aws[a-z-]*):([a-z0-9-]+):[a-z0-9-]*:[0-9]{12}:[^\s"'<>,;()\\]+`)
	accountInText   = regexp.MustCompile(`\b[0-9]{12}\b`)
	requestIDInText = regexp.MustCompile(`(?i)\b(request ?id|x-amzn-requestid|x-amz-request-id)(["\\]*[:=]\s*["\\]*)[A-Za-z0-9/+=-]+`)
)

func redactAWS(msg string) string {
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

// payloadForms are the texts of an intent's payload an error may quote back: the payload
// whole and each of its JSON string values of minSecret bytes or more (a downstream that
// refuses a request often echoes it, or names a field and its value).
func payloadForms(payload []byte) []string {
	if len(payload) == 0 {
		return nil
	}
	pieces := []string{string(payload)}
	var v any
	if json.Unmarshal(payload, &v) == nil {
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				pieces = append(pieces, v)
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

// compile turns pieces into the lower-cased forms (every encoding, minSecret bytes or more,
// longest first) and the pattern that matches any of them.
func compile(pieces []string) ([]string, *regexp.Regexp) {
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
		return nil, nil
	}
	// Longest first: at one position the longest form is replaced whole.
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	quoted := make([]string, len(forms))
	for i, form := range forms {
		quoted[i] = regexp.QuoteMeta(form)
		forms[i] = strings.ToLower(form)
	}
	return forms, regexp.MustCompile(`(?i)(?:` + strings.Join(quoted, "|") + `)`)
}

// intentError is an error of in (its last error, or one of its history's) as the console may
// show it: redacted, and, unless ShowPayloads, without the payload the page hides, wherever the
// downstream quoted it back.
func (c *Console) intentError(in dedup.ClaimIntent, msg string) string {
	msg = c.red.redact(msg)
	if c.cfg.ShowPayloads || msg == "" {
		return msg
	}
	forms, known := compile(payloadForms(in.Payload))
	return c.red.redactForms(msg, forms, known)
}
