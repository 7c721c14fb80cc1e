package launch

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oncehook/oncehook/internal/otelenv"
	"github.com/oncehook/oncehook/internal/tracecontext"
)

// otlpExporter sends spans as OTLP over HTTP, protobuf-encoded (the protocol's default, which
// every collector and X-Ray's OTLP endpoint take), to one URL.
//
// Why not OpenTelemetry's own otlptracehttp: it links gRPC, its gateway and protobuf's
// reflection (its generated messages carry the gRPC service), 12 MB of each function's 13 MB
// more; this writes the same bytes from the SDK's spans with protobuf's wire encoding alone
// (TestTheExporterWritesWhatOpenTelemetrysWrites holds it to otlptracehttp's output).
type otlpExporter struct {
	url     string
	shown   string // url without its userinfo, for logs and errors
	headers map[string]string
	gzip    bool
	client  *http.Client
}

// newOTLPExporter is the exporter the settings ask for; its error (a TLS file the settings
// name that cannot be read) names the variable.
func newOTLPExporter(s otelenv.Settings) (*otlpExporter, error) {
	client := &http.Client{Timeout: s.Timeout, CheckRedirect: sameOrigin}
	tlsConfig, err := s.TLSConfig()
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = tlsConfig
		client.Transport = t
	}
	return &otlpExporter{url: s.URL, shown: s.Shown, headers: s.Headers, gzip: s.Gzip, client: client}, nil
}

// sameOrigin follows a redirect within the endpoint's origin (a moved path) and no other:
// net/http forwards every header but Authorization and Cookie across origins, and the
// export's headers hold a vendor's key.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return &originError{req.URL.Scheme + "://" + req.URL.Hostname()}
	}
	return nil
}

// originError is a redirect to another origin, refused.
type originError struct{ origin string }

func (e *originError) Error() string {
	return "redirected to another origin (" + e.origin + "), not followed: set the endpoint to where the collector is"
}

// ExportSpans sends one request with every span of the batch.
func (x *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body := encodeSpans(spans)
	if x.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
	}
	for attempt := 1; ; attempt++ {
		wait, err := x.send(ctx, body)
		if wait < 0 || attempt == maxExportAttempts {
			return err
		}
		if wait == 0 {
			wait = exportBackoff << (attempt - 1)
		}
		// Waited only while the export's context allows: the flush at the end of an
		// invocation has 500 ms, and a wait past it would only be cut short.
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// The retries of an export the collector asks to be retried (429, 502, 503, 504): as many as
// the export's context allows, at most maxExportAttempts in all, after the collector's
// Retry-After or else a doubling wait from exportBackoff.
const (
	maxExportAttempts = 5
	exportBackoff     = 25 * time.Millisecond
)

// send posts one export. wait is -1 when it is done (sent, or failed for good), else how long
// the collector asked to wait before it is sent again (0: not said).
func (x *otlpExporter) send(ctx context.Context, body []byte) (wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.url, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	for k, v := range x.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if x.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := x.client.Do(req)
	if err != nil {
		// net/http's error names the URL whole (its password stripped, its path and query
		// not): described by x.shown instead, since the error handler logs it on every export.
		return -1, fmt.Errorf("OTLP export to %s: %w", x.shown, exportFailure(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	// The collector's own words (its reason phrase, its body, a partial success's message) are
	// never quoted: a server may echo the request's path or query, where an intake's key can
	// be, and the error is logged on every failed export.
	switch code := resp.StatusCode; {
	case code/100 == 2:
		// A partial success is reported, not retried (OTLP/HTTP): the spans it names are lost.
		if rejected, msg := partialSuccess(answer); rejected > 0 || msg != "" {
			return -1, fmt.Errorf("OTLP export to %s: the collector rejected %d spans (a partial success; its message is not shown)", x.shown, rejected)
		}
		return -1, nil
	case code == http.StatusTooManyRequests, code == http.StatusBadGateway, code == http.StatusServiceUnavailable, code == http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After")), fmt.Errorf("OTLP export to %s: %d %s", x.shown, code, http.StatusText(code))
	default:
		return -1, fmt.Errorf("OTLP export to %s: %d %s", x.shown, code, http.StatusText(code))
	}
}

// exportFailure is a request that got no answer it could read, as an export error says it:
// never net/http's quote of a malformed answer (tracecontext.Unanswered).
func exportFailure(err error) error {
	var redirect *originError
	if errors.As(err, &redirect) {
		return redirect
	}
	desc, shown := tracecontext.Unanswered(err)
	if shown {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // its URL is the endpoint's whole
		}
		return err
	}
	return errors.New(desc)
}

// retryAfter is a Retry-After header's wait (seconds, or an HTTP date), 0 when it says none.
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(h); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// partialSuccess reads an ExportTraceServiceResponse's partial_success (field 1): its
// rejected_spans (1) and error_message (2). An answer that is not one reads as none.
func partialSuccess(answer []byte) (rejected int64, msg string) {
	for len(answer) > 0 {
		num, typ, n := protowire.ConsumeTag(answer)
		if n < 0 {
			return 0, ""
		}
		answer = answer[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, answer); n < 0 {
				return 0, ""
			}
			answer = answer[n:]
			continue
		}
		ps, n := protowire.ConsumeBytes(answer)
		if n < 0 {
			return 0, ""
		}
		answer = answer[n:]
		for len(ps) > 0 {
			num, typ, n := protowire.ConsumeTag(ps)
			if n < 0 {
				return 0, ""
			}
			ps = ps[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				v, n := protowire.ConsumeVarint(ps)
				if n < 0 {
					return 0, ""
				}
				rejected, ps = int64(v), ps[n:]
			case num == 2 && typ == protowire.BytesType:
				v, n := protowire.ConsumeBytes(ps)
				if n < 0 {
					return 0, ""
				}
				msg, ps = string(v), ps[n:]
			default:
				if n = protowire.ConsumeFieldValue(num, typ, ps); n < 0 {
					return 0, ""
				}
				ps = ps[n:]
			}
		}
	}
	return rejected, msg
}

// Shutdown has nothing to release: each export is one request.
func (x *otlpExporter) Shutdown(context.Context) error { return nil }

// encodeSpans is an ExportTraceServiceRequest holding spans, grouped by resource and then by
// instrumentation scope in the order they come, as otlptracehttp groups them.
func encodeSpans(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeSpans struct {
		scope instrumentation.Scope
		spans []byte
	}
	type resourceSpans struct {
		res    *resource.Resource
		scopes []*scopeSpans
	}
	var order []*resourceSpans
	byRes := map[attribute.Distinct]*resourceSpans{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		rs := byRes[s.Resource().Equivalent()]
		if rs == nil {
			rs = &resourceSpans{res: s.Resource()}
			byRes[s.Resource().Equivalent()] = rs
			order = append(order, rs)
		}
		var ss *scopeSpans
		for _, c := range rs.scopes {
			if c.scope == s.InstrumentationScope() {
				ss = c
			}
		}
		if ss == nil {
			ss = &scopeSpans{scope: s.InstrumentationScope()}
			rs.scopes = append(rs.scopes, ss)
		}
		ss.spans = appendMessage(ss.spans, 2, encodeSpan(s)) // ScopeSpans.spans
	}
	var req []byte
	for _, rs := range order {
		var b []byte
		var res []byte // Resource
		iter := rs.res.Iter()
		for iter.Next() {
			res = appendMessage(res, 1, encodeKeyValue(iter.Attribute()))
		}
		b = appendMessage(b, 1, res) // ResourceSpans.resource
		for _, ss := range rs.scopes {
			var sb []byte
			if ss.scope != (instrumentation.Scope{}) {
				var sc []byte
				sc = appendString(sc, 1, ss.scope.Name)
				sc = appendString(sc, 2, ss.scope.Version)
				attrs := ss.scope.Attributes.Iter()
				for attrs.Next() {
					sc = appendMessage(sc, 3, encodeKeyValue(attrs.Attribute()))
				}
				sb = appendMessage(sb, 1, sc) // ScopeSpans.scope
			}
			sb = append(sb, ss.spans...)
			sb = appendString(sb, 3, ss.scope.SchemaURL)
			b = appendMessage(b, 2, sb) // ResourceSpans.scope_spans
		}
		b = appendString(b, 3, rs.res.SchemaURL())
		req = appendMessage(req, 1, b) // ExportTraceServiceRequest.resource_spans
	}
	return req
}

// encodeSpan is one Span message.
func encodeSpan(s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	var b []byte
	b = appendBytes(b, 1, tid[:])
	b = appendBytes(b, 2, sid[:])
	b = appendString(b, 3, sc.TraceState().String())
	if p := s.Parent().SpanID(); p.IsValid() {
		b = appendBytes(b, 4, p[:])
	}
	b = appendString(b, 5, s.Name())
	if k := spanKind(s.SpanKind()); k != 0 {
		b = protowire.AppendTag(b, 6, protowire.VarintType)
		b = protowire.AppendVarint(b, k)
	}
	b = appendFixed64(b, 7, unixNano(s.StartTime()))
	b = appendFixed64(b, 8, unixNano(s.EndTime()))
	for _, kv := range s.Attributes() {
		b = appendMessage(b, 9, encodeKeyValue(kv))
	}
	b = appendUint(b, 10, s.DroppedAttributes())
	for _, e := range s.Events() {
		var eb []byte
		eb = appendFixed64(eb, 1, unixNano(e.Time))
		eb = appendString(eb, 2, e.Name)
		for _, kv := range e.Attributes {
			eb = appendMessage(eb, 3, encodeKeyValue(kv))
		}
		eb = appendUint(eb, 4, e.DroppedAttributeCount)
		b = appendMessage(b, 11, eb)
	}
	b = appendUint(b, 12, s.DroppedEvents())
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		var lb []byte
		lb = appendBytes(lb, 1, ltid[:])
		lb = appendBytes(lb, 2, lsid[:])
		for _, kv := range l.Attributes {
			lb = appendMessage(lb, 4, encodeKeyValue(kv))
		}
		lb = appendUint(lb, 5, l.DroppedAttributeCount)
		lb = appendFixed32(lb, 6, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = appendMessage(b, 13, lb)
	}
	b = appendUint(b, 14, s.DroppedLinks())
	var st []byte // Status: always present, as otlptracehttp writes it
	st = appendString(st, 2, s.Status().Description)
	switch s.Status().Code {
	case codes.Ok:
		st = protowire.AppendTag(st, 3, protowire.VarintType)
		st = protowire.AppendVarint(st, 1)
	case codes.Error:
		st = protowire.AppendTag(st, 3, protowire.VarintType)
		st = protowire.AppendVarint(st, 2)
	}
	b = appendMessage(b, 15, st)
	return appendFixed32(b, 16, spanFlags(sc.TraceFlags(), s.Parent()))
}

// spanFlags are the W3C trace flags, with "whether the parent is remote is known" set, and
// whether it is (OTLP's SpanFlags).
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	flags := uint32(tf) | 0x100
	if parent.IsRemote() {
		flags |= 0x200
	}
	return flags
}

// spanKind is OTLP's SpanKind number.
func spanKind(k trace.SpanKind) uint64 {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

// encodeKeyValue is one KeyValue message; its value is always written, as otlptracehttp does.
func encodeKeyValue(kv attribute.KeyValue) []byte {
	var b []byte
	b = appendString(b, 1, string(kv.Key))
	return appendMessage(b, 2, encodeValue(kv.Value))
}

// encodeValue is one AnyValue message (a oneof: a value is written even when it is zero).
func encodeValue(v attribute.Value) []byte {
	var b []byte
	array := func(n int, each func(i int) []byte) []byte {
		var arr []byte
		for i := range n {
			arr = appendMessage(arr, 1, each(i))
		}
		return appendMessage(b, 5, arr)
	}
	switch v.Type() {
	case attribute.STRING:
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, validUTF8(v.AsString()))
	case attribute.BOOL:
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, 7, protowire.BytesType)
		b = protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		b = array(len(s), func(i int) []byte { return encodeValue(attribute.BoolValue(s[i])) })
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		b = array(len(s), func(i int) []byte { return encodeValue(attribute.Int64Value(s[i])) })
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		b = array(len(s), func(i int) []byte { return encodeValue(attribute.Float64Value(s[i])) })
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		b = array(len(s), func(i int) []byte { return encodeValue(attribute.StringValue(s[i])) })
	case attribute.SLICE:
		s := v.AsSlice()
		b = array(len(s), func(i int) []byte { return encodeValue(s[i]) })
	case attribute.MAP:
		var kvs []byte
		for _, kv := range v.AsMap() {
			kvs = appendMessage(kvs, 1, encodeKeyValue(kv))
		}
		b = appendMessage(b, 6, kvs)
	case attribute.EMPTY:
	default:
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, "INVALID")
	}
	return b
}

func appendMessage(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// appendBytes, appendString, appendUint and the fixed ones leave a zero value out (proto3).
func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return appendMessage(b, num, v)
}

func appendString(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, validUTF8(v))
}

// validUTF8 is v with each byte that is not UTF-8 replaced by U+FFFD: a protobuf string must be
// UTF-8, and a collector refuses the whole request (every span of the invocation) for one
// string that is not (an error quoting a Latin-1 answer, say).
func validUTF8(v string) string {
	if utf8.ValidString(v) {
		return v
	}
	return strings.ToValidUTF8(v, "\uFFFD")
}

func appendUint(b []byte, num protowire.Number, v int) []byte {
	if v <= 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(min(v, math.MaxUint32)))
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

func unixNano(t time.Time) uint64 { return uint64(max(0, t.UnixNano())) }
