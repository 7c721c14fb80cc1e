package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two secrets in a form every scheme takes: whsec_ + base64 for Standard Webhooks, and just
// bytes for the others.
var (
	secretA = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the first secret, 24 b.."))
	secretB = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the second secret, 25 b.."))
)

const testBody = `{"id":"evt_1","type":"thing.happened","data":{"n":1}}`

// verifyCase edits a delivery signed with secretA at clock and says what Verify must answer.
type verifyCase struct {
	name    string
	edit    func(h http.Header, body []byte) []byte // nil leaves the delivery as signed
	secrets []string                                // nil means {secretA}
	now     time.Time                               // zero means clock
	reason  string                                  // "" means accepted
	invalid string                                  // the field of an expected *InvalidError
}

func runVerifyCases(t *testing.T, s Scheme, cases []verifyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if err := s.Sign(h, []byte(testBody), secretA, "msg_2mN8s0Ab", clock); err != nil {
				t.Fatal(err)
			}
			body := []byte(testBody)
			if c.edit != nil {
				body = c.edit(h, body)
			}
			secrets := c.secrets
			if secrets == nil {
				secrets = []string{secretA}
			}
			now := c.now
			if now.IsZero() {
				now = clock
			}
			err := s.Verify(h, body, secrets, now)
			switch {
			case c.invalid != "":
				wantInvalid(t, err, c.invalid)
			case c.reason != "":
				wantReason(t, err, s.Name(), c.reason)
			case err != nil:
				t.Fatalf("Verify rejected the delivery: %v (headers %v)", err, h)
			}
		})
	}
}

// sigOf returns what Sign with secret puts in the scheme's signature header.
func sigOf(t *testing.T, s Scheme, header, secret string, body []byte, at time.Time) string {
	t.Helper()
	h := http.Header{}
	if err := s.Sign(h, body, secret, "msg_2mN8s0Ab", at); err != nil {
		t.Fatal(err)
	}
	return h.Get(header)
}

func set(header, value string) func(http.Header, []byte) []byte {
	return func(h http.Header, b []byte) []byte { h.Set(header, value); return b }
}

func edit(header string, f func(string) string) func(http.Header, []byte) []byte {
	return func(h http.Header, b []byte) []byte { h.Set(header, f(h.Get(header))); return b }
}

// commonCases are the answers every scheme owes, whatever its header.
func commonCases(header string) []verifyCase {
	return []verifyCase{
		{name: "accepts the delivery as signed"},
		{name: "accepts it when the signing secret is the second of two (rotation)", secrets: []string{secretB, secretA}},
		{name: "accepts it when the signing secret is the first of two", secrets: []string{secretA, secretB}},
		{name: "rejects it when only another secret is configured", secrets: []string{secretB}, reason: ReasonNoMatch},
		{name: "rejects a body with one byte changed", reason: ReasonNoMatch,
			edit: func(_ http.Header, b []byte) []byte { b[len(b)-2] = '2'; return b }},
		{name: "rejects a body with a byte appended", reason: ReasonNoMatch,
			edit: func(_ http.Header, b []byte) []byte { return append(b, '\n') }},
		{name: "rejects an empty body", reason: ReasonNoMatch,
			edit: func(_ http.Header, _ []byte) []byte { return nil }},
		{name: "rejects a delivery without the signature header", reason: ReasonMissingHeader,
			edit: func(h http.Header, b []byte) []byte { h.Del(header); return b }},
		{name: "rejects an empty signature header", reason: ReasonMissingHeader, edit: set(header, "")},
		{name: "rejects a repeated signature header", reason: ReasonMalformedHeader,
			edit: func(h http.Header, b []byte) []byte { h.Add(header, h.Get(header)); return b }},
		{name: "rejects a signature header longer than 4 KB", reason: ReasonMalformedHeader,
			edit: edit(header, func(v string) string { return v + strings.Repeat(" ", maxHeaderLen) })},
		{name: "does not read a header stored under a non-canonical key", reason: ReasonMissingHeader,
			edit: func(h http.Header, b []byte) []byte {
				v := h.Get(header)
				h.Del(header)
				h[strings.ToLower(header)] = []string{v}
				return b
			}},
		{name: "refuses to verify without any secret", secrets: []string{}, invalid: "secrets"},
		{name: "refuses an empty secret even beside the right one", secrets: []string{secretA, ""}, invalid: "secrets[1]"},
	}
}

func TestStripeVerify(t *testing.T) {
	t.Parallel()
	s := mustNew(t, Stripe, Options{})
	body := []byte(testBody)
	sigA := sigOf(t, s, StripeHeader, secretA, body, clock)
	sigB := sigOf(t, s, StripeHeader, secretB, body, clock)
	t0 := strconv.FormatInt(clock.Unix(), 10)
	v1A := strings.TrimPrefix(sigA, "t="+t0+",")
	v1B := strings.TrimPrefix(sigB, "t="+t0+",")
	hexA := strings.TrimPrefix(v1A, "v1=")
	cases := append(commonCases(StripeHeader), []verifyCase{
		{name: "accepts two v1 signatures of which only the second matches",
			edit: set(StripeHeader, "t="+t0+","+v1B+","+v1A)},
		{name: "accepts a v1 beside a test-mode v0",
			edit: set(StripeHeader, sigA+",v0="+strings.Repeat("ab", 32))},
		{name: "ignores a v0 even when it is the right signature", reason: ReasonNoMatch,
			edit: set(StripeHeader, "t="+t0+",v0="+hexA)},
		{name: "ignores an unknown scheme and keys it does not know",
			edit: set(StripeHeader, "t="+t0+",v2=zz,x=1,"+v1A)},
		{name: "accepts the elements in any order", edit: set(StripeHeader, v1A+",t="+t0)},
		{name: "accepts upper-case hex", edit: set(StripeHeader, "t="+t0+",v1="+strings.ToUpper(hexA))},
		{name: "tolerates spaces around elements", edit: set(StripeHeader, "t="+t0+" , "+v1A)},
		{name: "accepts a timestamp exactly 300 s old", now: clock.Add(300 * time.Second)},
		{name: "accepts a timestamp exactly 300 s ahead", now: clock.Add(-300 * time.Second)},
		{name: "rejects a timestamp older than 300 s", now: clock.Add(301 * time.Second), reason: ReasonTimestamp},
		{name: "rejects a timestamp more than 300 s ahead", now: clock.Add(-301 * time.Second), reason: ReasonTimestamp},
		{name: "rejects a delivery whose timestamp was moved by a second", reason: ReasonNoMatch,
			edit: set(StripeHeader, "t="+strconv.FormatInt(clock.Unix()+1, 10)+","+v1A)},
		{name: "rejects a header without a timestamp", reason: ReasonMalformedHeader, edit: set(StripeHeader, v1A)},
		{name: "rejects a repeated timestamp", reason: ReasonMalformedHeader, edit: set(StripeHeader, "t="+t0+",t="+t0+","+v1A)},
		{name: "rejects a timestamp with a leading zero", reason: ReasonMalformedHeader, edit: set(StripeHeader, "t=0"+t0+","+v1A)},
		{name: "rejects a signed timestamp", reason: ReasonMalformedHeader, edit: set(StripeHeader, "t=+"+t0+","+v1A)},
		{name: "rejects a timestamp in milliseconds as out of tolerance", reason: ReasonTimestamp,
			edit: set(StripeHeader, "t="+t0+"000,"+v1A)},
		{name: "rejects a v1 one hex digit short", reason: ReasonMalformedHeader, edit: set(StripeHeader, sigA[:len(sigA)-1])},
		{name: "rejects a v1 with a non-hex digit", reason: ReasonMalformedHeader, edit: set(StripeHeader, sigA[:len(sigA)-1]+"g")},
		{name: "rejects an element that is not key=value", reason: ReasonMalformedHeader, edit: set(StripeHeader, sigA+",v1")},
		{name: "rejects a trailing comma", reason: ReasonMalformedHeader, edit: set(StripeHeader, sigA+",")},
		{name: "rejects a header with only a timestamp as unsigned", reason: ReasonNoMatch, edit: set(StripeHeader, "t="+t0)},
		{name: "rejects nine v1 signatures", reason: ReasonMalformedHeader,
			edit: set(StripeHeader, "t="+t0+strings.Repeat(","+v1B, 8)+","+v1A)},
	}...)
	runVerifyCases(t, s, cases)
}

func TestStripeToleranceIsConfigurable(t *testing.T) {
	t.Parallel()
	s := mustNew(t, Stripe, Options{Tolerance: 10 * time.Second})
	runVerifyCases(t, s, []verifyCase{
		{name: "accepts a delivery 10 s old", now: clock.Add(10 * time.Second)},
		{name: "rejects a delivery 11 s old", now: clock.Add(11 * time.Second), reason: ReasonTimestamp},
		{name: "rejects a delivery 11 s ahead", now: clock.Add(-11 * time.Second), reason: ReasonTimestamp},
	})
}

func TestStandardWebhooksVerify(t *testing.T) {
	t.Parallel()
	s := mustNew(t, StandardWebhooks, Options{})
	body := []byte(testBody)
	sigA := sigOf(t, s, StandardSignatureHeader, secretA, body, clock)
	sigB := sigOf(t, s, StandardSignatureHeader, secretB, body, clock)
	bareA := strings.TrimPrefix(secretA, StandardSecretPrefix)
	cases := append(commonCases(StandardSignatureHeader), []verifyCase{
		{name: "accepts a list of v1 signatures of which only the second matches", edit: set(StandardSignatureHeader, sigB+" "+sigA)},
		{name: "accepts the matching v1 after an asymmetric v1a", edit: set(StandardSignatureHeader,
			"v1a,"+base64.StdEncoding.EncodeToString(make([]byte, 64))+" "+sigA)},
		{name: "skips versions it does not know", edit: set(StandardSignatureHeader, "v2,whatever "+sigA)},
		{name: "tolerates several spaces between signatures", edit: set(StandardSignatureHeader, "  "+sigB+"   "+sigA+" ")},
		{name: "ignores a v1a even when it carries the right MAC", reason: ReasonNoMatch,
			edit: set(StandardSignatureHeader, "v1a,"+strings.TrimPrefix(sigA, "v1,"))},
		{name: "accepts a bare base64 secret", secrets: []string{bareA}},
		{name: "refuses a secret that is not base64", secrets: []string{secretA, "whsec_not*base64"}, invalid: "secrets[1]"},
		{name: "rejects a delivery without a message id", reason: ReasonMissingHeader,
			edit: func(h http.Header, b []byte) []byte { h.Del(StandardIDHeader); return b }},
		{name: "rejects a delivery without a timestamp", reason: ReasonMissingHeader,
			edit: func(h http.Header, b []byte) []byte { h.Del(StandardTimestampHeader); return b }},
		{name: "rejects a delivery whose message id was changed", reason: ReasonNoMatch, edit: set(StandardIDHeader, "msg_other")},
		{name: "rejects a delivery whose timestamp was moved by a second", reason: ReasonNoMatch,
			edit: set(StandardTimestampHeader, strconv.FormatInt(clock.Unix()+1, 10))},
		{name: "rejects a timestamp that is not whole seconds", reason: ReasonMalformedHeader,
			edit: edit(StandardTimestampHeader, func(v string) string { return v + ".5" })},
		{name: "rejects a timestamp with a leading zero", reason: ReasonMalformedHeader,
			edit: edit(StandardTimestampHeader, func(v string) string { return "0" + v })},
		{name: "accepts a timestamp exactly 5 minutes old", now: clock.Add(5 * time.Minute)},
		{name: "rejects a timestamp older than 5 minutes", now: clock.Add(5*time.Minute + time.Second), reason: ReasonTimestamp},
		{name: "rejects a timestamp more than 5 minutes ahead", now: clock.Add(-5*time.Minute - time.Second), reason: ReasonTimestamp},
		{name: "rejects a signature without its version", reason: ReasonMalformedHeader,
			edit: set(StandardSignatureHeader, strings.TrimPrefix(sigA, "v1,"))},
		{name: "rejects a v1 that is hex rather than base64", reason: ReasonMalformedHeader,
			edit: set(StandardSignatureHeader, "v1,"+strings.Repeat("ab", 32))},
		{name: "rejects a v1 without its padding", reason: ReasonMalformedHeader,
			edit: set(StandardSignatureHeader, strings.TrimSuffix(sigA, "="))},
		{name: "rejects a v1 whose padding bits are not zero", reason: ReasonMalformedHeader,
			edit: set(StandardSignatureHeader, flipPaddingBits(sigA))},
		{name: "rejects a list with only other versions as unsigned", reason: ReasonNoMatch,
			edit: set(StandardSignatureHeader, "v2,abc v1a,def")},
		{name: "rejects nine v1 signatures", reason: ReasonMalformedHeader,
			edit: set(StandardSignatureHeader, strings.Repeat(sigB+" ", 8)+sigA)},
	}...)
	runVerifyCases(t, s, cases)
}

// flipPaddingBits changes the base64 character before "=" so that it decodes to the same bytes
// under a lax decoder but has non-zero padding bits.
func flipPaddingBits(sig string) string {
	i := len(sig) - 2
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	return sig[:i] + string(alphabet[strings.IndexByte(alphabet, sig[i])^1]) + sig[i+1:]
}

func TestGitHubVerify(t *testing.T) {
	t.Parallel()
	s := mustNew(t, GitHub, Options{})
	sigA := sigOf(t, s, GitHubHeader, secretA, []byte(testBody), clock)
	cases := append(commonCases(GitHubHeader), []verifyCase{
		{name: "does not care about the time", now: time.Unix(0, 0)},
		{name: "accepts upper-case hex", edit: set(GitHubHeader, "sha256="+strings.ToUpper(strings.TrimPrefix(sigA, "sha256=")))},
		{name: "does not fall back to the legacy SHA-1 header", reason: ReasonMissingHeader,
			edit: func(h http.Header, b []byte) []byte {
				h.Del(GitHubHeader)
				h.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(refMAC([]byte(secretA), b)[:20]))
				return b
			}},
		{name: "rejects the digest without its sha256= prefix", reason: ReasonMalformedHeader,
			edit: set(GitHubHeader, strings.TrimPrefix(sigA, "sha256="))},
		{name: "rejects a sha1= prefix", reason: ReasonMalformedHeader,
			edit: set(GitHubHeader, "sha1="+strings.TrimPrefix(sigA, "sha256="))},
		{name: "rejects a digest one hex digit short", reason: ReasonMalformedHeader, edit: set(GitHubHeader, sigA[:len(sigA)-1])},
		{name: "rejects a second signature in the value", reason: ReasonMalformedHeader, edit: set(GitHubHeader, sigA+","+sigA)},
	}...)
	runVerifyCases(t, s, cases)
}

func TestShopifyVerify(t *testing.T) {
	t.Parallel()
	s := mustNew(t, Shopify, Options{})
	sigA := sigOf(t, s, ShopifyHeader, secretA, []byte(testBody), clock)
	cases := append(commonCases(ShopifyHeader), []verifyCase{
		{name: "reads the header however the sender cased it", edit: func(h http.Header, b []byte) []byte {
			v := h.Get(ShopifyHeader)
			h.Del(ShopifyHeader)
			h.Set("X-Shopify-Hmac-SHA256", v) // Set canonicalises, as net/http does for requests
			return b
		}},
		{name: "rejects a hex digest", reason: ReasonMalformedHeader,
			edit: set(ShopifyHeader, hex.EncodeToString(refMAC([]byte(secretA), []byte(testBody))))},
		{name: "rejects base64 without padding", reason: ReasonMalformedHeader, edit: set(ShopifyHeader, strings.TrimSuffix(sigA, "="))},
		{name: "rejects URL-safe base64", reason: ReasonMalformedHeader,
			edit: set(ShopifyHeader, base64.URLEncoding.EncodeToString(append([]byte{0xfb, 0xff}, make([]byte, 30)...)))},
	}...)
	runVerifyCases(t, s, cases)
}

func TestGenericVerify(t *testing.T) {
	t.Parallel()
	t.Run("with a prefix and hex", func(t *testing.T) {
		t.Parallel()
		s := mustNew(t, HMACSHA256, Options{Header: "x-acme-signature", Prefix: "sha256="})
		sigA := sigOf(t, s, "X-Acme-Signature", secretA, []byte(testBody), clock)
		if !strings.HasPrefix(sigA, "sha256=") || len(sigA) != len("sha256=")+64 {
			t.Fatalf("Sign set %q, want sha256=<64 hex digits>", sigA)
		}
		runVerifyCases(t, s, append(commonCases("X-Acme-Signature"), []verifyCase{
			{name: "rejects the digest without the prefix", reason: ReasonMalformedHeader,
				edit: set("X-Acme-Signature", strings.TrimPrefix(sigA, "sha256="))},
		}...))
	})
	t.Run("with base64 and no prefix", func(t *testing.T) {
		t.Parallel()
		s := mustNew(t, HMACSHA256, Options{Header: "X-Signature", Encoding: EncodingBase64})
		sigA := sigOf(t, s, "X-Signature", secretA, []byte(testBody), clock)
		runVerifyCases(t, s, append(commonCases("X-Signature"), []verifyCase{
			{name: "rejects a hex digest", reason: ReasonMalformedHeader,
				edit: set("X-Signature", hex.EncodeToString(refMAC([]byte(secretA), []byte(testBody))))},
			{name: "rejects a prefix it was not configured with", reason: ReasonMalformedHeader,
				edit: set("X-Signature", "sha256="+sigA)},
		}...))
	})
}

func TestSignThenVerifyRoundTripsForEveryScheme(t *testing.T) {
	t.Parallel()
	schemes := map[string]Options{
		StandardWebhooks: {}, Stripe: {}, GitHub: {}, Shopify: {},
		HMACSHA256: {Header: "X-Signature", Encoding: EncodingBase64, Prefix: "v1:"},
	}
	bodies := map[string][]byte{"empty": nil, "json": []byte(testBody), "binary": make([]byte, 4096)}
	if _, err := rand.Read(bodies["binary"]); err != nil {
		t.Fatal(err)
	}
	for name, opts := range schemes {
		for kind, body := range bodies {
			t.Run(name+" verifies its own signature over a "+kind+" body", func(t *testing.T) {
				t.Parallel()
				s := mustNew(t, name, opts)
				if s.Name() != name {
					t.Fatalf("Name() = %q, want %q", s.Name(), name)
				}
				h := http.Header{}
				if err := s.Sign(h, body, secretB, "msg_roundtrip", clock); err != nil {
					t.Fatal(err)
				}
				if err := s.Verify(h, body, []string{secretA, secretB}, clock); err != nil {
					t.Fatalf("Verify(Sign(...)) = %v; headers %v", err, h)
				}
				if err := s.Verify(h, append(body, 0), []string{secretA, secretB}, clock); err == nil {
					t.Fatal("Verify accepted the signature over a longer body")
				}
			})
		}
	}
}

func TestSignRefusesWhatItCannotSign(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, scheme, secret, id string
		at                       time.Time
		field                    string
	}{
		{"Standard Webhooks needs a message id", StandardWebhooks, secretA, "", clock, "id"},
		{"Standard Webhooks needs a base64 secret", StandardWebhooks, "whsec_%%%", "msg_1", clock, "secret"},
		{"Standard Webhooks cannot sign a time before 1970", StandardWebhooks, secretA, "msg_1", time.Unix(-1, 0), "now"},
		{"Stripe cannot sign a time before 1970", Stripe, secretA, "", time.Unix(-1, 0), "now"},
		{"Stripe needs a secret", Stripe, "", "", clock, "secret"},
		{"GitHub needs a secret", GitHub, "", "", clock, "secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			err := mustNew(t, c.scheme, Options{}).Sign(h, []byte(testBody), c.secret, c.id, c.at)
			wantInvalid(t, err, c.field)
			if len(h) != 0 {
				t.Fatalf("Sign failed but set %v", h)
			}
		})
	}
}

func TestVerifyIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	for _, name := range []string{StandardWebhooks, Stripe, GitHub} {
		s := mustNew(t, name, Options{})
		good, bad := http.Header{}, http.Header{}
		if err := s.Sign(good, []byte(testBody), secretA, "msg_1", clock); err != nil {
			t.Fatal(err)
		}
		if err := s.Sign(bad, []byte(testBody), secretB, "msg_1", clock); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					h, want := good, true
					if (g+i)%2 == 1 {
						h, want = bad, false
					}
					if err := s.Verify(h, []byte(testBody), []string{secretA}, clock); (err == nil) != want {
						t.Errorf("%s: concurrent Verify = %v, want accepted=%v", name, err, want)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

func TestNilHeadersNeverPanic(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]Options{
		StandardWebhooks: {}, Stripe: {}, GitHub: {}, Shopify: {}, HMACSHA256: {Header: "X-Sig"},
	} {
		t.Run(name+" rejects a request without headers and refuses to sign into a nil map", func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, name, opts)
			wantReason(t, s.Verify(nil, nil, []string{secretA}, clock), name, ReasonMissingHeader)
			wantInvalid(t, s.Sign(nil, nil, secretA, "msg_1", clock), "h")
		})
	}
}
