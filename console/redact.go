package console

import (
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"

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
// end when it is the start of one of them.
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
	seen := map[string]bool{}
	for _, p := range pieces {
		for _, form := range encodings(p) {
			if len(form) >= minSecret && !seen[strings.ToLower(form)] {
				seen[strings.ToLower(form)] = true
				x.forms = append(x.forms, form)
			}
		}
	}
	if len(x.forms) == 0 {
		return x
	}
	// Longest first: at one position the longest form is replaced whole.
	slices.SortFunc(x.forms, func(a, b string) int { return len(b) - len(a) })
	quoted := make([]string, len(x.forms))
	for i, form := range x.forms {
		quoted[i] = regexp.QuoteMeta(form)
		x.forms[i] = strings.ToLower(form)
	}
	x.known = regexp.MustCompile(`(?i)(?:` + strings.Join(quoted, "|") + `)`)
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
	if x.known == nil {
		return msg
	}
	// A message the outbox cut off ends in "…": its last bytes may be the start of a secret
	// (read before the rest is replaced, which would hide what they start).
	if body, ok := strings.CutSuffix(msg, "…"); ok {
		lower := strings.ToLower(body)
		cut := 0
		for _, f := range x.forms {
			for k := min(len(f)-1, len(lower)); k >= minSecret && k > cut; k-- {
				if strings.HasSuffix(lower, f[:k]) {
					cut = k
					break
				}
			}
		}
		if cut > 0 {
			msg = body[:len(body)-cut] + redacted + "…"
		}
	}
	// Again until nothing changes: a form replaced at one position can leave another (a
	// segment) that started inside it.
	for range 4 {
		next := x.known.ReplaceAllLiteralString(msg, redacted)
		if next == msg {
			break
		}
		msg = next
	}
	return msg
}

// redact is msg as the console may show it: see redactor.
func (c *Console) redact(msg string) string { return c.red.redact(msg) }
