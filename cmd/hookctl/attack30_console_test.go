package main

// Findings of a second review of the console (attack30): each test names what must hold, and
// fails while it does not.

import (
	"strings"
	"testing"
)

// The token guards the console; ONCEHOOK_CONSOLE_TOKEN is how docs/console.md says to give it
// without putting it on the command line. -token's default is read from that variable, so the
// flag package prints it, whole, as the flag's default whenever it prints the usage: for -h,
// and for any mistyped flag, into a terminal, a shared screen or a CI log.
func TestTheConsolesUsageDoesNotPrintTheTokenFromTheEnvironment(t *testing.T) {
	const token = "4f1c9a7e2b8d6035e1a9c4f7b2d8e063-from-the-env"
	t.Setenv("ONCEHOOK_CONSOLE_TOKEN", token)
	for _, args := range [][]string{{"console", "-h"}, {"console", "-adr", "127.0.0.1:0"}} {
		_, out, errOut := hookctl(t, "", args...)
		if !strings.Contains(out+errOut, "-token") {
			t.Fatalf("%v: no usage printed:\n%s%s", args, out, errOut)
		}
		if strings.Contains(out+errOut, token) {
			t.Errorf("%v prints the console's token:\n%s%s", args, out, errOut)
		}
	}
}
