package receiver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The recorded deliveries in testdata/: AWS's sample HTTP API event from aws-lambda-go with
// each provider's delivery put in and signed by Python's hmac (testdata/fixtures.py, README.md),
// so that neither the envelope nor the signatures come from oncehook's code.
var fixtureFiles = []struct {
	file         string
	wantShipment bool
}{
	{"standard-webhooks-order-paid.json", true},
	{"stripe-order-paid.json", true},
	{"github-push.json", false},
	{"shopify-orders-paid.json", false},
}

func TestRecordedDeliveries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	shipments := 0
	for _, f := range fixtureFiles {
		t.Run(f.file, func(t *testing.T) {
			req := loadFixture(t, f.file)
			if req.PathParameters != nil {
				t.Fatal("the stack's routes are one per source: API Gateway sends no path parameters")
			}
			first := e.post(req)
			if first.StatusCode != 200 || first.Body != `{"received":true,"duplicate":false}` {
				t.Fatalf("first delivery: %d %s", first.StatusCode, first.Body)
			}
			again := e.post(req)
			if again.StatusCode != 200 || again.Body != `{"received":true,"duplicate":true}` {
				t.Fatalf("the same delivery again: %d %s", again.StatusCode, again.Body)
			}
		})
		if f.wantShipment {
			shipments++
		}
	}
	if n := e.countPrefix("ORDER#"); n != shipments {
		t.Fatalf("%d shipments, want %d (the order.paid fixtures)", n, shipments)
	}
}

// TestTheFixturesHaveTheShapeOfAWSsSampleEvent compares each fixture's fields, at every level,
// with aws-lambda-go's sample event of the pinned version (less the sample's mutual TLS block),
// so that a fixture edited by hand cannot drift from what API Gateway sends.
func TestTheFixturesHaveTheShapeOfAWSsSampleEvent(t *testing.T) {
	t.Parallel()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Fatalf("locating aws-lambda-go: %v", err)
	}
	sample := shape(t, filepath.Join(strings.TrimSpace(string(dir)), "events", "testdata", "apigw-v2-request-no-authorizer.json"))
	delete(sample, "requestContext.authentication")
	for k := range sample {
		if strings.HasPrefix(k, "requestContext.authentication.") || strings.HasPrefix(k, "headers.") {
			delete(sample, k)
		}
	}
	for _, f := range fixtureFiles {
		got := shape(t, filepath.Join("testdata", f.file))
		var missing, extra []string
		for k := range sample {
			if !got[k] {
				missing = append(missing, k)
			}
		}
		for k := range got {
			if !sample[k] && !strings.HasPrefix(k, "headers.") && k != "body" { // the sample is a GET
				extra = append(extra, k)
			}
		}
		sort.Strings(missing)
		sort.Strings(extra)
		if len(missing)+len(extra) > 0 {
			t.Errorf("%s: missing %v, not in AWS's sample %v", f.file, missing, extra)
		}
	}
}

// shape lists a JSON file's field paths (requestContext.http.method).
func shape(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			out[prefix+k] = true
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", v)
	return out
}
