package emf

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"
)

func TestDocumentFollowsTheEmbeddedMetricFormat(t *testing.T) {
	t.Parallel()
	bySource, byType := []string{"source"}, []string{"source", "event_type"}
	d := New("oncehook", time.UnixMilli(1_796_000_000_123))
	d.Set("source", "stripe")
	d.Set("event_type", "invoice.paid")
	d.Count("Received", bySource)
	d.Count("Duplicate", bySource, byType)
	d.Add("CommitLatency", 12.5, Milliseconds, bySource)
	d.Count("Received", bySource) // adds up

	var buf bytes.Buffer
	if _, err := d.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if b := buf.Bytes(); b[len(b)-1] != '\n' || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("want exactly one line, got %q", b)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"source": "stripe", "event_type": "invoice.paid",
		"Received": 2.0, "Duplicate": 1.0, "CommitLatency": 12.5,
		"_aws": map[string]any{
			"Timestamp": 1_796_000_000_123.0,
			"CloudWatchMetrics": []any{
				map[string]any{"Namespace": "oncehook", "Dimensions": []any{[]any{"source"}},
					"Metrics": []any{map[string]any{"Name": "Received", "Unit": "Count"}, map[string]any{"Name": "CommitLatency", "Unit": "Milliseconds"}}},
				map[string]any{"Namespace": "oncehook", "Dimensions": []any{[]any{"source"}, []any{"source", "event_type"}},
					"Metrics": []any{map[string]any{"Name": "Duplicate", "Unit": "Count"}}},
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("document:\n got %v\nwant %v", got, want)
	}
}

func TestAnEmptyDocumentWritesNothing(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if n, err := New("ns", time.Now()).WriteTo(&buf); n != 0 || err != nil || buf.Len() != 0 {
		t.Fatalf("wrote %d bytes (%v)", n, err)
	}
}

func TestDimensionValuesAreCappedAtCloudWatchsLimit(t *testing.T) {
	t.Parallel()
	d := New("ns", time.Now())
	d.Set("event_type", string(bytes.Repeat([]byte("x"), 5000)))
	d.Count("Received", []string{"event_type"})
	b, _ := d.MarshalJSON()
	var got map[string]any
	_ = json.Unmarshal(b, &got)
	if n := len(got["event_type"].(string)); n != 1024 {
		t.Fatalf("dimension value of %d characters, want 1024", n)
	}
}

func FuzzAppendStringMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "order.paid", "a\"b\\c", "\x00\x1f\n\t\r", "é日本", "\xff\xfe", "<&>", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var back string
		if err := json.Unmarshal(appendString(nil, s), &back); err != nil {
			t.Fatalf("appendString(%q) is not a JSON string: %v", s, err)
		}
		var want string
		b, _ := json.Marshal(s)
		_ = json.Unmarshal(b, &want)
		if back != want {
			t.Fatalf("appendString(%q) reads back as %q; encoding/json round-trips to %q", s, back, want)
		}
	})
}

func TestAResetDocumentIsANewOne(t *testing.T) {
	t.Parallel()
	ts := time.UnixMilli(1756113243000)
	d := New("ns", ts)
	for i := range 6 { // past the document's own storage for properties
		d.Set("k"+strconv.Itoa(i), "v")
	}
	d.Count("A", []string{"k0"})
	d.Reset("other", ts)
	d.Set("source", "shop")
	d.Count("B", []string{"source"})
	fresh := New("other", ts)
	fresh.Set("source", "shop")
	fresh.Count("B", []string{"source"})
	got, _ := d.MarshalJSON()
	want, _ := fresh.MarshalJSON()
	if string(got) != string(want) {
		t.Fatalf("reset document renders\n%s\na new one\n%s", got, want)
	}
}
