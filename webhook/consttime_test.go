package webhook

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEveryMACComparisonIsConstantTime is a check, not an example: it type-checks this
// package's code and refuses every comparison that can leak, through its timing, how much of a
// signature an attacker got right: bytes.Equal, bytes.Compare and reflect.DeepEqual, == and !=
// on byte arrays (digests) or byte slices turned into strings, and == on an encoded digest.
// crypto/subtle.ConstantTimeCompare (or hmac.Equal) is the only way to compare one. A
// comparison that holds nothing secret says so on its line with a "not a secret" comment.
func TestEveryMACComparisonIsConstantTime(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	if _, err := conf.Check("webhook", fset, parsed, info); err != nil {
		t.Fatal(err)
	}
	exempt := map[string]bool{} // file:line with a "not a secret" comment
	for _, f := range parsed {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.Contains(c.Text, "not a secret") {
					p := fset.Position(c.Pos())
					exempt[p.Filename+":"+strconv.Itoa(p.Line)] = true
				}
			}
		}
	}
	report := func(n ast.Node, what string) {
		p := fset.Position(n.Pos())
		if !exempt[p.Filename+":"+strconv.Itoa(p.Line)] {
			t.Errorf("%s: %s: compare signatures with crypto/subtle.ConstantTimeCompare (or mark the line \"not a secret\")", p, what)
		}
	}
	byteish := func(e ast.Expr) bool {
		tv, ok := info.Types[e]
		if !ok {
			return false
		}
		switch u := tv.Type.Underlying().(type) {
		case *types.Array:
			return isByte(u.Elem())
		case *types.Slice:
			return isByte(u.Elem())
		}
		// string(b) of a byte slice or array
		if call, ok := ast.Unparen(e).(*ast.CallExpr); ok && len(call.Args) == 1 {
			if fn, ok := info.Types[call.Fun]; ok && fn.IsType() {
				return byteishType(info.Types[call.Args[0]].Type)
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && strings.HasSuffix(sel.Sel.Name, "EncodeToString") {
				return true // an encoded digest
			}
		}
		return false
	}
	checked := 0
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if fn, ok := info.Uses[sel.Sel].(*types.Func); ok && fn.Pkg() != nil {
					switch fn.Pkg().Path() + "." + fn.Name() {
					case "bytes.Equal", "bytes.Compare", "reflect.DeepEqual", "slices.Equal", "slices.Compare":
						report(n, fn.Pkg().Path()+"."+fn.Name()+" is not constant-time")
					case "crypto/subtle.ConstantTimeCompare", "crypto/hmac.Equal":
						checked++
					}
				}
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (byteish(n.X) || byteish(n.Y)) {
					report(n, n.Op.String()+" on bytes")
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no constant-time comparison found: the check is not looking at the verifiers")
	}
}

func isByte(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Kind() == types.Byte
}

func byteishType(t types.Type) bool {
	if t == nil {
		return false
	}
	switch u := t.Underlying().(type) {
	case *types.Array:
		return isByte(u.Elem())
	case *types.Slice:
		return isByte(u.Elem())
	}
	return false
}
