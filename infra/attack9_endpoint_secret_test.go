package infra

import (
	"strings"
	"testing"
)

// TestAnEndpointTheSynthRefusesIsNeverQuoted: an OTLP intake's key is often its endpoint's path
// or query ("https://otlp.vendor.example/v1/<key>", "?api-key=<key>") or its userinfo, and the
// functions' start never quotes the endpoint it refuses (otelenv: "OTEL_EXPORTER_OTLP_ENDPOINT:
// not an http(s) URL"), nor logs or names it in an export error but by scheme and host. The
// construct's own check of Props.OpenTelemetry.Endpoint quotes it whole: a typo in the scheme,
// a missing scheme or a bad escape puts the intake's key in the synth's error, which CI logs
// and build output keep.
//
// The space: endpoints the synth refuses (no scheme, a misspelt or other scheme, a bad escape
// in the path, a space in the host), each holding the key in its path, its query or its
// userinfo.
func TestAnEndpointTheSynthRefusesIsNeverQuoted(t *testing.T) {
	const secret = "SECRETKEY"
	var cases []string
	for _, prefix := range []string{"", "htps://", "grpc://", "https:/", "otlp://"} {
		for _, rest := range []string{
			"otlp.vendor.example/v1/" + secret,
			"otlp.vendor.example/v1/traces?api-key=" + secret,
			"user:" + secret + "@otlp.vendor.example/v1/traces",
		} {
			cases = append(cases, prefix+rest)
		}
	}
	cases = append(cases,
		"https://otlp.vendor.example/v1/"+secret+"/%zz",
		"https://otlp vendor.example/v1/traces?api-key="+secret,
		"https://user:"+secret+"@otlp.vendor.example:port/v1/traces",
	)
	refused := 0
	for _, endpoint := range cases {
		err := checkTelemetry(&Props{OpenTelemetry: &OpenTelemetry{Endpoint: endpoint}})
		if err == nil {
			continue
		}
		refused++
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Endpoint %q refused with the intake's key in the error: %v", endpoint, err)
		}
	}
	if refused == 0 {
		t.Fatal("no endpoint refused: the space tested nothing")
	}
}
