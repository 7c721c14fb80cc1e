package otelenv

import "testing"

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
