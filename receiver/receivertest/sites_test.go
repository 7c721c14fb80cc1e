package receivertest_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/dedup"
)

// commitFiles are the dedup files whose refusals a Commit can give before any call: every
// *InvalidError and *LimitError built in them is a refusal the kit must give too. Every other
// file's refusals are listed in configSites (configuration and batch checks, refused at start
// or by CommitBatch), so that a refusal added anywhere in dedup is classified here.
var commitFiles = map[string]bool{"event.go": true, "request.go": true, "commit.go": true, "plan.go": true, "limits.go": true, "claim.go": true}

// configFiles hold refusals of a configuration or of a batch, not of one delivery's plan, and
// of the helpers a planner or its test calls itself (PutEffectOf, KeyOf, Condition): those are
// the same code in a test and in production, and Commit never gives them. transitions.go's are
// an operator's (who re-drove an intent), after the commit.
var configFiles = map[string]bool{"store.go": true, "retention.go": true, "audit.go": true, "batch.go": true,
	"marshal.go": true, "condition.go": true, "transitions.go": true}

// unreachable are commit-time refusals no plan built through the public API can reach, with
// the reason; the store keeps them as a backstop.
var unreachable = map[string]string{
	"effectItems/a check needs a condition": "CheckEffect always sets a condition",
}

// site is one refusal the store can give: the function that builds it and the first string
// literal of its Reason (an *InvalidError) or Limit (a *LimitError), or of its Field when the
// reason is not literal; pattern matches the refusal's text.
type site struct {
	key     string
	limit   bool
	pattern *regexp.Regexp
	field   string // the field's literal suffix, when the reason has no literal
}

// refusalSites reads dedup's source and returns every refusal built in files.
func refusalSites(t *testing.T, files map[string]bool) (map[string]site, []string) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join("..", "..", "dedup"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	sites := map[string]site{}
	var unclassified []string
	for name, f := range pkgs["dedup"].Files {
		base := filepath.Base(name)
		if strings.HasSuffix(base, "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				cl, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				id, ok := cl.Type.(*ast.Ident)
				if !ok || (id.Name != "InvalidError" && id.Name != "LimitError") {
					return true
				}
				if !files[base] {
					if !configFiles[base] && !commitFiles[base] {
						unclassified = append(unclassified, fset.Position(cl.Pos()).String())
					}
					return true
				}
				fields := map[string]ast.Expr{}
				for _, e := range cl.Elts {
					kv := e.(*ast.KeyValueExpr)
					fields[kv.Key.(*ast.Ident).Name] = kv.Value
				}
				s := site{limit: id.Name == "LimitError"}
				text := fields["Reason"]
				if s.limit {
					text = fields["Limit"]
				}
				lit := firstLiteral(text)
				if lit == "" {
					s.field = lastLiteral(fields["Field"])
					s.key = fn.Name.Name + "/" + s.field
				} else {
					s.key = fn.Name.Name + "/" + lit
					s.pattern = patternOf(text)
				}
				sites[s.key] = s
				return true
			})
		}
	}
	return sites, unclassified
}

func literal(e ast.Expr) (string, bool) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(b.Value)
	return v, err == nil
}

// firstLiteral is the first string literal of e: e itself, a fmt.Sprintf format, or the first
// operand of a concatenation.
func firstLiteral(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		v, _ := literal(e)
		return v
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sprintf" && len(e.Args) > 0 {
			v, _ := literal(e.Args[0])
			return v
		}
	case *ast.BinaryExpr:
		if v := firstLiteral(e.X); v != "" {
			return v
		}
		return firstLiteral(e.Y)
	}
	return ""
}

func lastLiteral(e ast.Expr) string {
	if b, ok := e.(*ast.BinaryExpr); ok {
		return lastLiteral(b.Y)
	}
	v, _ := literal(e)
	return v
}

var verb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)

// patternOf matches the text e builds: literals as they are, verbs and other operands as any.
func patternOf(e ast.Expr) *regexp.Regexp {
	var parts []string
	var walk func(ast.Expr)
	walk = func(e ast.Expr) {
		switch x := e.(type) {
		case *ast.BinaryExpr:
			walk(x.X)
			walk(x.Y)
		case *ast.CallExpr:
			format, _ := literal(x.Args[0])
			for i, p := range verb.Split(format, -1) {
				if i > 0 {
					parts = append(parts, ".*")
				}
				parts = append(parts, regexp.QuoteMeta(p))
			}
		default:
			if v, ok := literal(e); ok {
				parts = append(parts, regexp.QuoteMeta(v))
			} else {
				parts = append(parts, ".*")
			}
		}
	}
	walk(e)
	return regexp.MustCompile(`^` + strings.Join(parts, "") + `$`)
}

// matches reports whether err is the refusal of s.
func (s site) matches(err error) bool {
	var ie *dedup.InvalidError
	var le *dedup.LimitError
	switch {
	case s.limit && errors.As(err, &le):
		return s.pattern.MatchString(le.Limit)
	case !s.limit && errors.As(err, &ie):
		if s.pattern == nil {
			return strings.HasSuffix(ie.Field, s.field)
		}
		return s.pattern.MatchString(ie.Reason)
	}
	return false
}

// TestEveryStoreRefusalHasAKitCase enumerates the refusals of dedup's source and requires a
// case of storeCases (held to the kit by TestTheKitGivesTheStoresOwnRefusal) for each: a
// refusal added to the store fails here until a case shows the kit gives it too.
func TestEveryStoreRefusalHasAKitCase(t *testing.T) {
	sites, unclassified := refusalSites(t, commitFiles)
	if len(unclassified) > 0 {
		t.Fatalf("refusals in dedup files neither commitFiles nor configFiles lists: %v", unclassified)
	}
	if len(sites) < 20 {
		t.Fatalf("found %d refusal sites: the scan is broken", len(sites))
	}
	covered := map[string]bool{}
	for _, c := range storeCases(t) {
		s, ok := sites[c.site]
		if !ok {
			t.Errorf("case %q names site %q, which the store does not have", c.name, c.site)
			continue
		}
		if !s.matches(c.err) {
			t.Errorf("case %q: the store refused with %v, not the refusal of %s", c.name, c.err, c.site)
		}
		covered[c.site] = true
	}
	var missing []string
	for k := range sites {
		if !covered[k] && unreachable[k] == "" {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		t.Errorf("no case holds the kit to the store's refusal %s: add one to storeCases", k)
	}
}
