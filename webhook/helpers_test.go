package webhook

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fixture is one recorded delivery from testdata/*.json.
type fixture struct {
	Name    string            `json:"name"`
	Scheme  string            `json:"scheme"`
	Options Options           `json:"options"`
	Source  string            `json:"source"`
	Secret  string            `json:"secret"`
	ID      string            `json:"id"`
	Body    string            `json:"body"`
	Now     int64             `json:"now"`
	Headers map[string]string `json:"headers"`
	// VerifyOnly says why Sign cannot reproduce the vector (several signatures in one header).
	VerifyOnly string `json:"verify_only"`
	// PublicKey is what Verify takes for a public-key scheme, in place of Secret; PrivateKey,
	// what Sign takes to reproduce the vector.
	PublicKey  string `json:"public_key"`
	PrivateKey string `json:"private_key"`
}

func (f fixture) header() http.Header {
	h := http.Header{}
	for k, v := range f.Headers {
		h.Set(k, v)
	}
	return h
}

func loadFixtures(t testing.TB, name string) []fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var fs []fixture
	if err := json.Unmarshal(b, &fs); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(fs) == 0 {
		t.Fatalf("%s: no fixtures", name)
	}
	return fs
}

func mustNew(t testing.TB, name string, opts Options) Scheme {
	t.Helper()
	s, err := New(name, opts)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	return s
}

// refMAC is HMAC-SHA256 computed straight from crypto/hmac, independently of the package's
// pooled keys, for the tests' own expectations.
func refMAC(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// refMAC1 is HMAC-SHA1, for Intercom's and Twilio's expectations.
func refMAC1(key, msg []byte) []byte {
	m := hmac.New(sha1.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// wantReason fails unless err is a *SignatureError (matching ErrSignature) with the reason.
func wantReason(t *testing.T, err error, scheme, reason string) {
	t.Helper()
	var se *SignatureError
	if !errors.As(err, &se) || !errors.Is(err, ErrSignature) {
		t.Fatalf("err = %v, want a *SignatureError matching ErrSignature", err)
	}
	if se.Scheme != scheme || se.Reason != reason {
		t.Fatalf("err = %v, want scheme %q and reason %q", err, scheme, reason)
	}
	if errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v also matches ErrInvalid", err)
	}
}

// wantInvalid fails unless err is an *InvalidError (matching ErrInvalid) naming field.
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var ie *InvalidError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want an *InvalidError matching ErrInvalid", err)
	}
	if ie.Field != field {
		t.Fatalf("err = %v names field %q, want %q", err, ie.Field, field)
	}
	if errors.Is(err, ErrSignature) {
		t.Fatalf("err = %v also matches ErrSignature", err)
	}
}

// clock is the tests' fixed "now".
var clock = time.Unix(1_700_000_000, 0)

// stripeSignature is a Stripe-Signature value parsed as the stripe scheme parses it.
type stripeSignature struct {
	t    string // the timestamp as sent, which is what is signed
	unix int64
	sigs signatures
}

// parseStripeSignature parses v as the stripe scheme's Verify does, or says why it is malformed.
func parseStripeSignature(v string, p *stripeSignature) (detail string) {
	if detail := parseSignedList(v, ',', "t", "v1", &p.t, &p.sigs); detail != "" {
		return detail
	}
	var ok bool
	if p.unix, ok = parseUnix(p.t); !ok {
		return "the timestamp is not a Unix time in seconds"
	}
	return ""
}
