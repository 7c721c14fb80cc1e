package webhook

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Twilio and Square sign the URL they called, so the receiver must know it exactly as the
// provider had it configured (scheme, host, path and query string):
//
//   - Square: X-Square-Hmacsha256-Signature: base64(HMAC-SHA256(key, notification URL + body))
//     (https://developer.squareup.com/docs/webhooks/step3validate).
//   - Twilio: X-Twilio-Signature: base64(HMAC-SHA1(auth token, URL + each form parameter's name
//     and value, sorted by name)). A JSON body is not in the MAC: the URL carries its hex
//     SHA-256 as the bodySHA256 query parameter, which is
//     (https://www.twilio.com/docs/usage/security#validating-requests). As Twilio's SDKs do, the
//     URL is tried as given and with its default port added or removed, since which form
//     Twilio signed depends on how the URL was configured.

// The headers of the URL-signing schemes, in net/http's canonical form.
const (
	TwilioHeader = "X-Twilio-Signature"
	SquareHeader = "X-Square-Hmacsha256-Signature"
)

// URLVerifier is a Scheme whose signature covers the URL the provider called (Twilio,
// Square). Its Verify and Sign use Options.URL; VerifyURL and SignURL take the URL per call,
// for a receiver that reconstructs it from each request.
type URLVerifier interface {
	Scheme
	// VerifyURL is Verify for a delivery POSTed to rawURL (absolute, with its query string, as
	// configured at the provider). A rawURL that is not an absolute http(s) URL is a
	// *SignatureError (ReasonMalformedHeader, "Host"): a receiver rebuilds it from the request.
	VerifyURL(rawURL string, h http.Header, body []byte, secrets []string, now time.Time) error
	// SignURL is Sign for a delivery POSTed to rawURL.
	SignURL(rawURL string, h http.Header, body []byte, secret, id string, now time.Time) error
}

type urlScheme struct {
	base
	header string
	url    string // Options.URL
}

func newURLScheme(name, rawURL string) (*urlScheme, error) {
	s := &urlScheme{base: base{name: name, ring: newKeyring(name)}, url: rawURL}
	switch name {
	case Twilio:
		s.header = TwilioHeader
		s.ring.hmacSHA1()
	case Square:
		s.header = SquareHeader
		s.ring.sep = ""
	}
	if rawURL != "" {
		if _, err := parseSignedURL(rawURL); err != nil {
			return nil, &InvalidError{Scheme: name, Field: "URL", Reason: err.Error()}
		}
	}
	return s, nil
}

// parseSignedURL accepts an absolute http(s) URL.
func parseSignedURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" || u.User != nil ||
		!strings.HasPrefix(rawURL, u.Scheme+"://") {
		return nil, errors.New("must be an absolute http or https URL (lower-case scheme, no user or fragment)")
	}
	return u, nil
}

func (s *urlScheme) Verify(h http.Header, body []byte, secrets []string, now time.Time) error {
	if s.url == "" {
		return s.noURL()
	}
	return s.VerifyURL(s.url, h, body, secrets, now)
}

func (s *urlScheme) Sign(h http.Header, body []byte, secret, id string, now time.Time) error {
	if s.url == "" {
		return s.noURL()
	}
	return s.SignURL(s.url, h, body, secret, id, now)
}

func (s *urlScheme) noURL() error {
	return &InvalidError{Scheme: s.name, Field: "URL", Reason: s.name + " signs the URL it calls: set Options.URL, or call VerifyURL and SignURL"}
}

// badURL rejects a delivery sent to rawURL, rebuilt from the request (its Host header): the
// sender's fault.
func (s *urlScheme) badURL() error {
	return s.reject(ReasonMalformedHeader, "Host", "the URL the delivery was sent to is not an absolute http(s) URL")
}

func (s *urlScheme) VerifyURL(rawURL string, h http.Header, body []byte, secrets []string, _ time.Time) error {
	if err := s.ring.check(secrets); err != nil {
		return err
	}
	var u *url.URL
	if rawURL != s.url || s.name == Twilio { // Options.URL was checked by New; Square needs no parts
		var err error
		if u, err = parseSignedURL(rawURL); err != nil {
			return s.badURL()
		}
	}
	v, err := s.readHeader(h, s.header)
	if err != nil {
		return err
	}
	var sigs signatures
	if !decodeDigest(v, true, sigs.sig[0][:s.ring.size]) {
		return s.reject(ReasonMalformedHeader, s.header, "the signature is not a base64 "+digestName(s.ring.size)+" digest")
	}
	sigs.n = 1
	if s.name == Square {
		return s.match(s.header, "", secrets, &sigs, body, rawURL)
	}
	params, detail := twilioParams(u, body)
	if detail != "" {
		return s.reject(ReasonMalformedBody, "", detail)
	}
	for _, candidate := range portForms(rawURL, u) {
		if s.ring.anySecret(secrets, &sigs, twilioMessage(candidate, params)) {
			return nil
		}
	}
	return s.reject(ReasonNoMatch, s.header, "")
}

func (s *urlScheme) SignURL(rawURL string, h http.Header, body []byte, secret, _ string, _ time.Time) error {
	if h == nil {
		return s.nilHeader()
	}
	u, err := parseSignedURL(rawURL)
	if err != nil {
		return &InvalidError{Scheme: s.name, Field: "url", Reason: err.Error()}
	}
	var sum [sha256.Size]byte
	if s.name == Square {
		sum, err = s.ring.sign(secret, body, rawURL)
	} else {
		params, detail := twilioParams(u, body)
		if detail != "" {
			return &InvalidError{Scheme: s.name, Field: "body", Reason: detail}
		}
		sum, err = s.ring.sign(secret, twilioMessage(rawURL, params))
	}
	if err != nil {
		return err
	}
	h.Set(s.header, encodeDigest(sum[:s.ring.size], true))
	return nil
}

// twilioParams returns the form parameters Twilio signed: none when the URL carries
// bodySHA256 (a JSON body, checked against it here), else the body's form fields.
func twilioParams(u *url.URL, body []byte) (url.Values, string) {
	q, err := url.ParseQuery(u.RawQuery)
	if err == nil {
		if sums := q["bodySHA256"]; len(sums) > 0 {
			want, err := hex.DecodeString(sums[0])
			got := sha256.Sum256(body)
			if err != nil || len(sums) > 1 || subtle.ConstantTimeCompare(want, got[:]) != 1 {
				return nil, "the body's SHA-256 is not the URL's bodySHA256"
			}
			return nil, ""
		}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, "the body is not form-encoded"
	}
	return form, ""
}

// twilioMessage is what Twilio signs: the URL, then every parameter name followed by its value,
// by name and, for a repeated name, by value (twilio-python's RequestValidator).
func twilioMessage(rawURL string, params url.Values) []byte {
	var b strings.Builder
	b.WriteString(rawURL)
	for _, k := range slices.Sorted(maps.Keys(params)) {
		vs := slices.Clone(params[k])
		slices.Sort(vs)
		for _, v := range slices.Compact(vs) {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	return []byte(b.String())
}

// portForms returns the URL as given, then without its port if it has one, else with the
// scheme's default port (the rest byte for byte), as Twilio's SDKs try them: Twilio signs the
// form its configuration holds, which a proxy or API Gateway may not preserve.
func portForms(rawURL string, u *url.URL) []string {
	start := len(u.Scheme) + len("://")
	end := start + strings.IndexAny(rawURL[start:]+"/", "/?")
	host := rawURL[start:end]
	alt := host + ":" + map[string]string{"https": "443", "http": "80"}[u.Scheme]
	if u.Port() != "" {
		alt = host[:strings.LastIndexByte(host, ':')]
	}
	return []string{rawURL, rawURL[:start] + alt + rawURL[end:]}
}
