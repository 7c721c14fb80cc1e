// Package otelenv reads the OpenTelemetry variables the functions' tracing takes
// (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_*, OTEL_TRACES_SAMPLER, OTEL_PROPAGATORS,
// OTEL_RESOURCE_ATTRIBUTES), refusing what cannot be honoured with an error naming the
// variable: launch reads them at start, and infra checks a deployment's with the same code at
// synth. Standard library and httpguts only, so that the CDK app's module does not take the
// functions' dependencies for it.
package otelenv

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

const (
	tracesExporterEnv = "OTEL_TRACES_EXPORTER"
	sdkDisabledEnv    = "OTEL_SDK_DISABLED"
)

// Settings is what the variables ask of the traces' exporter.
type Settings struct {
	On      bool              // OTEL_TRACES_EXPORTER=otlp, and the SDK not disabled
	URL     string            // where spans are posted
	Shown   string            // URL by its scheme and host (shown), for logs and errors
	Headers map[string]string // sent with each export
	Timeout time.Duration     // per export
	Gzip    bool
	// TLS files, read at start (TLSConfig), each with the variable that named it: the
	// collector's CA, and a client certificate with its key for a collector that asks for one.
	CA, ClientCertificate, ClientKey File
	// Propagators is what the functions' calls carry (OTEL_PROPAGATORS): "tracecontext" and
	// "baggage", default both; none with "none".
	Propagators []string
	// QueueSize is OTEL_BSP_MAX_QUEUE_SIZE, 0 when it is not set (the SDK reads the batch
	// processor's variables itself; Read checks them).
	QueueSize int
}

// File is a file a variable names.
type File struct{ Var, Path string }

// Read reads the variables through getenv (os.Getenv, or a map's lookup): tracing off unless
// OTEL_TRACES_EXPORTER is otlp; then the endpoint, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the URL
// as it is) or OTEL_EXPORTER_OTLP_ENDPOINT (a base, to whose path /v1/traces is added), default
// http://localhost:4318; _HEADERS (k=v,k2=v2, values URL-encoded; the traces' own replace the
// general ones), _TIMEOUT (milliseconds, default 10000, at most 15 minutes), _COMPRESSION
// (gzip or none), _CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY (files, read by
// TLSConfig), each the _TRACES_ one first; the protocol (http/protobuf only), the sampler,
// OTEL_PROPAGATORS and OTEL_RESOURCE_ATTRIBUTES.
func Read(getenv func(string) string) (Settings, error) {
	on, err := checkTracing(getenv)
	if err != nil || !on {
		return Settings{}, err
	}
	get := func(name string) (string, string) {
		for _, n := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + name, "OTEL_EXPORTER_OTLP_" + name} {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v, n
			}
		}
		return "", "OTEL_EXPORTER_OTLP_" + name
	}
	s := Settings{On: true, URL: "http://localhost:4318/v1/traces", Headers: map[string]string{}, Timeout: 10 * time.Second}
	endpointVar, base := "OTEL_EXPORTER_OTLP_ENDPOINT", false
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); v != "" {
		s.URL, endpointVar = v, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	} else if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
		s.URL, base = v, true
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Settings{}, fmt.Errorf("%s: not an http(s) URL", endpointVar)
	}
	if base {
		// A base URL: /v1/traces joins its path, and its query (a tenant some intakes take
		// there) stays a query. A fragment is never sent.
		u.Path, u.RawPath = strings.TrimSuffix(u.Path, "/")+"/v1/traces", ""
		u.Fragment, u.RawFragment = "", ""
		s.URL = u.String()
	}
	s.Shown = shown(u)
	// The traces' own headers, or else the general ones: one replaces the other whole, as
	// OpenTelemetry's exporters read them, so that the key of a backend the general variable
	// names for other signals is never sent to the traces' one.
	headersVar := "OTEL_EXPORTER_OTLP_HEADERS"
	if strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")) != "" {
		headersVar = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	}
	if err := parseHeaders(headersVar, getenv(headersVar), s.Headers); err != nil {
		return Settings{}, err
	}
	if v, name := get("TIMEOUT"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return Settings{}, fmt.Errorf("%s=%q: want milliseconds", name, v)
		}
		// Bounded before it is multiplied, so that it cannot wrap around into another timeout;
		// and no export outlasts the longest Lambda invocation.
		if ms > maxTimeout.Milliseconds() {
			return Settings{}, fmt.Errorf("%s=%q: want at most %d milliseconds (%v, Lambda's longest invocation)", name, v, maxTimeout.Milliseconds(), maxTimeout)
		}
		s.Timeout = time.Duration(ms) * time.Millisecond
	}
	switch v, name := get("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		s.Gzip = true
	default:
		return Settings{}, fmt.Errorf("%s=%q: want gzip or none", name, v)
	}
	for _, f := range []struct {
		name string
		into *File
	}{{"CERTIFICATE", &s.CA}, {"CLIENT_CERTIFICATE", &s.ClientCertificate}, {"CLIENT_KEY", &s.ClientKey}} {
		v, name := get(f.name)
		*f.into = File{Var: name, Path: v}
	}
	if (s.ClientCertificate.Path == "") != (s.ClientKey.Path == "") {
		return Settings{}, fmt.Errorf("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY (or their _TRACES_ forms): set both, or neither")
	}
	if s.Propagators, err = propagators(getenv(propagatorsEnv)); err != nil {
		return Settings{}, err
	}
	if s.QueueSize, err = checkBatcher(getenv); err != nil {
		return Settings{}, err
	}
	if err := checkResource(getenv(resourceEnv)); err != nil {
		return Settings{}, err
	}
	return s, nil
}

const propagatorsEnv = "OTEL_PROPAGATORS"

// maxQueueSize bounds OTEL_BSP_MAX_QUEUE_SIZE: the SDK allocates the queue whole, at start.
const maxQueueSize = 1 << 20

// checkBatcher refuses a batch span processor variable the SDK would not honour as written:
// it reads each with strconv.Atoi, and takes a value that is not a number for its default
// (silently), a negative queue as a panic at start, a zero delay as a panic at its first
// tick, a zero queue or timeout as every span dropped. Each must be a whole number from 1, the
// sizes at most maxQueueSize (the batch no larger than the queue), the times (milliseconds) at
// most 15 minutes. It returns OTEL_BSP_MAX_QUEUE_SIZE, 0 when it is not set.
func checkBatcher(getenv func(string) string) (queue int, err error) {
	read := func(name string, most int) (int, error) {
		v := getenv(name)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > most {
			return 0, fmt.Errorf("%s=%q: want a whole number from 1 to %d", name, v, most)
		}
		return n, nil
	}
	if queue, err = read("OTEL_BSP_MAX_QUEUE_SIZE", maxQueueSize); err != nil {
		return 0, err
	}
	batch, err := read("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", maxQueueSize)
	if err != nil {
		return 0, err
	}
	if queue > 0 && batch > queue {
		return 0, fmt.Errorf("OTEL_BSP_MAX_EXPORT_BATCH_SIZE=%d: want at most OTEL_BSP_MAX_QUEUE_SIZE (%d)", batch, queue)
	}
	for _, name := range []string{"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT"} {
		if _, err := read(name, int(maxTimeout.Milliseconds())); err != nil {
			return 0, err
		}
	}
	return queue, nil
}

// propagators reads OTEL_PROPAGATORS: a list of tracecontext and baggage (OpenTelemetry's
// default, both), or none. B3, Jaeger, OT and X-Ray's propagators are refused rather than
// ignored: they are not linked into the functions, and the AWS targets carry X-Ray's header
// whatever this says.
func propagators(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return []string{"tracecontext", "baggage"}, nil
	}
	var out []string
	for _, p := range strings.Split(list, ",") {
		switch p = strings.ToLower(strings.TrimSpace(p)); p {
		case "tracecontext", "baggage":
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		case "none":
			if len(strings.Split(list, ",")) > 1 {
				return nil, fmt.Errorf("%s=%q: none goes alone", propagatorsEnv, list)
			}
			return []string{}, nil
		default:
			return nil, fmt.Errorf("%s=%q: want tracecontext, baggage (the default is both) or none; %q is not linked into the functions (their AWS targets carry X-Ray's header whatever this says)", propagatorsEnv, list, p)
		}
	}
	return out, nil
}

// TLSConfig is the exporter's TLS configuration, from the files s names (nil when it names
// none): the collector's CA, added to the system's, and a client certificate. It reads them,
// so it runs at start (a synth has no function's files); its errors name the variable.
func (s Settings) TLSConfig() (*tls.Config, error) {
	if s.CA.Path == "" && s.ClientCertificate.Path == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CA.Path != "" {
		pem, err := os.ReadFile(s.CA.Path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.CA.Var, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%s: no PEM certificate in it", s.CA.Var, s.CA.Path)
		}
		cfg.RootCAs = pool
	}
	if s.ClientCertificate.Path != "" {
		cert, err := tls.LoadX509KeyPair(s.ClientCertificate.Path, s.ClientKey.Path)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", s.ClientCertificate.Var, s.ClientKey.Var, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// shown is an endpoint as logs and errors give it: scheme, host and the standard path, and
// "/…" for any other path or a query. An intake's key can be its URL's path (a per-source
// receiver URL) or a query parameter, and export errors are logged on every failed export.
func shown(u *url.URL) string {
	s := u.Scheme + "://" + u.Host
	switch {
	case u.RawQuery != "" || (u.Path != "" && u.Path != "/" && u.Path != "/v1/traces"):
		return s + "/…"
	case u.Path == "/v1/traces":
		return s + u.Path
	}
	return s
}

// maxTimeout is the longest export timeout taken: Lambda's longest invocation.
const maxTimeout = 15 * time.Minute

const resourceEnv = "OTEL_RESOURCE_ATTRIBUTES"

// checkResource refuses an OTEL_RESOURCE_ATTRIBUTES (k=v,k2=v2, values URL-encoded) the SDK's
// resource detector would refuse (a pair without "="), or read otherwise than it says: an
// empty key, or a value that is not URL-encoded (the SDK keeps such a value undecoded).
// A pair is named by its place in the list.
func checkResource(list string) error {
	if list == "" {
		return nil
	}
	for i, pair := range strings.Split(list, ",") {
		k, v, ok := strings.Cut(pair, "=")
		switch {
		case !ok:
			return fmt.Errorf("%s: attribute %d is not key=value (a pair without its value, or an empty pair: a comma too many)", resourceEnv, i+1)
		case strings.TrimSpace(k) == "":
			return fmt.Errorf("%s: attribute %d has no key", resourceEnv, i+1)
		}
		if _, err := url.PathUnescape(strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("%s: attribute %s: its value is not URL-encoded (a %% not followed by two hex digits)", resourceEnv, strings.TrimSpace(k))
		}
	}
	return nil
}

// exporterHeaders are headers an OTLP header variable may not set: net/http writes them itself
// (and drops, or over HTTP/2 fails every request on, one given), or the exporter sets them for
// each export.
var exporterHeaders = map[string]bool{
	"Host": true, "Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Content-Length": true, "Content-Type": true, "Content-Encoding": true,
}

// parseHeaders reads an OTLP headers variable (k=v,k2=v2, values URL-encoded) into into. A
// header it refuses is named by its place in the list, never quoted: its value is a vendor's
// key, and the refusal is logged. A name or a value net/http would not send (a space in the
// name, a line break or a NUL decoded from the value) is refused here, at start, rather than
// fail every export.
func parseHeaders(name, list string, into map[string]string) error {
	for i, pair := range strings.Split(list, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%s: header %d is not key=value (its text is not shown: it may hold a key)", name, i+1)
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("%s: header %d: its name is not an HTTP header name (token characters only)", name, i+1)
		}
		// Header names are case-insensitive: the traces' own "Api-Key" replaces a general
		// "api-key" rather than both being sent.
		k = textproto.CanonicalMIMEHeaderKey(k)
		if exporterHeaders[k] {
			return fmt.Errorf("%s: header %s: set by HTTP or by the exporter itself, never from this variable", name, k)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%s: header %s: its value is not URL-encoded (a %% not followed by two hex digits)", name, k)
		}
		if !httpguts.ValidHeaderFieldValue(dv) {
			return fmt.Errorf("%s: header %s: its value holds a control character (a line break, a NUL) that HTTP cannot carry", name, k)
		}
		into[k] = dv
	}
	return nil
}

// checkTracing says whether the environment turns tracing on, refusing an exporter, a
// protocol or a sampler that cannot be honoured.
func checkTracing(getenv func(string) string) (on bool, err error) {
	// "true" in any case, as OpenTelemetry reads it; anything else is false.
	if strings.EqualFold(strings.TrimSpace(getenv(sdkDisabledEnv)), "true") {
		return false, nil
	}
	switch strings.ToLower(strings.TrimSpace(getenv(tracesExporterEnv))) {
	case "", "none":
		return false, nil
	case "otlp":
	default:
		return false, fmt.Errorf("%s=%q: want otlp (OTLP over HTTP) or none", tracesExporterEnv, getenv(tracesExporterEnv))
	}
	// The traces' own protocol first, as every other _TRACES_ variable: the general one may be
	// set for metrics or logs that go elsewhere.
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			if p != "http/protobuf" {
				return false, fmt.Errorf("%s=%q: only http/protobuf is linked into the functions (a collector layer takes it on localhost:4318)", name, p)
			}
			break
		}
	}
	return true, checkSampler(getenv)
}

// checkSampler refuses a sampler the SDK would not honour. The SDK reads OTEL_TRACES_SAMPLER
// and _ARG itself, but one it does not know, or a ratio that is not one, only reaches its
// error handler, and every delivery is sampled instead: a deployment that asked for a tenth of
// its traffic would export all of it.
func checkSampler(getenv func(string) string) error {
	sampler := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	switch sampler {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		if arg == "" {
			return nil // the SDK's default ratio, 1
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || !(r >= 0 && r <= 1) { // NaN too
			return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1 for %s", arg, sampler)
		}
		return nil
	}
	return fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on (the default), parentbased_always_off or parentbased_traceidratio", getenv("OTEL_TRACES_SAMPLER"))
}
