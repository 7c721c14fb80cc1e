package main

import (
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
