package receiver

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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

func TestLookupJSON(t *testing.T) {
	t.Parallel()
	doc := []byte(` { "id" : "evt_1", "n": -12.5e3, "skip": {"id": "inner", "arr": [1, {"x": "}"}, "\"]"]},
		"data": {"object": {"id": "cs_1", "ok": true}}, "esc\u0061ped": "yes", "dup": 1, "dup": 2, "nil": null }`)
	cases := []struct{ path, want string }{
		{"id", `"evt_1"`},
		{"n", `-12.5e3`},
		{"data.object.id", `"cs_1"`},
		{"data.object.ok", `true`},
		{"escaped", `"yes"`},
		{"dup", `2`},
		{"nil", `null`},
		{"skip.arr", `[1, {"x": "}"}, "\"]"]`},
		{"missing", ``},
		{"id.deeper", ``},
		{"data.missing", ``},
	}
	if !isObject(doc) {
		t.Fatal("the document is valid")
	}
	for _, c := range cases {
		got, ok := lookupJSON(doc, c.path)
		if string(got) != c.want || ok != (c.want != "") {
			t.Errorf("lookupJSON(%q) = %q, %v; want %q", c.path, got, ok, c.want)
		}
	}
	for _, bad := range []string{``, `[]`, `"s"`, `{"a":}`, `{"a":1`, `{"a":1}{`, `nul`} {
		if isObject([]byte(bad)) {
			t.Errorf("isObject(%q) = true", bad)
		}
	}
}

func FuzzLookupJSON(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","type":"order.paid","data":{"order_id":"o"}}`), "data.order_id")
	f.Add([]byte(`{"a":{"b":{"c":[1,2,{"d":"\"}"}]}},"a":{"b":{"c":3}}}`), "a.b.c")
	f.Add([]byte(`{"\u0069d":"x","id ":"y"}`), "id")
	f.Add([]byte(` {"type" : "t" , "id":12345678901234567890}`), "id")
	f.Fuzz(func(t *testing.T, doc []byte, path string) {
		if !isObject(doc) {
			return
		}
		got, ok := lookupJSON(doc, path)
		want, wantOK := lookupStdlib(doc, path)
		if ok != wantOK || !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
			t.Fatalf("lookupJSON(%q, %q) = %q, %v; encoding/json finds %q, %v", doc, path, got, ok, want, wantOK)
		}
	})
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a":[1,-0.5e+3,true,false,null,"\u00e9\n"]} `, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`,
		`{"a":"` + "\x01" + `"}`, `{"a":[}`, `{"a" 1}`, `{"a":1,}`, `[1]`, `{"\xff":"\xfe"}`, `{"a":{"b":{"c":[[[]]]}}}`, `{"a":-}`, `{"a":1e}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		d := bytes.TrimLeft(doc, " \t\r\n")
		want := json.Valid(doc) && len(d) > 0 && d[0] == '{'
		if got := isObject(doc); got != want {
			t.Fatalf("isObject(%q) = %v; encoding/json says %v", doc, got, want)
		}
	})
}
