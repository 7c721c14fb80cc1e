package webhook

import (
	"bytes"
	"net/http"
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
