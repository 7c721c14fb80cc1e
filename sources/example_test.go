package sources_test

import (
	"errors"
	"fmt"

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
