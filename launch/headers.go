package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"golang.org/x/net/http/httpguts"

	"github.com/oncehook/oncehook/launch/tracing"
	"github.com/oncehook/oncehook/sources"
)

// StoredOTLPHeaders reads the OTLP exporter's headers from the store tracing.OTLPHeadersSecret
// or OTLPHeadersParameter names (nil for none), for tracing.FromEnv. Its errors name the
// variable and never quote the value.
func StoredOTLPHeaders(ctx context.Context) (map[string]string, error) {
	secret, param := strings.TrimSpace(os.Getenv(tracing.OTLPHeadersSecret)), strings.TrimSpace(os.Getenv(tracing.OTLPHeadersParameter))
	if secret == "" && param == "" {
		return nil, nil
	}
	if secret != "" && param != "" {
		return nil, fmt.Errorf("%s and %s: set one of them", tracing.OTLPHeadersSecret, tracing.OTLPHeadersParameter)
	}
	ref, variable := sources.SecretRef{SecretsManager: secret}, tracing.OTLPHeadersSecret
	if param != "" {
		ref, variable = sources.SecretRef{SSM: param}, tracing.OTLPHeadersParameter
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if os.Getenv(v) != "" {
			return nil, fmt.Errorf("%s and %s: set one of them (the stored headers replace the variable's)", variable, v)
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: AWS configuration: %w", variable, err)
	}
	r := &sources.Resolver{SecretsManager: secretsmanager.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg)}
	vals, err := r.Resolve(ctx, []sources.SecretRef{ref})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", variable, err)
	}
	h, err := parseHeaders(vals[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %s's value: %w (the value is not shown)", variable, ref, err)
	}
	return h, nil
}

// parseHeaders reads headers as OTEL_EXPORTER_OTLP_HEADERS has them, or as a JSON object of
// strings, quoting no value in its errors. (Not baggage.Parse: it refuses a raw space in a
// value, which the exporter takes, and splits a value at ';'.)
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	if s = strings.TrimSpace(s); strings.HasPrefix(s, "{") {
		if err := json.Unmarshal([]byte(s), &h); err != nil {
			return nil, fmt.Errorf("not a JSON object of strings")
		}
	} else {
		for i, pair := range strings.Split(s, ",") {
			k, v, ok := strings.Cut(pair, "=")
			if !ok {
				return nil, fmt.Errorf("header %d: want key=value", i+1)
			}
			dv, err := url.PathUnescape(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("header %d: a bad %%-escape in its value", i+1)
			}
			h[strings.TrimSpace(k)] = dv
		}
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("no header")
	}
	for k, v := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, fmt.Errorf("a header's name is not an HTTP header name")
		}
		if v == "" || !httpguts.ValidHeaderFieldValue(v) {
			return nil, fmt.Errorf("the value of header %q is empty or not an HTTP header value", k)
		}
	}
	return h, nil
}
