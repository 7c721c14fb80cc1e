package receiver

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/sources"
)

// lookupStdlib is the reference: encoding/json, one level at a time.
func lookupStdlib(doc []byte, path string) ([]byte, bool) {
	for {
		var m map[string]json.RawMessage
		if json.Unmarshal(doc, &m) != nil || m == nil {
			return nil, false
		}
		key, rest, more := strings.Cut(path, ".")
		v, ok := m[key]
		if !ok {
			return nil, false
		}
		if !more {
			return v, true
		}
		doc, path = v, rest
	}
}

func TestScanJSON(t *testing.T) {
	t.Parallel()
	doc := []byte(` { "id" : "evt_1", "n": -12.5e3, "skip": {"id": "inner", "arr": [1, {"x": "}"}, "\"]"]},
		"data": {"object": {"id": "cs_1", "ok": true}}, "esc\u0061ped": "yes", "dup": 1, "dup": 2, "nil": null,
		"re": {"a": 1, "b": 2}, "re": {"b": 3} }`)
	cases := []struct{ path, want string }{
		{"id", `"evt_1"`},
		{"n", `-12.5e3`},
		{"data.object.id", `"cs_1"`},
		{"data.object.ok", `true`},
		{"data.object", `{"id": "cs_1", "ok": true}`},
		{"escaped", `"yes"`},
		{"dup", `2`},
		{"nil", `null`},
		{"skip.arr", `[1, {"x": "}"}, "\"]"]`},
		{"re.a", ``}, // the repeated "re" replaces the first one whole
		{"re.b", `3`},
		{"missing", ``},
		{"id.deeper", ``},
		{"data.missing", ``},
		{"skip.arr.x", ``}, // paths go through objects only
	}
	paths := make([]string, len(cases))
	for i, c := range cases {
		paths[i] = c.path
	}
	ps, err := compilePaths(paths...)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]span, len(ps))
	if !ps.scan(doc, vals) {
		t.Fatal("the document is valid")
	}
	for i, c := range cases {
		if got := vals[i].in(doc); string(got) != c.want {
			t.Errorf("scan: %q = %q; want %q", c.path, got, c.want)
		}
	}
	for _, bad := range []string{``, `[]`, `"s"`, `{"a":}`, `{"a":1`, `{"a":1}{`, `nul`, `{"id":"x",}`} {
		if ps.scan([]byte(bad), vals) {
			t.Errorf("scan(%q) = true", bad)
		}
	}
	for _, bad := range [][]string{{"a..b"}, {""}, {".a"}, make([]string, maxPaths+1)} {
		if _, err := compilePaths(bad...); err == nil {
			t.Errorf("compilePaths(%q) = nil error", bad)
		}
	}
}

// A JSON path is one rule: the receiver compiles exactly the paths a sources file takes as an
// event locator.
func TestTheReceiverCompilesTheJSONPathsASourcesFileTakes(t *testing.T) {
	for _, p := range []string{"id", "data.object.id", "a b.c", "é.ü", "0.1", "-", "", ".", "a.", ".a", "a..b", "..", "a.b."} {
		_, compileErr := compilePaths(p)
		_, loadErr := sources.Parse([]byte(`{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","event_type":{"json":` + strconv.Quote(p) + `}}}}`))
		if (compileErr == nil) != (loadErr == nil) {
			t.Errorf("%q: compiled %v, loaded %v", p, compileErr, loadErr)
		}
	}
}

func TestFields(t *testing.T) {
	t.Parallel()
	f := NewFields("data.order_id", "data.amount", "data.obj", "type", "data.esc")
	got := f.Read([]byte(`{"type":"order.paid","data":{"order_id":"ord_1","amount":1250,"obj":{"x":1},"esc":"caf\u00e9"}}`))
	want := []string{"ord_1", "1250", "", "order.paid", "café"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Read = %q; want %q", got, want)
	}
	if got := f.Read([]byte(`{"type":`)); got != nil {
		t.Errorf("Read of a broken body = %q; want nil", got)
	}
	if v, ok := JSONField([]byte(`{"a":{"b":""}}`), "a.b"); ok || v != "" {
		t.Errorf(`JSONField of an empty string = %q, %v; want "", false`, v, ok)
	}
}

// FuzzLookupJSON checks the values scan finds against encoding/json, for the fuzzed path read
// alone and together with paths that share its first key.
func FuzzLookupJSON(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","type":"order.paid","data":{"order_id":"o"}}`), "data.order_id")
	f.Add([]byte(`{"a":{"b":{"c":[1,2,{"d":"\"}"}]}},"a":{"b":{"c":3}}}`), "a.b.c")
	f.Add([]byte(`{"\u0069d":"x","id ":"y"}`), "id")
	f.Add([]byte(` {"type" : "t" , "id":12345678901234567890}`), "id")
	f.Add([]byte(`{"a":{"b":1},"a":2,"a":{"c":3}}`), "a.c")
	f.Fuzz(func(t *testing.T, doc []byte, path string) {
		first, _, _ := strings.Cut(path, ".")
		ps, err := compilePaths(path, first, first+".id", "id")
		if err != nil {
			return
		}
		vals := make([]span, len(ps))
		if !ps.scan(doc, vals) {
			return
		}
		for i, p := range []string{path, first, first + ".id", "id"} {
			want, _ := lookupStdlib(doc, p)
			if got := vals[i].in(doc); !bytes.Equal(got, bytes.TrimSpace(want)) {
				t.Fatalf("scan(%q) finds %q at %q; encoding/json finds %q", doc, got, p, want)
			}
			// The value as a substring of the body's text and as a copy of its bytes agree.
			if s, c := scalar(doc, string(doc), vals[i]), scalar(doc, "", vals[i]); s != c {
				t.Fatalf("scalar at %q: %q from the text, %q from the bytes", p, s, c)
			}
		}
	})
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a":[1,-0.5e+3,true,false,null,"\u00e9\n"]} `, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`,
		`{"a":"` + "\x01" + `"}`, `{"a":[}`, `{"a" 1}`, `{"a":1,}`, `[1]`, `{"\xff":"\xfe"}`, `{"a":{"b":{"c":[[[]]]}}}`, `{"a":-}`, `{"a":1e}`,
		`{"a":"\ud800"}`, `{"\udc00\u0041":1}`, "\ufeff{}", `{} {}`, "{}\x00"} {
		f.Add([]byte(s))
	}
	ps, _ := compilePaths("a", "a.b")
	f.Fuzz(func(t *testing.T, doc []byte) {
		d := bytes.TrimLeft(doc, " \t\r\n")
		want := json.Valid(doc) && len(d) > 0 && d[0] == '{'
		var vals [2]span
		if got := ps.scan(doc, vals[:]); got != want {
			t.Fatalf("scan(%q) = %v; encoding/json says %v", doc, got, want)
		}
	})
}

// TestScanNestsAsDeepAsEncodingJSON holds the nesting limit, the decoder's, to encoding/json's.
func TestScanNestsAsDeepAsEncodingJSON(t *testing.T) {
	t.Parallel()
	ps, _ := compilePaths("a")
	for _, depth := range []int{9999, 10000, 10001} { // encoding/json's limit is 10000
		for _, open := range []string{"[", `{"a":`} {
			closing := map[string]string{"[": "]", `{"a":`: "}"}[open]
			doc := []byte(`{"a":` + strings.Repeat(open, depth-1) + "1" + strings.Repeat(closing, depth-1) + "}")
			var vals [1]span
			if got, want := ps.scan(doc, vals[:]), json.Valid(doc); got != want || want != (depth <= 10000) {
				t.Errorf("scan at depth %d through %s = %v; encoding/json says %v", depth, open, got, want)
			}
		}
	}
}

// TestScanAllocatesNothing: the pass reads the body in place, and the caller's array of spans
// stays on its stack.
func TestScanAllocatesNothing(t *testing.T) {
	ps, _ := compilePaths("type", "data.id", "data.name")
	doc := []byte(`{"type":"t","data":{"id":"x","name":"caf\u00e9","list":[1,2,{"id":3}]}}`)
	if n := testing.AllocsPerRun(100, func() {
		var at [maxPaths]span
		if !ps.scan(doc, at[:]) {
			t.Fatal("the document is valid")
		}
	}); n != 0 {
		t.Errorf("scan allocates %v times", n)
	}
}

// BenchmarkScanJSON is the one pass over a 2 KB order body that checks it and reads the
// receiver's and the order planner's four paths.
func BenchmarkScanJSON(b *testing.B) {
	body := []byte(`{"type":"order.paid","timestamp":"2026-08-25T09:14:03Z","data":{"order_id":"ord_4211","customer_email":"ada@example.com","lines":[` +
		strings.Repeat(`{"sku":"sku_123456","qty":1,"price":1000},`, 42) + `{"sku":"sku_last","qty":1,"price":200}]}}`)
	ps, err := compilePaths("type", "timestamp", "data.order_id", "data.customer_email")
	if err != nil {
		b.Fatal(err)
	}
	var at [maxPaths]span
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if !ps.scan(body, at[:]) {
			b.Fatal("the body is valid")
		}
	}
}
