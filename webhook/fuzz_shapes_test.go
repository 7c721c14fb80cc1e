package webhook

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The fuzz targets of the URL-signing, public-key and SHA-1 schemes, in the manner of
// fuzz_test.go: no panic, every rejection documented, and nothing accepted without the
// signature computed here independently (for ECDSA, whose signatures the fuzzer cannot make,
// nothing accepted but the very message signed).

func FuzzIntercomSignature(f *testing.F) {
	fuzzBodyScheme(f, mustNew(f, Intercom, Options{}), IntercomHeader, "sha1=", EncodingHex,
		"sha1="+strings.Repeat("0", 40), "sha1="+strings.Repeat("0", 64), "sha256="+strings.Repeat("0", 64))
}

func FuzzZoomSignature(f *testing.F) {
	s := mustNew(f, Zoom, Options{})
	body := []byte(testBody)
	h := http.Header{}
	if err := s.Sign(h, body, fuzzSecret, "", clock); err != nil {
		f.Fatal(err)
	}
	f.Add(h.Get(ZoomSignatureHeader), h.Get(ZoomTimestampHeader), body)
	f.Add(h.Get(ZoomSignatureHeader), h.Get(ZoomTimestampHeader)+"000", body)
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		err := s.Verify(http.Header{ZoomSignatureHeader: {sig}, ZoomTimestampHeader: {ts}}, body, []string{fuzzSecret}, clock)
		if err != nil {
			checkRejection(t, err, Zoom)
		} else if want := "v0=" + hex.EncodeToString(refMAC([]byte(fuzzSecret), append([]byte("v0:"+ts+":"), body...))); strings.ToLower(sig) != want {
			t.Fatalf("accepted %q at %q for %q, want %s", sig, ts, body, want)
		}
	})
}

// refTwilio is Twilio's signed string, built the way twilio-python's RequestValidator builds
// it: the URL, then for each parameter name in order, each of its distinct values in order.
func refTwilio(rawURL string, form url.Values) []byte {
	var names []string
	for k := range form {
		names = append(names, k)
	}
	sort.Strings(names)
	b := []byte(rawURL)
	for _, k := range names {
		vs := append([]string(nil), form[k]...)
		sort.Strings(vs)
		for i, v := range vs {
			if i > 0 && vs[i-1] == v {
				continue
			}
			b = append(append(b, k...), v...)
		}
	}
	return b
}

func FuzzTwilioSignature(f *testing.F) {
	s := mustNew(f, Twilio, Options{}).(URLVerifier)
	const u = "https://example.com/myapp.php?foo=1&bar=2"
	form := "CallSid=CA1234567890ABCDE&Caller=%2B14158675310&Digits=1234&From=%2B14158675310&To=%2B18005551212"
	f.Add(u, "L/OH5YylLD5NRKLltdqwSvS0BnU=", []byte(form)) // Twilio's documented example, token 12345
	f.Add("https://example.com:443/myapp.php?foo=1&bar=2", "L/OH5YylLD5NRKLltdqwSvS0BnU=", []byte(form))
	f.Add(u+"&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620", "a9nBmqA0ju/hNViExpshrM61xv4=", []byte(`{"property": "value", "boolean": true}`))
	f.Add("http://[::1]:80/x", "", []byte("a=1&a=1&%zz"))
	f.Fuzz(func(t *testing.T, rawURL, sig string, body []byte) {
		err := s.VerifyURL(rawURL, http.Header{TwilioHeader: {sig}}, body, []string{"12345"}, clock)
		if err != nil {
			checkRejection(t, err, Twilio)
			return
		}
		pu, perr := url.Parse(rawURL)
		if perr != nil {
			t.Fatalf("accepted an unparsable URL %q", rawURL)
		}
		var params url.Values
		if sums := pu.Query()["bodySHA256"]; len(sums) == 1 {
			got := sha256.Sum256(body)
			if sums[0] != hex.EncodeToString(got[:]) && !strings.EqualFold(sums[0], hex.EncodeToString(got[:])) {
				t.Fatalf("accepted a body whose SHA-256 is not the URL's")
			}
		} else if params, perr = url.ParseQuery(string(body)); perr != nil {
			t.Fatalf("accepted a body that is not a form: %q", body)
		}
		for _, candidate := range portForms(rawURL, pu) {
			if sig == base64.StdEncoding.EncodeToString(refMAC1([]byte("12345"), refTwilio(candidate, params))) {
				return
			}
		}
		t.Fatalf("accepted %q for %q %q without its MAC", sig, rawURL, body)
	})
}

func FuzzSquareSignature(f *testing.F) {
	s := mustNew(f, Square, Options{}).(URLVerifier)
	f.Add("https://webhook.site/webhooks", "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U=", []byte(`{"data":{"type":"webhooks","id":">id<"}}`))
	f.Fuzz(func(t *testing.T, rawURL, sig string, body []byte) {
		err := s.VerifyURL(rawURL, http.Header{SquareHeader: {sig}}, body, []string{"signature-key"}, clock)
		if err != nil {
			checkRejection(t, err, Square)
			return
		}
		if want := base64.StdEncoding.EncodeToString(refMAC([]byte("signature-key"), append([]byte(rawURL), body...))); sig != want {
			t.Fatalf("accepted %q for %q %q, want %s", sig, rawURL, body, want)
		}
	})
}

func FuzzDiscordSignature(f *testing.F) {
	s := mustNew(f, Discord, Options{})
	seed, _ := hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60") // RFC 8032 TEST 1
	key := ed25519.NewKeyFromSeed(seed)
	public := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	ts := strconv.FormatInt(clock.Unix(), 10)
	body := []byte(`{"version":1,"application_id":"1","type":0}`)
	f.Add(hex.EncodeToString(ed25519.Sign(key, append([]byte(ts), body...))), ts, body)
	f.Add(strings.Repeat("0", 128), ts, body)
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		err := s.Verify(http.Header{DiscordSignatureHeader: {sig}, DiscordTimestampHeader: {ts}}, body, []string{public}, clock)
		if err != nil {
			checkRejection(t, err, Discord)
			return
		}
		// Ed25519 as Go verifies it is deterministic and not malleable: one signature per message.
		if want := hex.EncodeToString(ed25519.Sign(key, append([]byte(ts), body...))); strings.ToLower(sig) != want {
			t.Fatalf("accepted %q at %q for %q, want %s", sig, ts, body, want)
		}
	})
}

func FuzzSendGridSignature(f *testing.F) {
	s := mustNew(f, SendGrid, Options{})
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	public := base64.StdEncoding.EncodeToString(der)
	ts := strconv.FormatInt(clock.Unix(), 10)
	signed := []byte(`[{"sg_event_id":"sg_1","event":"open","timestamp":1700000000}]` + "\r\n")
	sum := sha256.Sum256(append([]byte(ts), signed...))
	sig, _ := ecdsa.SignASN1(rand.Reader, k, sum[:])
	f.Add(base64.StdEncoding.EncodeToString(sig), ts, signed)
	f.Add(base64.StdEncoding.EncodeToString(sig), ts, signed[:len(signed)-2])
	f.Add("MEUCIQ==", ts, signed)
	f.Fuzz(func(t *testing.T, sig, gotTS string, body []byte) {
		err := s.Verify(http.Header{SendGridSignatureHeader: {sig}, SendGridTimestampHeader: {gotTS}}, body, []string{public}, clock)
		if err != nil {
			checkRejection(t, err, SendGrid)
			return
		}
		if gotTS != ts || string(body) != string(signed) {
			t.Fatalf("accepted %q at %q, which the key never signed", body, gotTS)
		}
	})
}
