package dedup_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// nonClaimWriters are the files outside dedup that write to the claims table, each an item of
// its own that is not a claim: a target's limit items and the sweep's lock (outbox), the
// storm's baseline items (hookctl).
var nonClaimWriters = []string{"outbox/limits.go", "outbox/sweeper.go", "ops/hookctl/storm.go"}

// claimAttributes are names of a claim's own attributes: no expression outside dedup may
// name them.
var claimAttributes = []string{"intents.", "commit_token", "lease_owner", "attempts_base", "redrive_id", "next_attempt_at", "lease_until"}

// TestOnlyDedupWritesTheClaimItem: dedup.Claims (and the Store's commit) is the one writer of a
// claim. Outside dedup no program code calls a DynamoDB write but the few files that write
// items of their own, and no string names a claim's own attributes (an expression on it).
func TestOnlyDedupWritesTheClaimItem(t *testing.T) {
	root := ".."
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == "dedup", rel != "." && strings.HasPrefix(rel, "."), rel == "infra", strings.HasPrefix(rel, "examples"), rel == "internal", strings.HasPrefix(rel, "e2e"):
				return filepath.SkipDir // the owner; the construct and examples are modules of their own; internal is test plumbing
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "UpdateItem", "PutItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem":
					if !slices.Contains(nonClaimWriters, filepath.ToSlash(rel)) {
						t.Errorf("%s: %s outside dedup: a claim is written through dedup.Claims only", fset.Position(n.Pos()), sel.Sel.Name)
					}
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && !strings.HasPrefix(n.Value, `"oncehook.`) { // span attributes are not the item's
					for _, a := range claimAttributes {
						if strings.Contains(n.Value, a) {
							t.Errorf("%s: %s names the claim's attribute %q outside dedup", fset.Position(n.Pos()), n.Value, a)
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
