package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The replay window of every scheme that signs a time, pinned: the providers' own checks where
// each attempt is signed anew (Standard Webhooks' and Svix's libraries, Stripe's SDKs, Twitch's
// guide, Paddle's SDKs), and each provider's last retry covered where a retry may carry the
// first attempt's signature (Slack, Zoom, Discord, SendGrid, Linear). A delivery signed just
// inside the window verifies, either way in time; just outside it, it does not.
var pinnedTolerances = map[string]time.Duration{
	StandardWebhooks: 5 * time.Minute, Svix: 5 * time.Minute, Stripe: 5 * time.Minute, Twitch: 10 * time.Minute, Paddle: 5 * time.Second,
	Slack: 10 * time.Minute, Zoom: 90 * time.Minute, Discord: 15 * time.Minute, SendGrid: 24 * time.Hour, Linear: 8 * time.Hour,
}

// signingKey is what each timestamped scheme signs with in these tests, and what it verifies
// with: a shared secret, or a private key and its public key.
func signingKey(t *testing.T, name string) (sign, verify string) {
	t.Helper()
	switch name {
	case StandardWebhooks, Svix:
		return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	case Discord: // RFC 8032, section 7.1, TEST 1
		return "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	case SendGrid:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
		priv, _ := x509.MarshalPKCS8PrivateKey(k)
		return base64.StdEncoding.EncodeToString(priv), base64.StdEncoding.EncodeToString(pub)
	}
	return "tolerance-test-secret", "tolerance-test-secret"
}

func TestEveryTimestampedSchemesWindowIsPinned(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, name := range Names {
		want, timestamped := pinnedTolerances[name]
		s, err := New(name, Options{Header: map[bool]string{true: "X-Sig"}[name == HMACSHA256]})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.(URLVerifier); ok || !timestamped {
			if timestamped {
				t.Fatalf("%s has a tolerance but signs no timestamp", name)
			}
			if _, err := New(name, Options{Tolerance: time.Minute, Header: map[bool]string{true: "X-Sig"}[name == HMACSHA256]}); err == nil {
				t.Errorf("%s signs no timestamp, and took a tolerance", name)
			}
			continue
		}
		sign, verify := signingKey(t, name)
		for _, c := range []struct {
			offset time.Duration
			ok     bool
		}{
			{-want + time.Second, true}, {want - time.Second, true},
			{-want - time.Second, false}, {want + time.Second, false},
		} {
			h := http.Header{}
			body := []byte(`{"type":"t","id":"evt_1","webhookTimestamp":` + strconv.FormatInt(now.Add(c.offset).UnixMilli(), 10) + `}`)
			if err := s.Sign(h, body, sign, "msg_1", now.Add(c.offset)); err != nil {
				t.Fatal(err)
			}
			err := s.Verify(h, body, []string{verify}, now)
			if (err == nil) != c.ok {
				t.Errorf("%s: signed %v from now, verify = %v, want ok=%v (window ±%v)", name, c.offset, err, c.ok, want)
			}
		}
	}
	for name := range pinnedTolerances {
		if !slices.Contains(Names, name) {
			t.Errorf("%s is pinned but not a scheme", name)
		}
	}
}

// A tolerance is how long a captured delivery can be replayed for; past a day it is no longer a
// clock-skew allowance.
func TestATolerancePastMaxToleranceIsRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{Stripe, Slack, Zoom, StandardWebhooks, Discord} {
		if _, err := New(name, Options{Tolerance: MaxTolerance}); err != nil {
			t.Errorf("%s: MaxTolerance refused: %v", name, err)
		}
		_, err := New(name, Options{Tolerance: MaxTolerance + time.Second})
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != "Tolerance" {
			t.Errorf("%s: a tolerance over MaxTolerance: %v, want an InvalidError naming Tolerance", name, err)
		}
	}
}

// Discord's and SendGrid's keys rotate by listing both: a delivery signed by either key of the
// list verifies, whatever the order, and no other key's does. The deliveries are the recorded
// vectors (provider SDKs and independent signers); the second key of each list is another
// vector's key, or RFC 8032's second Ed25519 test key.
func TestPublicKeysRotateByListingBoth(t *testing.T) {
	t.Parallel()
	const rfc8032Test2 = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"
	var vectors = map[string][]fixture{}
	for _, f := range loadFixtures(t, "vectors.json") {
		if f.Scheme == Discord || f.Scheme == SendGrid {
			vectors[f.Scheme] = append(vectors[f.Scheme], f)
		}
	}
	for scheme, fs := range vectors {
		other := rfc8032Test2
		for _, f := range fs {
			if scheme == SendGrid {
				for _, g := range fs {
					if g.PublicKey != f.PublicKey {
						other = g.PublicKey
					}
				}
				if other == rfc8032Test2 {
					t.Fatal("the SendGrid vectors have one key: rotation needs two")
				}
			}
			s := mustNew(t, scheme, f.Options)
			now := time.Unix(f.Now, 0)
			for _, keys := range [][]string{{other, f.PublicKey}, {f.PublicKey, other}} {
				if err := s.Verify(f.header(), []byte(f.Body), keys, now); err != nil {
					t.Errorf("%s with keys %v: %v", f.Name, keys, err)
				}
			}
			if err := s.Verify(f.header(), []byte(f.Body), []string{other}, now); err == nil {
				t.Errorf("%s verified under another key alone", f.Name)
			}
		}
	}
	if len(vectors) != 2 {
		t.Fatalf("vectors for %d public-key schemes, want Discord's and SendGrid's", len(vectors))
	}
}

// Linear signs its time in the body: webhookTimestamp, milliseconds since the epoch, covered by
// the HMAC of the raw body in Linear-Signature. The vector (computed with Python's hmac) is
// refused two days after, or before, that time, as a timestamped scheme refuses a stale
// delivery, and verifies a minute after it.
func TestLinearsSignedWebhookTimestampBoundsTheDelivery(t *testing.T) {
	t.Parallel()
	var v fixture
	for _, f := range loadFixtures(t, "vectors.json") {
		if f.Scheme == Linear {
			v = f
		}
	}
	sent := time.UnixMilli(1700000000000) // the vector's webhookTimestamp
	s := mustNew(t, Linear, Options{})
	for _, c := range []struct {
		now    time.Time
		reason string
	}{{sent.Add(time.Minute), ""}, {sent.Add(48 * time.Hour), ReasonTimestamp}, {sent.Add(-48 * time.Hour), ReasonTimestamp}} {
		err := s.Verify(v.header(), []byte(v.Body), []string{v.Secret}, c.now)
		var se *SignatureError
		if c.reason == "" && err != nil || c.reason != "" && (!errors.As(err, &se) || se.Reason != c.reason) {
			t.Errorf("verified %v after webhookTimestamp: %v, want reason %q", c.now.Sub(sent), err, c.reason)
		}
	}
}

// A provider that does not document signing each attempt anew may retry with its first
// attempt's signature, and its default tolerance covers its last retry: that retry, signed when
// the first attempt was, verifies when it arrives (docs/receiver.md, "Timestamp tolerances and
// retries", has each provider's schedule and source).
func TestARetryCarryingTheFirstAttemptsSignatureVerifies(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		lastRetry time.Duration // after the first attempt
	}{
		{Slack, 6 * time.Minute},            // nearly immediately, then after 1 and 5 minutes
		{Zoom, 85 * time.Minute},            // 5, 25 and 85 minutes after the first attempt
		{Discord, 10 * time.Minute},         // for up to 10 minutes
		{SendGrid, 24 * time.Hour},          // for up to 24 hours
		{Linear, 7*time.Hour + time.Minute}, // after 1 minute, 1 hour, then 6 hours
	} {
		sign, verify := signingKey(t, c.name)
		first := now.Add(-c.lastRetry)
		body := []byte(`{"type":"t","id":"evt_1","webhookTimestamp":` + strconv.FormatInt(first.UnixMilli(), 10) + `}`)
		s := mustNew(t, c.name, Options{})
		h := http.Header{}
		if err := s.Sign(h, body, sign, "msg_1", first); err != nil {
			t.Fatal(err)
		}
		if err := s.Verify(h, body, []string{verify}, now); err != nil {
			t.Errorf("%s: the last retry, %v after the first attempt and signed with it: %v", c.name, c.lastRetry, err)
		}
	}
}
