package console_test

// Findings of a security review of the console (attack26): each test names what must never
// happen, and fails while it does.

import (
	"testing"

	"github.com/oncehook/oncehook/console"
)

// The token is all that guards a console on a non-loopback address, and /login takes
// unlimited guesses: a token a person can guess in a few tries is a configuration that cannot
// work, and should be refused where it is configured.
func TestCheckAddrRefusesAGuessableTokenOnANonLoopbackAddress(t *testing.T) {
	for _, token := range []string{"x", "1234", " ", "password"} {
		if err := console.CheckAddr("0.0.0.0:8030", token); err == nil {
			t.Errorf("CheckAddr(0.0.0.0:8030, %q) accepted it", token)
		}
	}
}
