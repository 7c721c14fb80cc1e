package receiver_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

const providersFile = `{"sources":{
  "clerk":  {"scheme":"svix","secrets":[{"env":"S"}]},
  "slack":  {"scheme":"slack","secrets":[{"env":"S"}]},
  "paddle": {"scheme":"paddle","secrets":[{"env":"S"}]},
  "pd":     {"scheme":"pagerduty","secrets":[{"env":"S"}]},
  "linear": {"scheme":"linear","secrets":[{"env":"S"}]},
  "twitch": {"scheme":"twitch","secrets":[{"env":"S"}],"retry_horizon":"1h"}}}`

// TestEachProviderPresetClaimsItsEventsOnce: a delivery of each provider, shaped as it sends
// it, is claimed under the id its preset names with the type it names, once; its retry is a
// duplicate.
func TestEachProviderPresetClaimsItsEventsOnce(t *testing.T) {
	t.Parallel()
	f, err := sources.Parse([]byte(providersFile))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	secrets := map[string]string{"clerk": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "slack": "8f742231b10e8888abcd99yyyzzz85a5",
		"paddle": "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr", "pd": "lDQHScfUeXUKaQRNF+8XIiDKZ7XX3itBAYzwU0TARw8lJqRnkKl2iB1anSb0Z+IK",
		"linear": "lin_wh_secret", "twitch": "secretabcd"}
	cases := []struct {
		source, body, id, typ string
		opts                  []receivertest.Option
	}{
		{"clerk", `{"type":"user.created","object":"event","data":{"id":"user_29w83sxmDNGwOuEthce5gg56FcC"}}`, "msg_2bDbmq5EwEdPnmM3cXVPgKwxSpd", "user.created",
			[]receivertest.Option{receivertest.WithEventID("msg_2bDbmq5EwEdPnmM3cXVPgKwxSpd")}},
		{"slack", fmt.Sprintf(`{"token":"z26uFbvR1xHJEdHE1OQiO6t8","team_id":"T061EG9RZ","event":{"type":"app_mention","user":"U061F7AUR","text":"hi"},"type":"event_callback","event_id":"Ev0LAN670R","event_time":%d}`, now.Unix()),
			"Ev0LAN670R", "app_mention", nil},
		{"paddle", fmt.Sprintf(`{"event_id":"evt_01hv8x2acma2gz2aw9qjzxn4qc","event_type":"transaction.completed","occurred_at":%q,"notification_id":"ntf_01hv8x2af1s7k8aeax3sxt3pkq","data":{"id":"txn_01hv8wptq8987qeep44cyrewp9"}}`, now.Format(time.RFC3339Nano)),
			"evt_01hv8x2acma2gz2aw9qjzxn4qc", "transaction.completed", nil},
		{"pd", fmt.Sprintf(`{"event":{"id":"01BWDWL3NYY7LUFPZCC28QUCMK","event_type":"incident.triggered","resource_type":"incident","occurred_at":%q,"data":{"id":"PGR0VU2"}}}`, now.Format(time.RFC3339)),
			"01BWDWL3NYY7LUFPZCC28QUCMK", "incident.triggered", []receivertest.Option{receivertest.WithDeliveryID("f6a43c4e-a4fc-4ec6-a4e3-e4ea0cf5a5e5")}},
		{"linear", fmt.Sprintf(`{"action":"create","type":"Issue","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"},"webhookTimestamp":%d}`, now.UnixMilli()),
			"0f1c2a38-7e1b-4b1e-9d4e-5b8f3e2d6a11", "Issue", []receivertest.Option{receivertest.WithEventID("0f1c2a38-7e1b-4b1e-9d4e-5b8f3e2d6a11"), receivertest.WithEventType("Issue")}},
		{"twitch", `{"subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","type":"channel.follow","version":"2"},"event":{"user_id":"1234","broadcaster_user_id":"1337"}}`,
			"befa7b53-d79d-478f-86b9-120f112b044e", "channel.follow", []receivertest.Option{receivertest.WithEventID("befa7b53-d79d-478f-86b9-120f112b044e"), receivertest.WithEventType("channel.follow")}},
	}
	h, rec, err := receivertest.NewHandler(f, secrets, func(p *receiver.Planners) {
		for _, c := range cases {
			p.Handle(c.source, c.typ, func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, nil })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.source, func(t *testing.T) {
			for i, want := range []string{`"duplicate":false`, `"duplicate":true`} {
				req, err := receivertest.Request(f, c.source, secrets[c.source], []byte(c.body), c.opts...)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := h.Handle(context.Background(), req)
				if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, want) {
					t.Fatalf("delivery %d: %d %s %v", i, resp.StatusCode, resp.Body, err)
				}
			}
			got := rec.Last().Event
			if got.Source != c.source || got.ID != c.id || got.Type != c.typ {
				t.Fatalf("claimed %s %q %q, want %q %q", got.Source, got.ID, got.Type, c.id, c.typ)
			}
			// The event's time, where the preset reads one (Linear's in milliseconds).
			if f.Sources[c.source].OccurredAt != nil && got.OccurredAt.Sub(now).Abs() > time.Second {
				t.Fatalf("occurred at %v, want %v", got.OccurredAt, now)
			}
		})
	}
}

// TestAStaleLinearDeliveryIsRefusedAndClaimsNothing: Linear signs the delivery's time in its
// body (webhookTimestamp, in milliseconds). A delivery signed two days ago is refused as a
// timestamped scheme's stale delivery is, 401 with the timestamp as the reason, and nothing is
// claimed; one signed a minute ago is claimed.
func TestAStaleLinearDeliveryIsRefusedAndClaimsNothing(t *testing.T) {
	t.Parallel()
	e := newSignedBytesEnv(t, planEverything("linear", "Issue"))
	body := func(at time.Time) string {
		return `{"action":"create","type":"Issue","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"},"webhookTimestamp":` + jsonMillis(at) + `}`
	}
	stale := e.request("linear", body(e.clock().Add(-48*time.Hour)), http.Header{"Linear-Delivery": {"d-stale"}, "Linear-Event": {"Issue"}}, "")
	expectAnswer(t, "a delivery signed 48 h ago", e.post(stale), 401, "")
	if !strings.Contains(e.logsText(), "timestamp outside tolerance") {
		t.Fatalf("the refusal's log line does not give the timestamp as its reason:\n%s", e.logsText())
	}
	if n := e.claims("linear"); n != 0 {
		t.Fatalf("%d claims for a stale delivery", n)
	}
	fresh := e.request("linear", body(e.clock().Add(-time.Minute)), http.Header{"Linear-Delivery": {"d-fresh"}, "Linear-Event": {"Issue"}}, "")
	expectAnswer(t, "a delivery signed a minute ago", e.post(fresh), 200, accepted)
}

// TestChallengesAreAnsweredAndClaimNothing: Slack's url_verification and Twitch's callback
// verification, signed, get their challenge back; a Twitch revocation is acknowledged; none is
// claimed. Unsigned, a challenge is refused like any delivery.
func TestChallengesAreAnsweredAndClaimNothing(t *testing.T) {
	t.Parallel()
	f, err := sources.Parse([]byte(providersFile))
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"clerk": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "slack": "slack-secret", "paddle": "p", "pd": "p", "linear": "l", "twitch": "secretabcd"}
	h, rec, err := receivertest.NewHandler(f, secrets, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, source, body, answer string
		opts                       []receivertest.Option
	}{
		{"slack's url_verification", "slack", `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`,
			"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", nil},
		{"twitch's callback verification", "twitch", `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"type":"channel.follow"}}`, "pogchamp-kappa-360noscope-vohiyo",
			[]receivertest.Option{receivertest.WithEventType("channel.follow"), receivertest.WithHeader("Twitch-Eventsub-Message-Type", "webhook_callback_verification")}},
		{"twitch's revocation", "twitch", `{"subscription":{"type":"channel.follow","status":"authorization_revoked"}}`, "",
			[]receivertest.Option{receivertest.WithEventType("channel.follow"), receivertest.WithHeader("Twitch-Eventsub-Message-Type", "revocation")}},
	} {
		req, err := receivertest.Request(f, c.source, secrets[c.source], []byte(c.body), c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := h.Handle(context.Background(), req)
		if resp.StatusCode != 200 || resp.Body != c.answer || resp.Headers["Content-Type"] != "text/plain" {
			t.Errorf("%s: %d %q %v, want 200 %q as text/plain", c.name, resp.StatusCode, resp.Body, resp.Headers, c.answer)
		}
		// The same challenge signed with another secret is refused.
		forged, _ := receivertest.Request(f, c.source, "not-the-secret", []byte(c.body), c.opts...)
		if resp, _ := h.Handle(context.Background(), forged); resp.StatusCode != 401 {
			t.Errorf("%s, forged: %d %s", c.name, resp.StatusCode, resp.Body)
		}
	}
	if n := len(rec.All()); n != 0 {
		t.Fatalf("%d events claimed: a challenge claims nothing", n)
	}
}
