package webhook

import (
	"crypto/sha256"
	"encoding/base64"
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

// maxHeaderLen bounds the signature headers we parse. Real ones are under 300 bytes.
const maxHeaderLen = 4096

// header returns the single value of the canonical header key, or a rejection reason and detail.
func header(h http.Header, key string) (v, reason, detail string) {
	vs := h[key]
	switch {
	case len(vs) == 0 || (len(vs) == 1 && vs[0] == ""):
		return "", ReasonMissingHeader, ""
	case len(vs) > 1:
		return "", ReasonMalformedHeader, "the header is repeated"
	case len(vs[0]) > maxHeaderLen:
		return "", ReasonMalformedHeader, "the header is too long"
	}
	return vs[0], "", ""
}

// parseUnix parses a canonical decimal Unix timestamp in seconds: digits only, no sign, no
// leading zero, at most 18 digits (so it cannot overflow).
func parseUnix(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// timestampDetail returns "" when the signed time ts is within tolerance of now (both ways), or
// why it is not.
func timestampDetail(ts int64, now time.Time, tolerance time.Duration) string {
	d := now.Sub(time.Unix(ts, 0)) // saturates instead of overflowing
	switch {
	case d > tolerance:
		return "the signed timestamp is older than the tolerance"
	case d < -tolerance:
		return "the signed timestamp is further in the future than the tolerance"
	}
	return ""
}

// decodeHex decodes exactly 2*len(dst) hex digits (either case) into dst: 64 for a SHA-256
// digest, 40 for SHA-1.
func decodeHex(s string, dst []byte) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := fromHex(s[2*i])
		lo, ok2 := fromHex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// b64 is standard padded base64 that also refuses non-zero padding bits, so each 32-byte value
// has exactly one encoding.
var b64 = base64.StdEncoding.Strict()

// b64Len is the length of a padded base64 SHA-256 digest, the longest we decode.
const b64Len = (sha256.Size + 2) / 3 * 4

// decodeBase64 decodes exactly one padded standard-base64 digest of len(dst) bytes (44
// characters for SHA-256, 28 for SHA-1) into dst.
func decodeBase64(s string, dst []byte) bool {
	if len(s) != (len(dst)+2)/3*4 || len(s) > b64Len {
		return false
	}
	var src [b64Len]byte
	n := copy(src[:], s)
	var out [sha256.Size + 1]byte
	m, err := b64.Decode(out[:], src[:n])
	if err != nil || m != len(dst) {
		return false // also catches '\r' and '\n', which the decoder skips
	}
	copy(dst, out[:m])
	return true
}

// trimSpace trims the optional whitespace (space, tab) HTTP allows around list elements.
func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
