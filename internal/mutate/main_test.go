package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

func TestAKillIsATestThatPassedUnmutatedAndFailsTwiceMutated(t *testing.T) {
	cases := []struct {
		name                    string
		baseline, first, second []string
		want                    []string
	}{
		{"fails twice under the mutation", nil, []string{"TestA"}, []string{"TestA"}, []string{"TestA"}},
		{"fails once, passes on re-run: load", nil, []string{"TestA"}, nil, nil},
		{"fails unmutated too: proves nothing", []string{"TestA"}, []string{"TestA"}, []string{"TestA"}, nil},
		{"one of two fails again", nil, []string{"TestA", "TestB"}, []string{"TestB"}, []string{"TestB"}},
		{"passes under the mutation", nil, nil, nil, nil},
	}
	for _, c := range cases {
		if got := judge(c.baseline, c.first, c.second); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFailedTestsAreReadAsTopLevelNames(t *testing.T) {
	out := []byte("=== RUN   TestA\n    --- FAIL: TestA/sub (0.00s)\n--- FAIL: TestA (0.01s)\n--- PASS: TestB (0.00s)\n--- FAIL: TestC (0.00s)\nFAIL\n")
	if got := failedTests(out); !slices.Equal(got, []string{"TestA", "TestC"}) {
		t.Fatalf("%v", got)
	}
	if got := exact([]string{"TestA", "TestC"}); got != "^(TestA|TestC)$" {
		t.Fatal(got)
	}
}

// Each mutation edits code that is there, once, and names tests that exist: a refactoring that
// moves a guarded condition fails here, not at the next mutation run. (-run takes a regular
// expression: a name matches the tests it begins.)
func TestEveryMutationEditsTheCodeOnceAndNamesTestsThatExist(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, m := range mutations {
		src, err := os.ReadFile(filepath.Join(root, m.file))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(src, []byte(m.from)); n != 1 {
			t.Errorf("%s (%s): the mutation's text occurs %d times, want once", m.guard, m.file, n)
		}
		tests, _ := filepath.Glob(filepath.Join(root, m.pkg, "*_test.go"))
		var all []byte
		for _, f := range tests {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		for _, name := range regexp.MustCompile(`Test\w+`).FindAllString(m.run, -1) {
			if !regexp.MustCompile(`(?m)^func ` + name + `\w*\(`).Match(all) {
				t.Errorf("%s: no test %s in %s", m.guard, name, m.pkg)
			}
		}
	}
}
