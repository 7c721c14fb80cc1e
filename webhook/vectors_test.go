package webhook

import (
	"net/http"
	"testing"
	"time"
)

func TestPublishedAndComputedVectors(t *testing.T) {
	t.Parallel()
	for _, f := range loadFixtures(t, "vectors.json") {
		t.Run(f.Name+" verifies and is reproduced by Sign", func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, f.Scheme, f.Options)
			now := time.Unix(f.Now, 0)
			if err := s.Verify(f.header(), []byte(f.Body), []string{f.Secret}, now); err != nil {
				t.Fatalf("Verify: %v (source: %s)", err, f.Source)
			}
			if err := s.Verify(f.header(), []byte(f.Body+" "), []string{f.Secret}, now); err == nil {
				t.Fatal("Verify accepted the vector with one byte appended to the body")
			}
			got := http.Header{}
			if err := s.Sign(got, []byte(f.Body), f.Secret, f.ID, now); err != nil {
				t.Fatalf("Sign: %v", err)
			}
			want := f.header()
			if len(got) != len(want) {
				t.Fatalf("Sign set %v, want %v", got, want)
			}
			for k := range want {
				if got.Get(k) != want.Get(k) {
					t.Errorf("Sign set %s: %q, want %q", k, got.Get(k), want.Get(k))
				}
			}
		})
	}
}

func TestDocumentedHeaderShapes(t *testing.T) {
	t.Parallel()
	for _, f := range loadFixtures(t, "docs_headers.json") {
		t.Run(f.Name+" parses, and fails only for want of the secret", func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, f.Scheme, f.Options)
			err := s.Verify(f.header(), []byte(`{"not":"the documented body"}`), []string{"whsec_bm90IHRoZSBzZWNyZXQ="} /* base64 of "not the secret" */, time.Unix(f.Now, 0))
			wantReason(t, err, f.Scheme, ReasonNoMatch)
		})
	}
}

func TestDocumentedStripeHeaderKeepsOnlyItsV1(t *testing.T) {
	t.Parallel()
	var p stripeSignature
	v := loadFixtures(t, "docs_headers.json")[0].Headers["Stripe-Signature"]
	if d := parseStripeSignature(v, &p); d != "" {
		t.Fatal(d)
	}
	if p.t != "1492774577" || p.unix != 1492774577 || p.sigs.n != 1 || p.sigs.sig[0][0] != 0x52 {
		t.Fatalf("parsed %+v, want t=1492774577 and the single v1 5257...", p)
	}
}

func TestDocumentedStandardHeaderKeepsOnlyItsV1(t *testing.T) {
	t.Parallel()
	var sigs signatures
	v := loadFixtures(t, "docs_headers.json")[1].Headers["Webhook-Signature"]
	if d := parseStandardSignature(v, &sigs); d != "" {
		t.Fatal(d)
	}
	if sigs.n != 1 {
		t.Fatalf("kept %d signatures, want the single v1 (the v1a is asymmetric)", sigs.n)
	}
}
