package receiver

import (
	"bytes"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/oncehook/oncehook/sources"
)

// The receiver reads a few values from bodies that can be large, and must refuse bodies that
// are not JSON. encoding/json's check followed by a walk per value cost most of the hot path,
// so one pass of jsontext's decoder both validates and picks up the values at paths compiled
// in advance: it descends by tokens only into the objects a path goes through, and reads every
// other value whole. FuzzValidJSON and FuzzLookupJSON hold its verdicts to encoding/json's.
// (encoding/json's own Decoder.Token was passed over: it allocates for every token.)

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
		if err := sources.CheckJSONPath(p); err != nil {
			return nil, fmt.Errorf("receiver: JSON path %w", err)
		}
		ps[i] = strings.Split(p, ".")
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

// v1Syntax is what encoding/json (v1) accepts and jsontext refuses by default: repeated
// names (the last wins) and invalid UTF-8 in strings (read as U+FFFD).
var v1Syntax = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// decoder is a jsontext.Decoder with the reader it reads doc through: a bytes.Buffer, which
// it reads in place rather than copying. Pooled: the pair is 352 bytes, and Reset keeps the
// decoder's stack of open objects and arrays.
type decoder struct {
	src bytes.Buffer
	dec jsontext.Decoder
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

// scan reports whether doc is exactly one valid JSON object (encoding/json's verdict) and sets
// vals[p] to where the value at path p lies, or nowhere. A repeated key's last value wins.
func (ps jsonPaths) scan(doc []byte, vals []span) bool {
	clear(vals[:len(ps)])
	d := decoders.Get().(*decoder)
	d.src = *bytes.NewBuffer(doc)
	d.dec.Reset(&d.src, v1Syntax...)
	s := scanner{paths: ps, vals: vals}
	ok := d.dec.PeekKind() == '{'
	if ok {
		_, err := s.deeper(&d.dec, uint64(1)<<len(ps)-1, 0)
		ok = err == nil
	}
	if ok {
		_, err := d.dec.ReadToken()
		ok = err == io.EOF // nothing but space after the object
	}
	// The pooled decoder must not keep the document.
	d.src = bytes.Buffer{}
	d.dec.Reset(&d.src)
	decoders.Put(d)
	return ok
}

// scanner is one pass of scan. mask, in deeper and member, holds the paths whose first kd keys
// lead to the value being read. The decoder is passed beside it, not held: escape analysis
// would have what the decoder's methods leak take vals (often the caller's array) with it.
type scanner struct {
	paths jsonPaths
	vals  []span
}

// deeper reads the value the decoder is at, for the paths of mask that go on into it: an
// object is read member by member, anything else (where they find nothing) whole. It returns
// where the value lies.
func (s *scanner) deeper(dec *jsontext.Decoder, mask uint64, kd int) (span, error) {
	if mask == 0 || dec.PeekKind() != '{' {
		return whole(dec)
	}
	if _, err := dec.ReadToken(); err != nil {
		return span{}, err
	}
	start := int(dec.InputOffset()) - 1
	for dec.PeekKind() != '}' {
		if err := s.member(dec, mask, kd); err != nil {
			return span{}, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return span{}, err
	}
	return span{start, int(dec.InputOffset())}, nil
}

// member reads one object member, its name at key kd of the paths of mask.
func (s *scanner) member(dec *jsontext.Decoder, mask uint64, kd int) error {
	name, err := dec.ReadValue() // the raw name: compared without a copy
	if err != nil {
		return err
	}
	leaf, deeper := s.match(mask, kd, name)
	// A repeated name replaces the object an earlier one held, and what was found in it.
	for m := deeper; m != 0; m &= m - 1 {
		s.vals[bits.TrailingZeros64(m)] = span{}
	}
	v, err := s.deeper(dec, deeper, kd+1)
	if err != nil {
		return err
	}
	for m := leaf; m != 0; m &= m - 1 {
		s.vals[bits.TrailingZeros64(m)] = v
	}
	return nil
}

// whole reads the next value in one piece and returns where it lies.
func whole(dec *jsontext.Decoder) (span, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return span{}, err
	}
	end := int(dec.InputOffset())
	return span{end - len(v), end}, nil
}

// match splits the paths of mask whose key kd is the raw name into those that end here
// (leaf) and those that go on into the member's value (deeper).
func (s *scanner) match(mask uint64, kd int, rawName []byte) (leaf, deeper uint64) {
	for m := mask; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		if !keyEquals(rawName, s.paths[p][kd]) {
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
// or invalid UTF-8, which encoding/json replaces with U+FFFD, as AppendUnquote does).
func keyEquals(raw []byte, key string) bool {
	inner := raw[1 : len(raw)-1]
	if string(inner) == key {
		return utf8.ValidString(key)
	}
	if plain(inner) {
		return false
	}
	k, _ := jsontext.AppendUnquote(nil, raw) // its error only reports the invalid UTF-8 it replaced
	return string(k) == key
}

// plain reports whether a string token's contents decode to themselves: no escapes, valid UTF-8.
func plain(inner []byte) bool {
	return bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner)
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
		s, _ := jsontext.AppendUnquote(nil, raw) // its error only reports invalid UTF-8, replaced as encoding/json does
		return string(s)
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		return sub(v.start, v.end)
	}
	return ""
}
