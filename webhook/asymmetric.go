package webhook

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
)

// Discord and SendGrid sign with a private key and publish the public one, so a receiver holds
// nothing secret: Verify's secrets are the provider's public keys, and Sign's secret (for tests)
// is a private key.
//
//   - Discord: X-Signature-Ed25519: hex(Ed25519(timestamp + body)), X-Signature-Timestamp;
//     the application's public key in hex, 32 bytes
//     (https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers).
//     Sign takes the private key's 32-byte seed in hex.
//   - SendGrid's signed Event Webhook: X-Twilio-Email-Event-Webhook-Signature: base64(DER
//     ECDSA P-256 signature of SHA-256(timestamp + body)),
//     X-Twilio-Email-Event-Webhook-Timestamp; the public key is base64 DER (SubjectPublicKeyInfo),
//     as SendGrid shows it
//     (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features).
//     Sign takes a base64 DER PKCS #8 private key.

// The headers of the public-key schemes, in net/http's canonical form.
const (
	DiscordSignatureHeader  = "X-Signature-Ed25519"
	DiscordTimestampHeader  = "X-Signature-Timestamp"
	SendGridSignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	SendGridTimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// PublicKeyScheme is a Scheme whose provider signs with a private key (Discord, SendGrid):
// the secrets Verify and CheckSecrets take are its public keys, which need not be kept secret.
type PublicKeyScheme interface {
	Scheme
	// PublicKeys reports that the scheme's keys are public ones; it always returns true.
	PublicKeys() bool
}

// publicKeyScheme is a timestamped scheme whose keyring holds public keys (ring.public): it
// verifies with verifyPublic and signs with signPublic instead of an HMAC.
type publicKeyScheme struct{ *timestamped }

func (s *publicKeyScheme) PublicKeys() bool { return true }

// maxSignatureLen bounds the signature header: an Ed25519 signature is 128 hex digits, a DER
// P-256 ECDSA one at most 72 bytes (96 base64 characters).
const maxSignatureLen = 128

// verifyPublic reports whether one of keys (all checked) signed ts + body with sig.
func (s *timestamped) verifyPublic(sig, ts string, body []byte, keys []string) error {
	if len(sig) > maxSignatureLen {
		return s.reject(ReasonMalformedHeader, s.sigHeader, "the signature is too long")
	}
	msg := append([]byte(ts), body...)
	switch s.name {
	case Discord:
		raw, err := hex.DecodeString(sig)
		if err != nil || len(raw) != ed25519.SignatureSize {
			return s.reject(ReasonMalformedHeader, s.sigHeader, "the signature is not 128 hex digits")
		}
		for _, k := range keys {
			if ed25519.Verify(s.ring.get(k).pub.(ed25519.PublicKey), msg, raw) {
				return nil
			}
		}
	case SendGrid:
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(raw) == 0 {
			return s.reject(ReasonMalformedHeader, s.sigHeader, "the signature is not base64")
		}
		sum := sha256.Sum256(msg)
		for _, k := range keys {
			if ecdsa.VerifyASN1(s.ring.get(k).pub.(*ecdsa.PublicKey), sum[:], raw) {
				return nil
			}
		}
	}
	return s.reject(ReasonNoMatch, s.sigHeader, "")
}

// signPublic signs ts + body with privateKey, for Sign.
func (s *timestamped) signPublic(privateKey, ts string, body []byte) (string, error) {
	msg := append([]byte(ts), body...)
	if s.name == Discord {
		seed, err := hex.DecodeString(privateKey)
		if err != nil || len(seed) != ed25519.SeedSize {
			return "", &InvalidError{Scheme: s.name, Field: "secret", Reason: "want the Ed25519 private key's 32-byte seed in hex"}
		}
		return hex.EncodeToString(ed25519.Sign(ed25519.NewKeyFromSeed(seed), msg)), nil
	}
	der, err := base64.StdEncoding.DecodeString(privateKey)
	var key any
	if err == nil {
		key, err = x509.ParsePKCS8PrivateKey(der)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if err != nil || !ok {
		return "", &InvalidError{Scheme: s.name, Field: "secret", Reason: "want an ECDSA private key as base64 DER PKCS #8"}
	}
	sum := sha256.Sum256(msg)
	der, err = ecdsa.SignASN1(rand.Reader, ec, sum[:])
	return base64.StdEncoding.EncodeToString(der), err
}

// Challenge acknowledges Discord's webhook-event PING (type 0), which Discord sends to prove
// the endpoint and expects answered with 204 and no body: the answer is empty, of no content
// type.
func (s *publicKeyScheme) Challenge(_ http.Header, body []byte, _ []string) ([]byte, string, bool) {
	var p struct{ Version, Type *int }
	ok := s.name == Discord && control(body, `"version"`, &p) && p.Version != nil && p.Type != nil && *p.Type == 0
	return nil, "", ok
}

func parseEd25519Public(s string) (any, error) {
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("the public key is not 32 bytes in hex (the application's public key, as Discord shows it)")
	}
	return ed25519.PublicKey(raw), nil
}

func parseECDSAPublic(s string) (any, error) {
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("the public key is not base64 (the verification key, as SendGrid shows it)")
	}
	key, err := x509.ParsePKIXPublicKey(der)
	ec, ok := key.(*ecdsa.PublicKey)
	if err != nil || !ok {
		return nil, errors.New("the public key is not a DER ECDSA public key")
	}
	return ec, nil
}
