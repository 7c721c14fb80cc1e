package sources_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/oncehook/oncehook/sources"
)

// A file that works but leaves a source's retention to a default: Parse accepts it, and
// Warnings names the field to set. The functions log each warning at start, and the
// construct's synth shows it.
func ExampleFile_Warnings() {
	f, err := sources.Parse([]byte(`{"sources": {
		"stripe": {"scheme": "stripe", "secrets": [{"secretsmanager": "prod/stripe"}]},
		"github": {"scheme": "github", "secrets": [{"secretsmanager": "prod/github"}], "retry_horizon": "1h", "redrive_window": "3d"}
	}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, w := range f.Warnings() {
		fmt.Println(w.Field)
	}
	// Output:
	// sources.stripe.redrive_window
}

// An error in a sources file names the entry and field it is in, as a *sources.FieldError.
func ExampleFieldError() {
	_, err := sources.Parse([]byte(`{"sources": {"stripe": {"scheme": "stripe", "secret": "whsec_x"}}}`))
	var fe *sources.FieldError
	if errors.As(err, &fe) {
		fmt.Println(fe.Field)
		fmt.Println(err)
	}
	// Output:
	// sources.stripe
	// sources.stripe: unknown field "secret"
}

// A sources file that names no physical table or queue: its entries are "bound", and the
// deployment's names (infra hands the functions ONCEHOOK_BINDINGS, with what CloudFormation
// resolved; launch binds them at start) are given with Bind, which checks each as a literal.
func ExampleFile_Bind() {
	f, err := sources.Parse([]byte(`{
	  "sources": {"stripe": {"scheme": "stripe", "secrets": [{"secretsmanager": "prod/stripe"}], "redrive_window": "30d"}},
	  "tables":  {"customers": {"bound": true, "partition_key": "email", "actions": ["update"]}},
	  "targets": {"audit": {"type": "sqs", "bound": true}}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := sources.ParseBindings([]byte(`{"tables": {"customers": "Storefront-Customers1A2B3C"},
	  "targets": {"audit": "arn:aws:sqs:us-east-1:111111111111:Storefront-Audit4D5E6F"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := f.Bind(b); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Tables["customers"].PhysicalName("customers"))
	fmt.Println(f.Targets["audit"].QueueURL())
	// A binding of the wrong kind is refused, naming the field.
	g, _ := sources.Parse([]byte(`{
	  "sources": {"stripe": {"scheme": "stripe", "secrets": [{"secretsmanager": "prod/stripe"}], "redrive_window": "30d"}},
	  "targets": {"audit": {"type": "sqs", "bound": true}}
	}`))
	fmt.Println(g.Bind(sources.Bindings{Targets: map[string]string{"audit": "arn:aws:sns:us-east-1:111111111111:alerts"}}))
	// Output:
	// Storefront-Customers1A2B3C
	// https://sqs.us-east-1.amazonaws.com/111111111111/Storefront-Audit4D5E6F
	// targets.audit.arn: "arn:aws:sns:us-east-1:111111111111:alerts" is not the ARN of a sqs resource (arn:aws:sqs:<region>:<account>:...)
}

// A source's scheme, built from its entry as the receiver builds it: here the generic
// hmac-sha256 with the partner's header and prefix. It signs as the provider does and
// verifies with the source's resolved secrets.
func ExampleSource_WebhookScheme() {
	f, err := sources.Parse([]byte(`{"sources": {"partner": {"scheme": "hmac-sha256",
	  "hmac": {"header": "X-Partner-Signature", "prefix": "sha256="}, "secrets": [{"env": "PARTNER_SECRET"}],
	  "event_id": {"json": "id"}, "event_type": {"json": "type"}, "retry_horizon": "1d", "redrive_window": "7d"}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	scheme, err := f.Sources["partner"].WebhookScheme()
	if err != nil {
		fmt.Println(err)
		return
	}
	body, now := []byte(`{"id":"evt_1","type":"order.paid"}`), time.Now()
	h := http.Header{}
	if err := scheme.Sign(h, body, "partner-secret", "evt_1", now); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(h.Get("X-Partner-Signature")[:len("sha256=")])
	fmt.Println(scheme.Verify(h, body, []string{"partner-secret"}, now))
	// Output:
	// sha256=
	// <nil>
}

// GitHub's event ids are scoped by the hook that sent them (its preset reads the delivery GUID
// under X-GitHub-Hook-ID): a tool that looks a claim up by the provider's id needs the scope.
func ExampleSource_ScopedIDs() {
	f, err := sources.Parse([]byte(`{"sources": {
		"github": {"scheme": "github", "secrets": [{"env": "GH"}], "retry_horizon": "1h", "redrive_window": "3d"},
		"stripe": {"scheme": "stripe", "secrets": [{"env": "ST"}], "redrive_window": "3d"}
	}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Sources["github"].ScopedIDs(), f.Sources["stripe"].ScopedIDs(), f.Sources["gitlab"].ScopedIDs())
	// Output: true false false
}

// A locator's JSON path names object keys between dots: CheckJSONPath is the rule the sources
// file and the receiver's fields (receiver.NewFields) hold paths to.
func ExampleCheckJSONPath() {
	for _, p := range []string{"data.object.id", "data..id", "id."} {
		fmt.Println(p, sources.CheckJSONPath(p) == nil)
	}
	// Output:
	// data.object.id true
	// data..id false
	// id. false
}
