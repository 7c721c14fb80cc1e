package dedup

import (
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzValidText checks validText's ASCII fast path against the rule it implements: valid
// UTF-8, every rune printable.
func FuzzValidText(f *testing.F) {
	for _, s := range []string{"evt_1", "order.paid", "évt", "a\x00b", "\x7f", "\xff", "a\u202eb", "\u200b", "\ufffd", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := utf8.ValidString(s)
		for _, r := range s {
			want = want && unicode.IsPrint(r)
		}
		if got := validText("f", s, len(s)+1, false) == nil; got != want {
			t.Fatalf("validText(%q) accepts: %v; the rule says %v", s, got, want)
		}
	})
}
