package otelenv

import (
	"testing"
	"time"
)

// TestAnExportTimeoutIsHonouredOrRefused: OTEL_EXPORTER_OTLP_TIMEOUT is milliseconds, and a
// value the exporter cannot honour is refused at start naming the variable. A number of
// milliseconds too large for a time.Duration must not wrap around into another timeout: 2^58+1
// ms wraps to 1 ms, under which no export reaches any collector, and is taken.
func TestAnExportTimeoutIsHonouredOrRefused(t *testing.T) {
	for _, v := range []string{"288230376151711745", "9223372036854775807", "9300000000000"} {
		env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TIMEOUT": v}
		s, err := Read(func(k string) string { return env[k] })
		if err == nil && s.Timeout < time.Hour {
			t.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT=%s ms: taken as a timeout of %v", v, s.Timeout)
		}
	}
}

// TestOTELSDKDisabledIsTrueInAnyCase: OTEL_SDK_DISABLED turns tracing off whatever the exporter
// says, and OpenTelemetry's configuration reads a boolean as true for "the case-insensitive
// string true" ("True", "TRUE" and every other casing of it). A deployment that set it so, to
// stop exporting, must find tracing off; one of these casings leaves it on, exporting every
// invocation's spans.
func TestOTELSDKDisabledIsTrueInAnyCase(t *testing.T) {
	for _, v := range []string{"true", "True", "TRUE", "tRUE", "trUE", "TruE", "tRuE"} {
		env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": v}
		s, err := Read(func(k string) string { return env[k] })
		if err != nil {
			t.Errorf("OTEL_SDK_DISABLED=%q: %v", v, err)
			continue
		}
		if s.On {
			t.Errorf("OTEL_SDK_DISABLED=%q: tracing is on", v)
		}
	}
}
