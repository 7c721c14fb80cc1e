package receiver

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// The receiver reads two or three values (event id, type, time) from bodies that can be large.
// Decoding the body into maps to find them, or even encoding/json's validity check, cost most
// of the hot path (about 8 ns a byte), so this file checks the body with a direct
// recursive-descent validator and then walks to the values in place. FuzzValidJSON and
// FuzzLookupJSON check both against encoding/json.

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// isObject reports whether doc is exactly one valid JSON object (RFC 8259), with the same
// verdict as encoding/json's Valid.
func isObject(doc []byte) bool {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	end, ok := validValue(doc, i, 0)
	return ok && skipSpace(doc, end) == len(doc)
}

// validValue checks the value that starts at i and returns the index after it.
func validValue(doc []byte, i, depth int) (int, bool) {
	if i >= len(doc) {
		return i, false
	}
	switch c := doc[i]; {
	case c == '{':
		if depth >= maxDepth {
			return i, false
		}
		i = skipSpace(doc, i+1)
		if i < len(doc) && doc[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(doc) || doc[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = validString(doc, i); !ok {
				return i, false
			}
			i = skipSpace(doc, i)
			if i >= len(doc) || doc[i] != ':' {
				return i, false
			}
			if i, ok = validValue(doc, skipSpace(doc, i+1), depth+1); !ok {
				return i, false
			}
			i = skipSpace(doc, i)
			if i >= len(doc) {
				return i, false
			}
			if doc[i] == '}' {
				return i + 1, true
			}
			if doc[i] != ',' {
				return i, false
			}
			i = skipSpace(doc, i+1)
		}
	case c == '[':
		if depth >= maxDepth {
			return i, false
		}
		i = skipSpace(doc, i+1)
		if i < len(doc) && doc[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = validValue(doc, i, depth+1); !ok {
				return i, false
			}
			i = skipSpace(doc, i)
			if i >= len(doc) {
				return i, false
			}
			if doc[i] == ']' {
				return i + 1, true
			}
			if doc[i] != ',' {
				return i, false
			}
			i = skipSpace(doc, i+1)
		}
	case c == '"':
		return validString(doc, i)
	case c == '-' || c >= '0' && c <= '9':
		return validNumber(doc, i)
	case c == 't':
		return literal(doc, i, "true")
	case c == 'f':
		return literal(doc, i, "false")
	case c == 'n':
		return literal(doc, i, "null")
	}
	return i, false
}

func literal(doc []byte, i int, lit string) (int, bool) {
	if len(doc)-i >= len(lit) && string(doc[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// validString checks the string that starts at i (a '"'): no raw control characters, only
// JSON's escapes. Like encoding/json, it does not require valid UTF-8.
func validString(doc []byte, i int) (int, bool) {
	for i++; i < len(doc); i++ {
		switch c := doc[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(doc) {
				return i, false
			}
			switch doc[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(doc)-i < 5 || !isHex(doc[i+1]) || !isHex(doc[i+2]) || !isHex(doc[i+3]) || !isHex(doc[i+4]) {
					return i, false
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// validNumber checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i.
func validNumber(doc []byte, i int) (int, bool) {
	digits := func(i int) (int, bool) {
		start := i
		for i < len(doc) && doc[i] >= '0' && doc[i] <= '9' {
			i++
		}
		return i, i > start
	}
	if doc[i] == '-' {
		i++
	}
	if i < len(doc) && doc[i] == '0' {
		i++
	} else {
		var ok bool
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	if i < len(doc) && doc[i] == '.' {
		var ok bool
		if i, ok = digits(i + 1); !ok {
			return i, false
		}
	}
	if i < len(doc) && (doc[i] == 'e' || doc[i] == 'E') {
		i++
		if i < len(doc) && (doc[i] == '+' || doc[i] == '-') {
			i++
		}
		var ok bool
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	return i, true
}

// lookupJSON returns the raw value at a dot-separated path of object keys in doc, which must
// be a valid JSON object (isObject). Where a key repeats, the last one wins, as in
// encoding/json.
func lookupJSON(doc []byte, path string) ([]byte, bool) {
	for {
		key, rest, more := strings.Cut(path, ".")
		v, ok := member(doc, key)
		if !ok {
			return nil, false
		}
		if !more {
			return v, true
		}
		if len(v) == 0 || v[0] != '{' {
			return nil, false
		}
		doc, path = v, rest
	}
}

// member finds key among the members of the object that starts doc (after whitespace).
func member(doc []byte, key string) ([]byte, bool) {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false
	}
	i++
	var found []byte
	ok := false
	for {
		i = skipSpace(doc, i)
		if i >= len(doc) || doc[i] == '}' {
			return found, ok
		}
		if doc[i] == ',' {
			i = skipSpace(doc, i+1)
		}
		kEnd := skipString(doc, i)
		k := doc[i:kEnd]
		i = skipSpace(doc, kEnd)
		i = skipSpace(doc, i+1) // ':'
		vEnd := skipValue(doc, i)
		if keyEquals(k, key) {
			found, ok = doc[i:vEnd], true
		}
		i = vEnd
	}
}

// keyEquals compares a raw JSON string token with key, decoding only when it must (escapes,
// or invalid UTF-8, which encoding/json replaces with U+FFFD).
func keyEquals(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return len(raw) == len(key)+2 && string(raw[1:len(raw)-1]) == key
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == key
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string token that starts at i. It jumps from quote
// to quote (bytes.IndexByte is vectorised) and checks the backslashes before each.
func skipString(doc []byte, i int) int {
	i++
	for {
		q := bytes.IndexByte(doc[i:], '"')
		if q < 0 {
			return len(doc)
		}
		i += q
		n := 0
		for j := i - 1; j >= 0 && doc[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
		i++
	}
}

// stop marks the bytes that end a number or literal; nest, the bytes skipValue must look at
// inside a container.
var stop, nest [256]bool

func init() {
	for _, c := range []byte(",}] \t\r\n") {
		stop[c] = true
	}
	for _, c := range []byte(`"{}[]`) {
		nest[c] = true
	}
}

// skipValue returns the index after the value that starts at i.
func skipValue(doc []byte, i int) int {
	if i >= len(doc) {
		return i
	}
	switch doc[i] {
	case '"':
		return skipString(doc, i)
	case '{', '[':
		depth := 0
		for ; i < len(doc); i++ {
			c := doc[i]
			if !nest[c] {
				continue
			}
			switch c {
			case '"':
				i = skipString(doc, i) - 1
			case '{', '[':
				depth++
			default:
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(doc) && !stop[doc[i]] {
		i++
	}
	return i
}
