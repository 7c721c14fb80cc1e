package webhook

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestPublishedAndComputedVectors(t *testing.T) {
	t.Parallel()
	for _, f := range loadFixtures(t, "vectors.json") {
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, f.Scheme, f.Options)
			now := time.Unix(f.Now, 0)
			keys, signWith := []string{f.Secret}, f.Secret
			if f.PublicKey != "" {
				keys, signWith = []string{f.PublicKey}, f.PrivateKey
			}
			if err := s.Verify(f.header(), []byte(f.Body), keys, now); err != nil {
				t.Fatalf("Verify: %v (source: %s)", err, f.Source)
			}
			if err := s.Verify(f.header(), []byte(f.Body+" "), keys, now); err == nil {
				t.Fatal("Verify accepted the vector with one byte appended to the body")
			}
			if f.VerifyOnly != "" {
				return
			}
			got := http.Header{}
			if err := s.Sign(got, []byte(f.Body), signWith, f.ID, now); err != nil {
				t.Fatalf("Sign: %v", err)
			}
			want := f.header()
			if len(got) != len(want) {
				t.Fatalf("Sign set %v, want %v", got, want)
			}
			for k := range want {
				if got.Get(k) != want.Get(k) {
					t.Errorf("Sign set %s: %q, want %q", k, got.Get(k), want.Get(k))
				}
			}
		})
	}
}

func TestDocumentedHeaderShapes(t *testing.T) {
	t.Parallel()
	for _, f := range loadFixtures(t, "docs_headers.json") {
		t.Run(f.Name+" parses, and fails only for want of the secret", func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, f.Scheme, f.Options)
			err := s.Verify(f.header(), []byte(`{"not":"the documented body"}`), []string{"whsec_bm90IHRoZSBzZWNyZXQ="} /* base64 of "not the secret" */, time.Unix(f.Now, 0))
			wantReason(t, err, f.Scheme, ReasonNoMatch)
		})
	}
}

func TestDocumentedStripeHeaderKeepsOnlyItsV1(t *testing.T) {
	t.Parallel()
	var p stripeSignature
	v := loadFixtures(t, "docs_headers.json")[0].Headers["Stripe-Signature"]
	if d := parseStripeSignature(v, &p); d != "" {
		t.Fatal(d)
	}
	if p.t != "1492774577" || p.unix != 1492774577 || p.sigs.n != 1 || p.sigs.sig[0][0] != 0x52 {
		t.Fatalf("parsed %+v, want t=1492774577 and the single v1 5257...", p)
	}
}

func TestDocumentedStandardHeaderKeepsOnlyItsV1(t *testing.T) {
	t.Parallel()
	var sigs signatures
	v := loadFixtures(t, "docs_headers.json")[1].Headers["Webhook-Signature"]
	if d := parseStandardSignature(v, &sigs); d != "" {
		t.Fatal(d)
	}
	if sigs.n != 1 {
		t.Fatalf("kept %d signatures, want the single v1 (the v1a is asymmetric)", sigs.n)
	}
}

// TestPaddlesPlaceholderSignatureIsMalformed: the Python SDK's own multi-h1 vector carries
// "h1=dummy", which its lenient parser skips; ours refuses a value that is not a digest, as it
// does for every scheme (Paddle itself sends only digests).
func TestPaddlesPlaceholderSignatureIsMalformed(t *testing.T) {
	t.Parallel()
	s := mustNew(t, Paddle, Options{})
	h := http.Header{PaddleHeader: {"ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02"}}
	err := s.Verify(h, []byte("hello-world"), []string{"pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh"}, time.Unix(1696195954, 0))
	wantReason(t, err, Paddle, ReasonMalformedHeader)
}

// TestChallengesAreAnsweredOnlyForTheirOwnShape: Slack's url_verification and Twitch's
// webhook_callback_verification are answered with their challenge; an event is not a challenge.
func TestChallengesAreAnsweredOnlyForTheirOwnShape(t *testing.T) {
	t.Parallel()
	slack := mustNew(t, Slack, Options{}).(Challenger)
	twitch := mustNew(t, Twitch, Options{}).(Challenger)
	zoom := mustNew(t, Zoom, Options{}).(Challenger)
	intercom := mustNew(t, Intercom, Options{}).(Challenger)
	discord := mustNew(t, Discord, Options{}).(Challenger)
	for _, c := range []struct {
		name   string
		s      Challenger
		h      http.Header
		body   string
		answer string
	}{
		// Elastic Beats' test of its Zoom CRC answer (crc_test.go), secret "secretValueTest", and
		// the answer Zoom's Rivet SDK computed for the secret "zm_test_secret_token_0123456789".
		{"zoom's url_validation (Elastic Beats)", zoom, zoomSigned(t, "secretValueTest", zoomChallenge(1654503849680)), zoomChallenge(1654503849680),
			`{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"70c1f2e2e6ca2d39297490d1f9142c7d701415ea8e6151f6562a08fa657a40ff"}`},
		{"zoom's url_validation (Rivet)", zoom, zoomSigned(t, "zm_test_secret_token_0123456789", zoomChallenge(1700000100456)), zoomChallenge(1700000100456),
			`{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"14267c6d20912e258116695d1266eb3fed8ddfa141030d291b4a8bee9510c2ad"}`},
		{"zoom's url_validation signed by no secret held", zoom, zoomSigned(t, "another", zoomChallenge(1)), zoomChallenge(1), ""},
		{"a zoom event", zoom, zoomSigned(t, "secretValueTest", `{"event":"meeting.started","payload":{}}`), `{"event":"meeting.started","payload":{}}`, ""},
		{"an intercom ping", intercom, nil, `{"type":"notification_event","id":null,"topic":"ping","data":{"item":{"type":"ping"}}}`, "-"},
		{"an intercom notification", intercom, nil, `{"type":"notification_event","id":"notif_1","topic":"conversation.user.created","data":{"item":{"type":"ping"}}}`, ""},
		{"discord's webhook-event PING", discord, nil, `{"version":1,"application_id":"1234560123453231555","type":0}`, "-"},
		{"a discord webhook event", discord, nil, `{"version":1,"application_id":"1","type":1,"event":{"type":"APPLICATION_AUTHORIZED"}}`, ""},
		{"a discord interaction PING (not a webhook event)", discord, nil, `{"type":1,"id":"1","application_id":"1"}`, ""},
		// https://api.slack.com/events/url_verification
		{"slack's url_verification", slack, nil, `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"},
		// https://api.slack.com/events/app_rate_limited: a notice with no event_id, acknowledged.
		{"slack's app_rate_limited", slack, nil, `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","type":"app_rate_limited","team_id":"T123456","minute_rate_limited":1518467820,"api_app_id":"A123456"}`, "-"},
		{"a slack event naming app_rate_limited elsewhere", slack, nil, `{"type":"event_callback","event_id":"Ev2","event":{"type":"message","text":"app_rate_limited"}}`, ""},
		{"a slack event", slack, nil, `{"type":"event_callback","event_id":"Ev1","event":{"type":"message","text":"url_verification"}}`, ""},
		{"a slack body naming url_verification elsewhere", slack, nil, `{"type":"event_callback","challenge":"x","event":{"text":"\"url_verification\""}}`, ""},
		// https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#responding-to-a-challenge-request
		{"twitch's callback verification", twitch, http.Header{TwitchTypeHeader: {"webhook_callback_verification"}}, `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4"}}`, "pogchamp-kappa-360noscope-vohiyo"},
		{"a twitch notification", twitch, http.Header{TwitchTypeHeader: {"notification"}}, `{"subscription":{"type":"channel.follow","status":"enabled"},"event":{"user_id":"1234"}}`, ""},
		{"a twitch notification whose unsigned header says revocation", twitch, http.Header{TwitchTypeHeader: {"revocation"}}, `{"subscription":{"type":"channel.follow","status":"enabled"},"event":{"user_id":"1234"}}`, ""},
		{"a twitch challenge whose unsigned header says notification", twitch, http.Header{TwitchTypeHeader: {"notification"}}, `{"challenge":"x","subscription":{}}`, "x"},
		{"a twitch revocation, acknowledged", twitch, http.Header{TwitchTypeHeader: {"revocation"}}, `{"subscription":{"status":"authorization_revoked"}}`, "-"},
	} {
		answer, ctype, ok := c.s.Challenge(c.h, []byte(c.body), []string{"zm_test_secret_token_0123456789", "secretValueTest"})
		if c.answer == "-" { // acknowledged with an empty answer
			c.answer = ""
			if !ok || len(answer) != 0 {
				t.Errorf("%s: %q %v, want an empty acknowledgement", c.name, answer, ok)
			}
			continue
		}
		wantType := "text/plain"
		if c.s == zoom {
			wantType = "application/json"
		}
		if ok != (c.answer != "") || string(answer) != c.answer || (ok && ctype != wantType) {
			t.Errorf("%s: %q %q %v, want %q", c.name, answer, ctype, ok, c.answer)
		}
	}
}

func zoomChallenge(eventTS int64) string {
	return fmt.Sprintf(`{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":%d,"event":"endpoint.url_validation"}`, eventTS)
}

// zoomSigned signs body as Zoom would with secret: the challenge is answered only for a
// request one of the held secrets signed.
func zoomSigned(t *testing.T, secret, body string) http.Header {
	h := http.Header{}
	if err := mustNew(t, Zoom, Options{}).Sign(h, []byte(body), secret, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	return h
}
