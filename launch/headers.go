package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"golang.org/x/net/http/httpguts"

	"github.com/oncehook/oncehook/sources"
)

// The OTLP exporter's headers (a vendor's intake key) are read at start from a secret store, as
// the sources' secrets are, so that the key is never in a function's environment or the
// template that sets it:
//
//	ONCEHOOK_OTLP_HEADERS_SECRET     a Secrets Manager secret (name or ARN) whose SecretString is
//	                                 the headers; or
//	ONCEHOOK_OTLP_HEADERS_PARAMETER  an SSM parameter (a SecureString, decrypted) holding them
//
// The value is either OTEL_EXPORTER_OTLP_HEADERS' form (api-key=<key>,x-team=payments; values
// URL-encoded) or a JSON object of strings (Secrets Manager's key/value secret). It replaces the
// OTEL_EXPORTER_OTLP_HEADERS variables, which may then not be set. It is never logged, nor
// quoted in an error.
const (
	OTLPHeadersSecret    = "ONCEHOOK_OTLP_HEADERS_SECRET"
	OTLPHeadersParameter = "ONCEHOOK_OTLP_HEADERS_PARAMETER"
)

// storedHeaders reads the exporter's headers from the store the environment names: nil when it
// names none.
func storedHeaders(ctx context.Context, getenv func(string) string) (map[string]string, error) {
	secret, param := strings.TrimSpace(getenv(OTLPHeadersSecret)), strings.TrimSpace(getenv(OTLPHeadersParameter))
	if secret == "" && param == "" {
		return nil, nil
	}
	if secret != "" && param != "" {
		return nil, fmt.Errorf("%s and %s: set one of them", OTLPHeadersSecret, OTLPHeadersParameter)
	}
	ref, variable := sources.SecretRef{SecretsManager: secret}, OTLPHeadersSecret
	if param != "" {
		ref, variable = sources.SecretRef{SSM: param}, OTLPHeadersParameter
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if getenv(v) != "" {
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

// parseHeaders reads headers as OTEL_EXPORTER_OTLP_HEADERS has them (key=value pairs, comma-
// separated, values URL-encoded), or as a JSON object of strings. Its errors quote no value.
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
