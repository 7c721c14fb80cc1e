package webhook

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// The fuzz targets feed hostile header values and bodies to the parsers and to Verify, with a
// secret the fuzzer does not know. Each checks that nothing panics, that every rejection is a
// *SignatureError with one of the documented reasons, and (the forgery oracle) that Verify only
// accepts a delivery whose header carries the MAC computed here, independently, over the body
// actually given. The seeds include correctly signed deliveries, so mutating their body, id or
// timestamp while keeping the signature is exercised.

var fuzzSecret = secretA

func checkRejection(t *testing.T, err error, scheme string) {
	t.Helper()
	var se *SignatureError
	if !errors.As(err, &se) || !errors.Is(err, ErrSignature) || se.Scheme != scheme {
		t.Fatalf("Verify returned %v, want a *SignatureError from %s", err, scheme)
	}
	switch se.Reason {
	case ReasonMissingHeader, ReasonMalformedHeader, ReasonMalformedBody, ReasonTimestamp, ReasonNoMatch:
	default:
		t.Fatalf("undocumented reason %q", se.Reason)
	}
}

func signedHeader(f *testing.F, s Scheme, name, id string, body []byte) string {
	h := http.Header{}
	if err := s.Sign(h, body, fuzzSecret, id, clock); err != nil {
		f.Fatal(err)
	}
	return h.Get(name)
}

func FuzzStripeSignature(f *testing.F) {
	s := mustNew(f, Stripe, Options{})
	body := []byte(testBody)
	good := signedHeader(f, s, StripeHeader, "", body)
	f.Add(good, body)
	f.Add(good+",v0="+strings.Repeat("0", 64), body)
	f.Add(strings.Replace(good, ",", ",v1="+strings.Repeat("a", 64)+",", 1), body)
	f.Add(good, []byte(testBody+" "))
	f.Add(loadFixtures(f, "docs_headers.json")[0].Headers["Stripe-Signature"], body)
	f.Add("t=,v1=", []byte{})
	f.Add("t=1700000000,t=1700000000", body)
	f.Add(",,,=,==,t", body)
	f.Add("t=99999999999999999999,v1=00", body)
	f.Fuzz(func(t *testing.T, v string, body []byte) {
		var p stripeSignature
		if detail := parseStripeSignature(v, &p); detail == "" {
			if p.sigs.n > maxSignatures || p.unix < 0 || !strings.Contains(v, "t="+p.t) {
				t.Fatalf("parse of %q gave %+v", v, p)
			}
		}
		err := s.Verify(http.Header{StripeHeader: {v}}, body, []string{fuzzSecret}, clock)
		if err != nil {
			checkRejection(t, err, Stripe)
			return
		}
		want := "v1=" + hex.EncodeToString(refMAC([]byte(fuzzSecret), append([]byte(p.t+"."), body...)))
		if !strings.Contains(strings.ToLower(v), want) {
			t.Fatalf("accepted %q for body %q without the MAC %s", v, body, want)
		}
	})
}

func FuzzStandardWebhooksSignature(f *testing.F) {
	s := mustNew(f, StandardWebhooks, Options{})
	body := []byte(testBody)
	ts := "1700000000"
	good := signedHeader(f, s, StandardSignatureHeader, "msg_1", body)
	f.Add("msg_1", ts, good, body)
	f.Add("msg_1", ts, "v1a,AAAA "+good+" v2,x", body)
	f.Add("msg_1.", "1700000000", good, body)
	f.Add("msg_", "11700000000", good, body)
	f.Add("msg_1", ts, good, []byte{})
	f.Add("msg_1", "01700000000", good, body)
	f.Add("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "1674087231",
		loadFixtures(f, "docs_headers.json")[1].Headers["Webhook-Signature"], body)
	f.Add("", "", ",,, v1, v1,=", body)
	f.Fuzz(func(t *testing.T, id, ts, v string, body []byte) {
		var sigs signatures
		if detail := parseStandardSignature(v, &sigs); detail == "" && sigs.n > maxSignatures {
			t.Fatalf("parse of %q kept %d signatures", v, sigs.n)
		}
		h := http.Header{StandardIDHeader: {id}, StandardTimestampHeader: {ts}, StandardSignatureHeader: {v}}
		err := s.Verify(h, body, []string{fuzzSecret}, clock)
		if err != nil {
			checkRejection(t, err, StandardWebhooks)
			return
		}
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(fuzzSecret, StandardSecretPrefix))
		want := "v1," + base64.StdEncoding.EncodeToString(refMAC(key, append([]byte(id+"."+ts+"."), body...)))
		if !strings.Contains(" "+v+" ", " "+want+" ") {
			t.Fatalf("accepted id %q ts %q sig %q for body %q without the MAC %s", id, ts, v, body, want)
		}
	})
}

// fuzzBodyScheme fuzzes a scheme that signs the body alone, whose header value is
// prefix + encode(MAC) in the given encoding.
func fuzzBodyScheme(f *testing.F, s Scheme, name, prefix, encoding string, seeds ...string) {
	body := []byte(testBody)
	good := signedHeader(f, s, name, "", body)
	for _, seed := range append(seeds, good, good+" ", strings.ToUpper(good), prefix, "") {
		f.Add(seed, body)
	}
	f.Add(good, []byte(testBody[1:]))
	f.Fuzz(func(t *testing.T, v string, body []byte) {
		var sig [32]byte
		size := 32
		if s.Name() == Intercom {
			size = 20 // SHA-1
		}
		if detail := parseBodySignature(v, prefix, encoding, sig[:size]); detail == "" && !strings.HasPrefix(v, prefix) {
			t.Fatalf("parsed %q without its prefix %q", v, prefix)
		}
		err := s.Verify(http.Header{name: {v}}, body, []string{fuzzSecret}, clock)
		if err != nil {
			checkRejection(t, err, s.Name())
			return
		}
		mac := refMAC([]byte(fuzzSecret), body)
		if s.Name() == Intercom {
			mac = refMAC1([]byte(fuzzSecret), body)
		}
		if encoding == EncodingBase64 {
			if want := prefix + base64.StdEncoding.EncodeToString(mac); v != want {
				t.Fatalf("accepted %q for body %q, want exactly %q", v, body, want)
			}
			return
		}
		if want := hex.EncodeToString(mac); !strings.HasPrefix(v, prefix) || strings.ToLower(v[len(prefix):]) != want {
			t.Fatalf("accepted %q for body %q, want %s%s", v, body, prefix, want)
		}
	})
}

func FuzzGitHubSignature(f *testing.F) {
	fuzzBodyScheme(f, mustNew(f, GitHub, Options{}), GitHubHeader, "sha256=", EncodingHex,
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		loadFixtures(f, "docs_headers.json")[2].Headers["X-Hub-Signature-256"],
		"sha1=7d38cdd689735b008b3c702edd92eea23791c5f6")
}

func FuzzShopifySignature(f *testing.F) {
	fuzzBodyScheme(f, mustNew(f, Shopify, Options{}), ShopifyHeader, "", EncodingBase64,
		"is89SHDkIt6db6p+UaZEBm7Mt3rLhkslrthCDhOKyX0=", "is89SHDkIt6db6p+UaZEBm7Mt3rLhkslrthCDhOKyX0",
		"is89SHDkIt6db6p+UaZEBm7Mt3rLhkslrthCDhOKyX1=")
}

func FuzzGenericSignature(f *testing.F) {
	s := mustNew(f, HMACSHA256, Options{Header: "X-Signature", Encoding: EncodingBase64, Prefix: "v1="})
	fuzzBodyScheme(f, s, "X-Signature", "v1=", EncodingBase64,
		"v1=sJ5U011xTCOr6ShN5Ww/c5UDicLew0ItHSoe0GLNuZg=", "v1=", "sJ5U011xTCOr6ShN5Ww/c5UDicLew0ItHSoe0GLNuZg=")
}

func FuzzPagerDutySignature(f *testing.F) {
	s := mustNew(f, PagerDuty, Options{})
	body := []byte(testBody)
	good := signedHeader(f, s, PagerDutyHeader, "", body)
	for _, seed := range []string{good, "v2=abc," + good, good + ",v1=" + strings.Repeat("0", 64), strings.Repeat(good+",", 9), ",,", "v1=", ""} {
		f.Add(seed, body)
	}
	f.Fuzz(func(t *testing.T, v string, body []byte) {
		err := s.Verify(http.Header{PagerDutyHeader: {v}}, body, []string{fuzzSecret}, clock)
		if err != nil {
			checkRejection(t, err, PagerDuty)
			return
		}
		want := "v1=" + hex.EncodeToString(refMAC([]byte(fuzzSecret), body))
		if !strings.Contains(strings.ToLower(v), want) {
			t.Fatalf("accepted %q for body %q without the MAC %s", v, body, want)
		}
	})
}

func FuzzLinearSignature(f *testing.F) {
	fuzzBodyScheme(f, mustNew(f, Linear, Options{}), LinearHeader, "", EncodingHex, strings.Repeat("g", 64))
}

// FuzzTimestampedSignatures fuzzes Slack's, Paddle's and Twitch's headers with the MAC of each
// scheme's own signed string, computed here.
func FuzzTimestampedSignatures(f *testing.F) {
	slack, paddle, twitch := mustNew(f, Slack, Options{}), mustNew(f, Paddle, Options{}), mustNew(f, Twitch, Options{})
	body := []byte(testBody)
	sign := func(s Scheme, id string) http.Header {
		h := http.Header{}
		if err := s.Sign(h, body, fuzzSecret, id, clock); err != nil {
			f.Fatal(err)
		}
		return h
	}
	sh, ph, th := sign(slack, ""), sign(paddle, ""), sign(twitch, "msg-1")
	f.Add(sh.Get(SlackSignatureHeader), sh.Get(SlackTimestampHeader), "", body)
	f.Add(ph.Get(PaddleHeader), "", "", body)
	f.Add(ph.Get(PaddleHeader)+";h1="+strings.Repeat("a", 64), "", "", body)
	f.Add("ts=1;ts=2;h1=", "", "", body)
	f.Add(th.Get(TwitchSignatureHeader), th.Get(TwitchTimestampHeader), "msg-1", body)
	f.Add(th.Get(TwitchSignatureHeader), "2023-13-45T99:00:00Z", "msg-1", body)
	f.Fuzz(func(t *testing.T, sig, ts, id string, body []byte) {
		// Slack
		if err := slack.Verify(http.Header{SlackSignatureHeader: {sig}, SlackTimestampHeader: {ts}}, body, []string{fuzzSecret}, clock); err != nil {
			checkRejection(t, err, Slack)
		} else if want := "v0=" + hex.EncodeToString(refMAC([]byte(fuzzSecret), append([]byte("v0:"+ts+":"), body...))); strings.ToLower(sig) != want {
			t.Fatalf("slack accepted %q at %q for %q, want %s", sig, ts, body, want)
		}
		// Paddle: the timestamp is in the header
		if err := paddle.Verify(http.Header{PaddleHeader: {sig}}, body, []string{fuzzSecret}, clock); err != nil {
			checkRejection(t, err, Paddle)
		} else {
			var pts string
			var sigs signatures
			if parseSignedList(sig, ';', "ts", "h1", &pts, &sigs) != "" {
				t.Fatalf("paddle accepted %q, which does not parse", sig)
			}
			if want := "h1=" + hex.EncodeToString(refMAC([]byte(fuzzSecret), append([]byte(pts+":"), body...))); !strings.Contains(strings.ToLower(sig), want) {
				t.Fatalf("paddle accepted %q for %q without %s", sig, body, want)
			}
		}
		// Twitch
		h := http.Header{TwitchSignatureHeader: {sig}, TwitchTimestampHeader: {ts}, TwitchIDHeader: {id}}
		if err := twitch.Verify(h, body, []string{fuzzSecret}, clock); err != nil {
			checkRejection(t, err, Twitch)
		} else if want := "sha256=" + hex.EncodeToString(refMAC([]byte(fuzzSecret), append([]byte(id+ts), body...))); strings.ToLower(sig) != want {
			t.Fatalf("twitch accepted %q at %q id %q for %q, want %s", sig, ts, id, body, want)
		}
	})
}
