package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// The canonicalisers that decide what a receiver acts on: Twilio's signed content, and the
// control messages and header checks that read the signed body.

// FuzzTwilioSignedContent: a form's signed content does not depend on its fields' order or
// encoding, and any two bodies with the same signed content carry each other's signature.
func FuzzTwilioSignedContent(f *testing.F) {
	s := mustNew(f, Twilio, Options{}).(URLVerifier)
	f.Add("AccountSid=AC1&MessageSid=SM1&MessageStatus=delivered&To=%2B15550100", "")
	f.Add("SmsSid=SM1SmsStatusdelivered&A=%41", "tenant=acme")
	f.Add("a=1&a=2&b=", "bodySHA256=00")
	f.Add("%zz", "")
	f.Fuzz(func(t *testing.T, body, query string) {
		rawURL := "https://h.example.com/hooks/tw"
		if query != "" {
			rawURL += "?" + query
		}
		content, err := SignedContent(s, rawURL, []byte(body))
		if err != nil {
			return
		}
		form, perr := url.ParseQuery(body)
		if perr != nil || strings.Contains(rawURL, "bodySHA256") {
			return
		}
		// The same fields, encoded by net/url and in reverse order.
		fields := strings.Split(form.Encode(), "&")
		slices.Reverse(fields)
		again := []byte(strings.Join(fields, "&"))
		content2, err := SignedContent(s, rawURL, again)
		if err != nil {
			t.Fatalf("the form re-encoded is refused: %v", err)
		}
		if !bytes.Equal(content, content2) {
			t.Fatalf("signed content changed with the form's encoding:\n%q\n%q", content, content2)
		}
		h := http.Header{}
		if err := s.SignURL(rawURL, h, []byte(body), fuzzSecret, "", clock); err != nil {
			return
		}
		if err := s.VerifyURL(rawURL, h, again, []string{fuzzSecret}, clock); err != nil {
			t.Fatalf("equal signed content, and the signature does not carry over: %v", err)
		}
	})
}

// FuzzTwitchControlFromTheBody: whether a Twitch delivery is a control message, and what its
// answer is, depends on its signed body alone, whatever its headers say; a header naming the
// body's own kind and type is never refused.
func FuzzTwitchControlFromTheBody(f *testing.F) {
	s := mustNew(f, Twitch, Options{}).(interface {
		Challenger
		HeaderChecker
	})
	f.Add(`{"challenge":"c","subscription":{"type":"t"}}`, "notification", "x")
	f.Add(`{"subscription":{"type":"channel.follow","status":"enabled"},"event":{}}`, "revocation", "channel.follow")
	f.Add(`{"subscription":{"status":"authorization_revoked","type":"t"}}`, "webhook_callback_verification", "")
	f.Add(`{"event":null}`, "", "")
	f.Fuzz(func(t *testing.T, body, kindHeader, typeHeader string) {
		b := []byte(body)
		a1, c1, ok1 := s.Challenge(http.Header{TwitchTypeHeader: {kindHeader}}, b, nil)
		a2, c2, ok2 := s.Challenge(http.Header{}, b, nil)
		if ok1 != ok2 || !bytes.Equal(a1, a2) || c1 != c2 {
			t.Fatalf("the control answer changed with Twitch-Eventsub-Message-Type %q", kindHeader)
		}
		_ = s.CheckHeaders(http.Header{TwitchTypeHeader: {kindHeader}, TwitchSubscriptionTypeHeader: {typeHeader}}, b)
		kind := TwitchMessageKind(b)
		var m twitchMessage
		if json.Unmarshal(b, &m) != nil || kind == "" {
			return
		}
		if err := s.CheckHeaders(http.Header{TwitchTypeHeader: {kind}, TwitchSubscriptionTypeHeader: {m.Subscription.Type}}, b); err != nil && m.Subscription.Type != "" {
			t.Fatalf("headers that agree with the body refused: %v", err)
		}
	})
}
