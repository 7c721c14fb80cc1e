package receiver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"
)

// The receiver reads a few values from bodies that can be large, and must refuse bodies that
// are not JSON. encoding/json's check followed by a walk per value cost most of the hot path,
// so one recursive-descent pass both validates and picks up the values at paths compiled in
// advance. FuzzValidJSON and FuzzLookupJSON hold its verdicts to encoding/json's.

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// maxPaths is how many paths one jsonPaths can read in a pass (one bit each in a mask).
const maxPaths = 64

// jsonPaths is a set of dot-separated paths of object keys ("data.object.id"), compiled once
// and read from a document in one pass by scan.
type jsonPaths [][]string

// compilePaths splits each path into its keys.
func compilePaths(paths ...string) (jsonPaths, error) {
	if len(paths) > maxPaths {
		return nil, fmt.Errorf("receiver: %d JSON paths; at most %d are read in one pass", len(paths), maxPaths)
	}
	ps := make(jsonPaths, len(paths))
	for i, p := range paths {
		keys := strings.Split(p, ".")
		for _, k := range keys {
			if k == "" {
				return nil, fmt.Errorf("receiver: JSON path %q is not a dot-separated list of keys", p)
			}
		}
		ps[i] = keys
	}
	return ps, nil
}

// span is where a value lies in a document: doc[start:end], or nowhere when end is 0 (offsets
// keep the caller's array on its stack).
type span struct{ start, end int }

// in returns the raw value the span covers in doc, or nil.
func (v span) in(doc []byte) []byte {
	if v.end == 0 {
		return nil
	}
	return doc[v.start:v.end]
}

// scan reports whether doc is exactly one valid JSON object (encoding/json's verdict) and sets
// vals[p] to where the value at path p lies, or nowhere. A repeated key's last value wins.
func (ps jsonPaths) scan(doc []byte, vals []span) bool {
	clear(vals[:len(ps)])
	s := scanner{doc: doc, paths: ps, vals: vals}
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	end, ok := s.value(i, 0, uint64(1)<<len(ps)-1, 0)
	return ok && skipSpace(doc, end) == len(doc)
}

// scanner is one pass of scan. mask, in value, holds the paths whose first kd keys lead to the
// value being checked; a value outside every path is checked with mask 0.
type scanner struct {
	doc   []byte
	paths jsonPaths
	vals  []span
}

// value checks the value that starts at i and returns the index after it.
func (s *scanner) value(i, depth int, mask uint64, kd int) (int, bool) {
	doc := s.doc
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
			keyStart := i
			var ok bool
			if i, ok = validString(doc, i); !ok {
				return i, false
			}
			var leaf, deeper uint64
			if mask != 0 {
				leaf, deeper = s.match(mask, kd, doc[keyStart:i])
				// A repeated key replaces the object an earlier one held, and what was found in it.
				for m := deeper; m != 0; m &= m - 1 {
					s.vals[bits.TrailingZeros64(m)] = span{}
				}
			}
			i = skipSpace(doc, i)
			if i >= len(doc) || doc[i] != ':' {
				return i, false
			}
			start := skipSpace(doc, i+1)
			if i, ok = s.value(start, depth+1, deeper, kd+1); !ok {
				return i, false
			}
			for m := leaf; m != 0; m &= m - 1 {
				s.vals[bits.TrailingZeros64(m)] = span{start, i}
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
			if i, ok = s.value(i, depth+1, 0, 0); !ok { // paths go through objects only
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

// match splits the paths of mask whose key kd is the raw key token into those that end here
// (leaf) and those that go on into the member's value (deeper).
func (s *scanner) match(mask uint64, kd int, rawKey []byte) (leaf, deeper uint64) {
	for m := mask; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		if !keyEquals(rawKey, s.paths[p][kd]) {
			continue
		}
		if len(s.paths[p]) == kd+1 {
			leaf |= 1 << p
		} else {
			deeper |= 1 << p
		}
	}
	return leaf, deeper
}

// keyEquals compares a raw JSON string token with key, decoding only when it must (escapes,
// or invalid UTF-8, which encoding/json replaces with U+FFFD).
func keyEquals(raw []byte, key string) bool {
	inner := raw[1 : len(raw)-1]
	if string(inner) == key {
		return utf8.ValidString(key)
	}
	if plain(inner) {
		return false
	}
	// A copy, on this rare path: what json.Unmarshal reads escapes, and would take the document.
	var k string
	return json.Unmarshal(bytes.Clone(raw), &k) == nil && k == key
}

// plain reports whether a string token's contents decode to themselves: no escapes, valid UTF-8.
func plain(inner []byte) bool {
	return bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner)
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
		if c := doc[i]; !special[c] {
			continue
		}
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

// special marks the bytes validString must look at: one table load per byte is the cost.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

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

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// scalar returns the JSON string (decoded) or number (as written) v covers in doc; "" for
// anything else. text is doc as a string, or "": a value needing no decoding is then a
// substring of it rather than a copy.
func scalar(doc []byte, text string, v span) string {
	raw := v.in(doc)
	sub := func(start, end int) string {
		if text != "" {
			return text[start:end]
		}
		return string(doc[start:end])
	}
	switch {
	case len(raw) > 1 && raw[0] == '"':
		if plain(raw[1 : len(raw)-1]) {
			return sub(v.start+1, v.end-1)
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return ""
		}
		return s
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		return sub(v.start, v.end)
	}
	return ""
}
