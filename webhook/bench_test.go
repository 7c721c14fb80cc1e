package webhook

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// benchSchemes are the schemes as the receiver configures them.
var benchSchemes = []struct {
	name string
	opts Options
}{
	{StandardWebhooks, Options{}},
	{Stripe, Options{}},
	{GitHub, Options{}},
	{Shopify, Options{}},
	{HMACSHA256, Options{Header: "X-Signature", Prefix: "sha256="}},
	{Svix, Options{}},
	{Slack, Options{}},
	{Paddle, Options{}},
	{PagerDuty, Options{}},
	{Linear, Options{}},
	{Twitch, Options{}},
	{Zoom, Options{}},
	{Intercom, Options{}},
	{Square, Options{URL: "https://hooks.example.com/hooks/square"}},
}

// benchmarkVerify verifies one signed 2 KB delivery per iteration, as the receiver's hot path
// does, with secrets configured and the signing secret last.
func benchmarkVerify(b *testing.B, secrets []string) {
	body := bytes.Repeat([]byte(`{"k":"0123456789abcdef"},`), 2048/25+1)[:2048]
	for _, bs := range benchSchemes {
		b.Run(bs.name, func(b *testing.B) {
			s := mustNew(b, bs.name, bs.opts)
			h := http.Header{}
			if err := s.Sign(h, body, secrets[len(secrets)-1], "msg_2mN8s0AbQ7", clock); err != nil {
				b.Fatal(err)
			}
			if err := CheckSecrets(s, secrets); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Verify(h, body, secrets, clock); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkVerify2KB(b *testing.B) { benchmarkVerify(b, []string{secretA}) }

func BenchmarkVerify2KBRotatingSecrets(b *testing.B) { benchmarkVerify(b, []string{secretB, secretA}) }

func BenchmarkRejectForged2KB(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 2048)
	s := mustNew(b, Stripe, Options{})
	h := http.Header{}
	if err := s.Sign(h, body, secretB, "", clock); err != nil {
		b.Fatal(err)
	}
	secrets := []string{secretA}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Verify(h, body, secrets, clock); err == nil {
			b.Fatal("accepted a forgery")
		}
	}
}

// BenchmarkVerifyShapes2KB: the schemes whose cost is not one HMAC over the body: Twilio parses
// and sorts a 2 KB form, Discord verifies Ed25519, SendGrid ECDSA P-256.
func BenchmarkVerifyShapes2KB(b *testing.B) {
	form := url.Values{}
	for i := 0; len(form.Encode()) < 2048; i++ {
		form.Set("Field"+strings.Repeat("x", i%7)+string(rune('A'+i%26))+string(rune('a'+i/26)), "value+with%26escapes")
	}
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	priv, _ := x509.MarshalPKCS8PrivateKey(k)
	json := bytes.Repeat([]byte(`{"k":"0123456789abcdef"},`), 2048/25+1)[:2048]
	for _, c := range []struct {
		name       string
		opts       Options
		body       []byte
		sign, keys string
	}{
		{Twilio, Options{URL: "https://hooks.example.com/hooks/twilio?tenant=acme"}, []byte(form.Encode()), secretA, secretA},
		{Discord, Options{}, json, "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"},
		{SendGrid, Options{}, json, base64.StdEncoding.EncodeToString(priv), base64.StdEncoding.EncodeToString(pub)},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := mustNew(b, c.name, c.opts)
			h := http.Header{}
			if err := s.Sign(h, c.body, c.sign, "", clock); err != nil {
				b.Fatal(err)
			}
			keys := []string{c.keys}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Verify(h, c.body, keys, clock); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
