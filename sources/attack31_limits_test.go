package sources_test

import (
	"strings"
	"testing"

	"github.com/oncehook/oncehook/sources"
)

// Invariant (docs/outbox.md, "Per-target limits"): max_in_flight is 1 to 1,000 and rate 0.01 to
// 10,000, "refused at load outside those ranges, naming the field". A limit written as 0 is
// outside them, and taken as no limit at all: a target someone meant to stop (or mistyped)
// is called without any cap.
func TestALimitWrittenAsZeroIsRefusedNamingTheField(t *testing.T) {
	for field, value := range map[string]string{"max_in_flight": "0", "rate": "0"} {
		b := []byte(`{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"X"}],"retry_horizon":"1h","redrive_window":"0d"}},` +
			`"targets":{"email":{"url":"https://mail.example.com/send","` + field + `":` + value + `}}}`)
		_, err := sources.Parse(b)
		if err == nil || !strings.Contains(err.Error(), "targets.email."+field) {
			t.Errorf("%s: %s: %v, want refused naming targets.email.%s", field, value, err, field)
		}
	}
}
