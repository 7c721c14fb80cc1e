// Package emf writes CloudWatch Embedded Metric Format documents: one JSON log line that
// CloudWatch Logs turns into metrics, with no API call on the request path. A Lambda function
// writes them to stdout.
//
// A Document holds dimension values and metrics; each metric names the dimension sets it is
// reported under (CloudWatch emits one metric per set), and metrics with the same sets share
// one directive:
//
//	bySource, byType := []string{"source"}, []string{"source", "event_type"}
//	d := emf.New("oncehook", time.Now())
//	d.Set("source", "stripe")
//	d.Set("event_type", "invoice.paid")
//	d.Count("Received", bySource)
//	d.Count("Duplicate", bySource, byType)
//	d.WriteTo(os.Stdout)
//
// The format is https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
package emf

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// DefaultNamespace is the functions' CloudWatch namespace when their deployment names none
// (METRICS_NAMESPACE). The construct names one for each of its instances: oncehook/<its path>.
const DefaultNamespace = "oncehook"

// Unit is a CloudWatch metric unit.
type Unit string

// The units this project reports.
const (
	Count        Unit = "Count"
	Milliseconds Unit = "Milliseconds"
)

// Metric names one metric a program emits under one of its dimension sets: what a dashboard
// or an alarm must name to find it.
type Metric struct {
	Name       string
	Dimensions []string // in order; nil for none
}

// Document is one EMF log line under construction. It is not safe for concurrent use. It keeps
// its parts in arrays of its own, so that one of ordinary size costs two allocations: one is
// written for every delivery.
type Document struct {
	namespace  string
	ts         time.Time
	props      []prop // sorted by key
	directives []directive
	metrics    []metric

	propBuf [4]prop
	dirBuf  [4]directive
	metBuf  [6]metric
}

type prop struct{ key, value string }

type directive struct {
	dimSets [][]string
}

type metric struct {
	dir   int // index in directives
	name  string
	unit  Unit
	value float64
}

// New starts a document in namespace at ts.
func New(namespace string, ts time.Time) *Document {
	d := &Document{}
	d.Reset(namespace, ts)
	return d
}

// Reset empties the document and starts it again in namespace at ts, keeping its storage (for
// a sync.Pool).
func (d *Document) Reset(namespace string, ts time.Time) {
	d.namespace, d.ts = namespace, ts
	clear(d.propBuf[:]) // drop the last request's values and dimension sets
	clear(d.dirBuf[:])
	d.props, d.directives, d.metrics = d.propBuf[:0], d.dirBuf[:0], d.metBuf[:0]
}

// Set sets a dimension (or plain property) value. Values are trimmed to CloudWatch's
// 1024-character dimension value limit.
func (d *Document) Set(key, value string) {
	if len(value) > 1024 {
		value = value[:1024]
		for !utf8.ValidString(value) { // do not cut a character in half
			value = value[:len(value)-1]
		}
	}
	i, found := slices.BinarySearchFunc(d.props, key, func(p prop, k string) int { return strings.Compare(p.key, k) })
	if found {
		d.props[i].value = value
		return
	}
	d.props = slices.Insert(d.props, i, prop{key, value})
}

// Count adds 1 to the count metric name, reported under each of dimSets.
func (d *Document) Count(name string, dimSets ...[]string) { d.Add(name, 1, Count, dimSets...) }

// Add records value (in unit) for metric name, reported under each of dimSets (none: without
// dimensions). Recording a metric again adds the values; a name keeps one list of dimension
// sets within a document.
func (d *Document) Add(name string, value float64, unit Unit, dimSets ...[]string) {
	dir := slices.IndexFunc(d.directives, func(dir directive) bool { return slices.EqualFunc(dir.dimSets, dimSets, slices.Equal) })
	if dir < 0 {
		dir = len(d.directives)
		d.directives = append(d.directives, directive{dimSets: dimSets})
	}
	for i := range d.metrics {
		if m := &d.metrics[i]; m.dir == dir && m.name == name {
			m.value += value
			return
		}
	}
	d.metrics = append(d.metrics, metric{dir, name, unit, value})
}

// Empty reports whether no metric was recorded.
func (d *Document) Empty() bool { return len(d.directives) == 0 }

// MarshalJSON renders the document.
func (d *Document) MarshalJSON() ([]byte, error) {
	return d.appendJSON(make([]byte, 0, 1024)), nil
}

// appendJSON writes the JSON directly, without maps and reflection: it is on the hot path.
func (d *Document) appendJSON(b []byte) []byte {
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, d.ts.UnixMilli(), 10)
	b = append(b, `,"CloudWatchMetrics":[`...)
	for i, dir := range d.directives {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Namespace":`...)
		b = appendString(b, d.namespace)
		b = append(b, `,"Dimensions":[`...)
		sets := dir.dimSets
		if len(sets) == 0 {
			sets = [][]string{{}}
		}
		for j, set := range sets {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendList(b, set)
		}
		b = append(b, `],"Metrics":[`...)
		first := true
		for _, m := range d.metrics {
			if m.dir != i {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"Name":`...)
			b = appendString(b, m.name)
			b = append(b, `,"Unit":`...)
			b = appendString(b, string(m.unit))
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	b = append(b, "]}"...)
	for _, p := range d.props {
		b = append(b, ',')
		b = appendString(b, p.key)
		b = append(b, ':')
		b = appendString(b, p.value)
	}
	for _, m := range d.metrics {
		b = append(b, ',')
		b = appendString(b, m.name)
		b = append(b, ':')
		b = strconv.AppendFloat(b, m.value, 'f', -1, 64)
	}
	return append(b, '}')
}

// appendList appends ss as a JSON array of strings.
func appendList(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString appends s as a JSON string: quotes, backslashes and control characters
// escaped, invalid UTF-8 replaced, as encoding/json does (jsontext says so with an error).
func appendString(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s)
	return b
}

// WriteTo writes the document as one line. Nothing is written for an empty document.
func (d *Document) WriteTo(w io.Writer) (int64, error) {
	if d.Empty() {
		return 0, nil
	}
	buf := buffers.Get().(*[]byte)
	b := append(d.appendJSON((*buf)[:0]), '\n')
	n, err := w.Write(b)
	if cap(b) <= 64<<10 { // a writer must not keep b (io.Writer's contract); huge ones go
		*buf = b
		buffers.Put(buf)
	}
	return int64(n), err
}

// buffers holds rendering buffers for WriteTo, one document written per delivery.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
