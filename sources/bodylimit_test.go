package sources

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// TestTheLargestBodyLimitIsOneThatCanArrive: the invariant is that every max_body_bytes the
// file accepts names a body the receiver can actually be handed. The largest accepted limit's
// body, base64-encoded in API Gateway's event with a full 10 KiB of headers, fits Lambda's
// request limit; one byte more is refused, naming the field.
func TestTheLargestBodyLimitIsOneThatCanArrive(t *testing.T) {
	t.Parallel()
	headers := map[string]string{}
	for i := 0; len(fmt.Sprint(headers)) < 10*1024; i++ {
		headers[fmt.Sprintf("x-h%03d", i)] = strings.Repeat("\"", 60) // escaped in JSON: twice the bytes
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /hooks/s", RawPath: "/hooks/s", Headers: headers,
		Body: base64.StdEncoding.EncodeToString(make([]byte, maxBody)), IsBase64Encoded: true,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID: "123456789012", APIID: strings.Repeat("a", 10), DomainName: strings.Repeat("h", 253), Stage: "$default",
			RequestID: strings.Repeat("r", 36), RouteKey: "POST /hooks/s", Time: "04/Dec/2026:20:00:00 +0000",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/hooks/s", Protocol: "HTTP/1.1", SourceIP: "2001:db8::1", UserAgent: strings.Repeat("u", 512)},
		},
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > lambdaPayload {
		t.Errorf("a %d-byte body arrives as a %d-byte event, over Lambda's %d", maxBody, len(b), lambdaPayload)
	}
	const ok = `"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d"`
	if _, err := Parse([]byte(fmt.Sprintf(`{"sources":{"s":{%s,"max_body_bytes":%d}}}`, ok, maxBody))); err != nil {
		t.Errorf("the largest limit: %v", err)
	}
	for _, n := range []int{maxBody + 1, lambdaPayload, 6 * 1000 * 1000} {
		_, err := Parse([]byte(fmt.Sprintf(`{"sources":{"s":{%s,"max_body_bytes":%d}}}`, ok, n)))
		if err == nil || !strings.Contains(err.Error(), "sources.s.max_body_bytes") {
			t.Errorf("max_body_bytes %d (cannot arrive): got %v", n, err)
		}
	}
}
