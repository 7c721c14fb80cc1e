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
	"encoding/json"
	"io"
	"strings"
	"time"
)

// Unit is a CloudWatch metric unit.
type Unit string

// The units this project reports.
const (
	Count        Unit = "Count"
	Milliseconds Unit = "Milliseconds"
	Bytes        Unit = "Bytes"
)

// Document is one EMF log line under construction. It is not safe for concurrent use.
type Document struct {
	namespace  string
	ts         time.Time
	props      map[string]string
	directives []directive
}

type directive struct {
	key     string
	dimSets [][]string
	metrics []metric
}

type metric struct {
	name  string
	unit  Unit
	value float64
}

// New starts a document in namespace at ts.
func New(namespace string, ts time.Time) *Document {
	return &Document{namespace: namespace, ts: ts, props: map[string]string{}}
}

// Set sets a dimension (or plain property) value. Values are trimmed to CloudWatch's
// 1024-character dimension value limit.
func (d *Document) Set(key, value string) {
	if len(value) > 1024 {
		value = value[:1024]
	}
	d.props[key] = value
}

// Count adds 1 to the count metric name, reported under each of dimSets.
func (d *Document) Count(name string, dimSets ...[]string) { d.Add(name, 1, Count, dimSets...) }

// Add records value (in unit) for metric name, reported under each of dimSets (none: the
// metric without dimensions). Recording a metric again adds the values; a metric name must
// keep one list of dimension sets within a document, since the document holds one value per
// name.
func (d *Document) Add(name string, value float64, unit Unit, dimSets ...[]string) {
	parts := make([]string, len(dimSets))
	for i, set := range dimSets {
		parts[i] = strings.Join(set, "\x00")
	}
	key := strings.Join(parts, "\x01")
	for i := range d.directives {
		dir := &d.directives[i]
		if dir.key != key {
			continue
		}
		for j := range dir.metrics {
			if dir.metrics[j].name == name {
				dir.metrics[j].value += value
				return
			}
		}
		dir.metrics = append(dir.metrics, metric{name, unit, value})
		return
	}
	d.directives = append(d.directives, directive{key: key, dimSets: dimSets, metrics: []metric{{name, unit, value}}})
}

// Empty reports whether no metric was recorded.
func (d *Document) Empty() bool { return len(d.directives) == 0 }

// MarshalJSON renders the document.
func (d *Document) MarshalJSON() ([]byte, error) {
	type metricDef struct {
		Name string `json:"Name"`
		Unit Unit   `json:"Unit"`
	}
	type dirJSON struct {
		Namespace  string      `json:"Namespace"`
		Dimensions [][]string  `json:"Dimensions"`
		Metrics    []metricDef `json:"Metrics"`
	}
	root := make(map[string]any, len(d.props)+8)
	for k, v := range d.props {
		root[k] = v
	}
	dirs := make([]dirJSON, 0, len(d.directives))
	for _, dir := range d.directives {
		defs := make([]metricDef, 0, len(dir.metrics))
		for _, m := range dir.metrics {
			defs = append(defs, metricDef{m.name, m.unit})
			root[m.name] = m.value
		}
		sets := dir.dimSets
		if len(sets) == 0 {
			sets = [][]string{{}}
		}
		dirs = append(dirs, dirJSON{Namespace: d.namespace, Dimensions: sets, Metrics: defs})
	}
	root["_aws"] = map[string]any{
		"Timestamp":         d.ts.UnixMilli(),
		"CloudWatchMetrics": dirs,
	}
	return json.Marshal(root)
}

// WriteTo writes the document as one line. Nothing is written for an empty document.
func (d *Document) WriteTo(w io.Writer) (int64, error) {
	if d.Empty() {
		return 0, nil
	}
	b, err := d.MarshalJSON()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(append(b, '\n'))
	return int64(n), err
}
