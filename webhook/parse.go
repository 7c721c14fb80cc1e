package webhook

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"
)

// Parsing is strict and allocation-free: headers are read by their canonical key straight from
// the map, values are cut with strings.Cut (substrings, no copies), and signatures are decoded
// into fixed arrays. Strict means one form per value: a repeated header, a timestamp with a sign
// or a leading zero, a signature of the wrong length, alphabet or padding are all malformed.
// None of this is needed for security (a forger still needs the MAC), but a single form per value
// means that what we verify is exactly what the provider's own libraries verify.

// base is what every scheme has: its name, the tolerance of its signed time, and its keys.
type base struct {
	name      string
	tolerance time.Duration
	ring      *keyring
}

func (s *base) Name() string { return s.name }

func (s *base) checkSecrets(secrets []string) error { return s.ring.check(secrets) }

func (s *base) reject(reason, header, detail string) error {
	return &SignatureError{Scheme: s.name, Reason: reason, Header: header, Detail: detail}
}

// maxHeaderLen bounds the signature headers we parse. Real ones are under 300 bytes.
const maxHeaderLen = 4096

// readHeader returns the single value of the canonical header key.
func (s *base) readHeader(h http.Header, key string) (string, error) {
	vs := h[key]
	switch {
	case len(vs) == 0 || (len(vs) == 1 && vs[0] == ""):
		return "", s.reject(ReasonMissingHeader, key, "")
	case len(vs) > 1:
		return "", s.reject(ReasonMalformedHeader, key, "the header is repeated")
	case len(vs[0]) > maxHeaderLen:
		return "", s.reject(ReasonMalformedHeader, key, "the header is too long")
	}
	return vs[0], nil
}

// checkTime holds the signed time unix, read from header at (ok false when it did not parse),
// to the tolerance, both ways.
func (s *base) checkTime(at string, unix int64, ok bool, now time.Time) error {
	if !ok {
		return s.reject(ReasonMalformedHeader, at, "the timestamp is not of the scheme's form")
	}
	switch d := now.Sub(time.Unix(unix, 0)); { // Sub saturates instead of overflowing
	case d > s.tolerance:
		return s.reject(ReasonTimestamp, at, "the signed timestamp is older than the tolerance")
	case d < -s.tolerance:
		return s.reject(ReasonTimestamp, at, "the signed timestamp is further in the future than the tolerance")
	}
	return nil
}

// match rejects the delivery, whose signature header is at, unless one of secrets (all
// checked) signed fields and body with one of sigs, the header's signatures of version.
func (s *base) match(at, version string, secrets []string, sigs *signatures, body []byte, fields ...string) error {
	if sigs.n == 0 {
		return s.reject(ReasonNoMatch, at, "there is no "+version+" signature")
	}
	if !s.ring.anySecret(secrets, sigs, body, fields...) {
		return s.reject(ReasonNoMatch, at, "")
	}
	return nil
}

func (s *base) nilHeader() error {
	return &InvalidError{Scheme: s.name, Field: "h", Reason: "the header map is nil"}
}

// parseUnix parses a canonical decimal Unix timestamp in seconds: digits only, no sign, no
// leading zero, at most 18 digits (so it cannot overflow).
func parseUnix(s string) (int64, bool) {
	if len(s) > 18 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64) // refuses a sign, and "_" in base 10
	return int64(n), err == nil
}

// b64 is standard padded base64 that also refuses non-zero padding bits, so each 32-byte value
// has exactly one encoding.
var b64 = base64.StdEncoding.Strict()

// decodeDigest decodes exactly one digest of len(dst) bytes into dst: hex (either case; 64
// digits for SHA-256, 40 for SHA-1) or padded standard base64 (44 and 28 characters).
func decodeDigest(s string, isBase64 bool, dst []byte) bool {
	want := 2 * len(dst)
	if isBase64 {
		want = (len(dst) + 2) / 3 * 4
	}
	if len(s) != want || len(dst) > sha256.Size {
		return false
	}
	var src [2 * sha256.Size]byte // on the stack: a string converted to []byte would escape
	n := copy(src[:], s)
	var out [sha256.Size + 1]byte
	if isBase64 {
		m, err := b64.Decode(out[:], src[:n])
		// m also catches '\r' and '\n', which the decoder skips
		return err == nil && m == len(dst) && copy(dst, out[:m]) == m
	}
	_, err := hex.Decode(dst, src[:n])
	return err == nil
}

// encodeDigest encodes sum as decodeDigest decodes it.
func encodeDigest(sum []byte, isBase64 bool) string {
	if isBase64 {
		return base64.StdEncoding.EncodeToString(sum)
	}
	return hex.EncodeToString(sum)
}
