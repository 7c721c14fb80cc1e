package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewRefusesBadOptionsNamingTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		scheme string
		opts   Options
		field  string
	}{
		{"an unknown scheme is refused", "paypal", Options{}, "name"},
		{"PagerDuty takes no tolerance: it signs no timestamp", PagerDuty, Options{Tolerance: time.Minute}, "Tolerance"},
		{"a negative Slack tolerance is refused", Slack, Options{Tolerance: -time.Second}, "Tolerance"},
		{"Twitch takes no Header", Twitch, Options{Header: "X-Sig"}, "Header"},
		{"an empty scheme name is refused", "", Options{}, "name"},
		{"scheme names are case-sensitive", "Stripe", Options{}, "name"},
		{"a negative Stripe tolerance is refused", Stripe, Options{Tolerance: -time.Second}, "Tolerance"},
		{"a negative Standard Webhooks tolerance is refused", StandardWebhooks, Options{Tolerance: -1}, "Tolerance"},
		{"GitHub takes no tolerance: it signs no timestamp", GitHub, Options{Tolerance: time.Minute}, "Tolerance"},
		{"Shopify takes no tolerance: it signs no timestamp", Shopify, Options{Tolerance: time.Minute}, "Tolerance"},
		{"the generic scheme takes no tolerance", HMACSHA256, Options{Header: "X-Sig", Tolerance: time.Minute}, "Tolerance"},
		{"Stripe takes no Header", Stripe, Options{Header: "X-Sig"}, "Header"},
		{"GitHub takes no Encoding", GitHub, Options{Encoding: "hex"}, "Encoding"},
		{"Standard Webhooks takes no Prefix", StandardWebhooks, Options{Prefix: "v1,"}, "Prefix"},
		{"the generic scheme needs a Header", HMACSHA256, Options{}, "Header"},
		{"the generic Header must be a header name", HMACSHA256, Options{Header: "X Sig"}, "Header"},
		{"the generic Header must not carry a colon", HMACSHA256, Options{Header: "X-Sig:"}, "Header"},
		{"the generic Encoding must be hex or base64", HMACSHA256, Options{Header: "X-Sig", Encoding: "base32"}, "Encoding"},
		{"the generic Encoding is case-sensitive", HMACSHA256, Options{Header: "X-Sig", Encoding: "HEX"}, "Encoding"},
		{"the generic Prefix must not contain spaces", HMACSHA256, Options{Header: "X-Sig", Prefix: "sha256 ="}, "Prefix"},
		{"the generic Prefix must be ASCII", HMACSHA256, Options{Header: "X-Sig", Prefix: "é="}, "Prefix"},
		{"the generic Prefix is at most 64 bytes", HMACSHA256, Options{Header: "X-Sig", Prefix: strings.Repeat("p", 65)}, "Prefix"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(c.scheme, c.opts)
			if s != nil {
				t.Fatalf("New returned a scheme with error %v", err)
			}
			wantInvalid(t, err, c.field)
		})
	}
}

func TestNewAcceptsEveryDocumentedScheme(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts Options
	}{
		{StandardWebhooks, Options{}},
		{StandardWebhooks, Options{Tolerance: time.Minute}},
		{Stripe, Options{}},
		{GitHub, Options{}},
		{Shopify, Options{}},
		{HMACSHA256, Options{Header: "X-Signature"}},
		{HMACSHA256, Options{Header: "x-hook-sig", Encoding: EncodingBase64, Prefix: "sha256="}},
		{Svix, Options{}}, {Slack, Options{Tolerance: time.Minute}}, {Paddle, Options{}}, {PagerDuty, Options{}}, {Linear, Options{}}, {Twitch, Options{}},
	} {
		t.Run(c.name+" is made and named", func(t *testing.T) {
			t.Parallel()
			if got := mustNew(t, c.name, c.opts).Name(); got != c.name {
				t.Fatalf("Name() = %q, want %q", got, c.name)
			}
		})
	}
}

func TestUnknownSchemeErrorQuotesAndTruncatesTheName(t *testing.T) {
	t.Parallel()
	_, err := New("bad\"name\n"+strings.Repeat("x", 100), Options{})
	msg := err.Error()
	if strings.ContainsAny(msg, "\n") || len(msg) > 300 || !strings.Contains(msg, `bad\"name\n`) {
		t.Fatalf("error %q should quote the name, escaped and truncated", msg)
	}
}

func TestCheckSecrets(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		scheme  string
		secrets []string
		field   string // "" means usable
	}{
		{"Standard Webhooks takes whsec_ secrets", StandardWebhooks, []string{secretA, secretB}, ""},
		{"Standard Webhooks takes a bare base64 secret", StandardWebhooks, []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, ""},
		{"Standard Webhooks names the secret that is not base64", StandardWebhooks, []string{secretA, "whsec_abc"}, "secrets[1]"},
		{"Standard Webhooks refuses a secret that decodes to nothing", StandardWebhooks, []string{"whsec_"}, "secrets[0]"},
		{"Stripe takes its whsec_ secret as it is", Stripe, []string{"whsec_not_base64!"}, ""},
		{"Stripe refuses an empty list", Stripe, nil, "secrets"},
		{"GitHub refuses an empty secret", GitHub, []string{""}, "secrets[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := CheckSecrets(mustNew(t, c.scheme, Options{}), c.secrets)
			if c.field == "" {
				if err != nil {
					t.Fatalf("CheckSecrets = %v, want nil", err)
				}
				return
			}
			wantInvalid(t, err, c.field)
			for _, secret := range c.secrets {
				if len(secret) > len(StandardSecretPrefix) && strings.Contains(err.Error(), secret) {
					t.Fatalf("the error %q repeats a secret", err)
				}
			}
		})
	}
}

func TestErrorsReadWellAndMatchOnlyTheirSentinel(t *testing.T) {
	t.Parallel()
	sig := error(&SignatureError{Scheme: "stripe", Reason: ReasonTimestamp, Header: StripeHeader, Detail: "too old"})
	if got, want := sig.Error(), "webhook: stripe: timestamp outside tolerance: Stripe-Signature: too old"; got != want {
		t.Errorf("SignatureError.Error() = %q, want %q", got, want)
	}
	if got, want := (&SignatureError{Scheme: "github", Reason: ReasonNoMatch}).Error(), "webhook: github: no signature matched"; got != want {
		t.Errorf("SignatureError.Error() = %q, want %q", got, want)
	}
	inv := error(&InvalidError{Field: "name", Reason: "unknown"})
	if got, want := inv.Error(), "webhook: invalid name: unknown"; got != want {
		t.Errorf("InvalidError.Error() = %q, want %q", got, want)
	}
	if !errors.Is(sig, ErrSignature) || errors.Is(sig, ErrInvalid) || !errors.Is(inv, ErrInvalid) || errors.Is(inv, ErrSignature) {
		t.Error("each error must match its own sentinel and only it")
	}
}

func TestKeyringStartsOverWhenFull(t *testing.T) {
	t.Parallel()
	r := newKeyring(GitHub)
	first := r.get("k")
	for i := range maxKeys + 5 {
		if k := r.get(strings.Repeat("k", i+2)); k.err != nil {
			t.Fatal(k.err)
		}
	}
	if n := len(*r.m.Load()); n > maxKeys {
		t.Fatalf("the keyring holds %d keys, want at most %d", n, maxKeys)
	}
	if _, held := (*r.m.Load())["k"]; held {
		t.Fatal("the first key is still held: the ring did not start over")
	}
	again := r.get("k")
	if again == first || again.err != nil {
		t.Fatalf("a dropped key must be prepared anew (got the old one: %v, error %v)", again == first, again.err)
	}
	// And it still signs as HMAC-SHA256 keyed with the secret, computed here without the ring.
	var sum [sha256.Size]byte
	r.mac(again, &sum, []byte("Hello, World!"))
	want := hmac.New(sha256.New, []byte("k"))
	want.Write([]byte("Hello, World!"))
	if !hmac.Equal(sum[:], want.Sum(nil)) {
		t.Fatal("the re-prepared key does not verify")
	}
}
