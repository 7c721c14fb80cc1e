package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

// schemeCase is one source of each scheme, configured as a team would (the locations its
// provider's preset leaves open filled in), and a body for it.
type schemeCase struct {
	source string // extra JSON for the source, beyond scheme and secrets
	body   func(id string) string
}

var schemeCases = map[string]schemeCase{
	webhook.StandardWebhooks: {``, func(string) string { return `{"type":"order.paid","data":{}}` }},
	webhook.Svix:             {``, func(string) string { return `{"type":"user.created","data":{}}` }},
	webhook.Stripe: {``, func(id string) string {
		return `{"id":"` + id + `","object":"event","type":"checkout.session.completed"}`
	}},
	webhook.GitHub:  {``, func(string) string { return `{"ref":"refs/heads/main"}` }},
	webhook.Shopify: {``, func(string) string { return `{"id":820982911946154508}` }},
	webhook.Slack: {``, func(id string) string {
		return `{"type":"event_callback","event_id":"` + id + `","event":{"type":"app_mention"}}`
	}},
	webhook.Zoom: {`"event_id":{"json":"payload.object.uuid"},`, func(id string) string {
		return `{"event":"meeting.started","payload":{"object":{"uuid":"` + id + `"}}}`
	}},
	webhook.Paddle: {``, func(id string) string {
		return `{"event_id":"` + id + `","event_type":"transaction.completed","notification_id":"ntf_1"}`
	}},
	webhook.PagerDuty: {``, func(id string) string { return `{"event":{"id":"` + id + `","event_type":"incident.triggered"}}` }},
	webhook.Linear:    {``, func(string) string { return `{"action":"create","type":"Issue"}` }},
	webhook.Intercom: {``, func(id string) string {
		return `{"type":"notification_event","id":"` + id + `","topic":"conversation.user.created"}`
	}},
	webhook.Twilio: {`"event_type":{"form":"MessageStatus"},`, func(string) string { return `MessageSid=SM1&MessageStatus=delivered` }},
	webhook.Square: {``, func(id string) string { return `{"event_id":"` + id + `","type":"payment.updated"}` }},
	webhook.Discord: {`"event_id":{"json":"event.data.id"},`, func(id string) string {
		return `{"version":1,"type":1,"event":{"type":"ENTITLEMENT_CREATE","data":{"id":"` + id + `"}}}`
	}},
	webhook.SendGrid: {`"batch":true,`, func(id string) string {
		return `[{"sg_event_id":"` + id + `","event":"delivered","sg_message_id":"m1"}]`
	}},
	webhook.Twitch:     {``, func(string) string { return `{"subscription":{"type":"channel.follow"},"event":{}}` }},
	webhook.HMACSHA256: {`"hmac":{"header":"X-Signature","prefix":"sha256="},"event_id":{"json":"id"},"event_type":{"json":"type"},`, func(id string) string { return `{"id":"` + id + `","type":"order.paid"}` }},
}

// TestSendDeliversEverySchemeAsTheReceiverVerifiesIt holds send to the real receiver for every
// scheme: over a real socket, the receiver verifies the signature (the URL's too, for twilio
// and square, rebuilt as it rebuilds it), claims the event under the id hookctl was given or
// the body holds (GitHub's scoped by -scope), with the type given or in the body, and answers
// the second copy as a duplicate. Public-key sources sign with a key pair from keygen.
func TestSendDeliversEverySchemeAsTheReceiverVerifiesIt(t *testing.T) {
	if len(schemeCases) != len(webhook.Names) {
		t.Fatalf("%d cases for %d schemes: every scheme needs one", len(schemeCases), len(webhook.Names))
	}
	for _, scheme := range webhook.Names {
		t.Run(scheme, func(t *testing.T) {
			tc := schemeCases[scheme]
			secretJSON, key := `"secrets":[{"env":"HOOKCTL_SEND_SECRET"}]`, ""
			if sources.PublicKeyScheme(scheme) {
				code, out, errOut := hookctl(t, "", "keygen", scheme)
				var public string
				if _, err := fmt.Sscanf(out, "public key %s\n", &public); code != 0 || err != nil {
					t.Fatalf("keygen: %d %v\n%s%s", code, err, out, errOut)
				}
				key = out[strings.Index(out, "private key")+len("private key"):]
				key = strings.TrimSpace(key[:strings.Index(key, "\n")])
				secretJSON = `"public_keys":["` + public + `"]`
			}
			// The listener first: a source whose scheme signs the URL is configured with the
			// URL the provider calls (ServeHTTP never takes it from the sender's Host).
			srv := httptest.NewUnstartedServer(nil)
			defer srv.Close()
			urlJSON := ""
			if sources.URLScheme(scheme) {
				urlJSON = `"url":"http://` + srv.Listener.Addr().String() + `/hooks/src",`
			}
			raw := `{"sources":{"src":{"scheme":"` + scheme + `",` + tc.source + urlJSON + secretJSON + `,"retry_horizon":"1h","redrive_window":"1d"}}}`
			file := filepath.Join(t.TempDir(), "sources.json")
			if err := os.WriteFile(file, []byte(raw), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := sources.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // a secret every shared-secret scheme takes
			t.Setenv("HOOKCTL_SEND_SECRET", secret)
			h, rec, err := receivertest.NewHandler(f, map[string]string{"src": secret}, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv.Config.Handler = h
			srv.Start()
			src := f.Sources["src"]

			id := "evt_" + strings.ReplaceAll(scheme, "-", "_") + "_1"
			args := []string{"send", "-sources", file}
			wantID, wantType := id, ""
			if src.EventID.Header != "" {
				args = append(args, "-id", id)
			}
			if src.EventID.ScopeHeader != "" {
				args = append(args, "-scope", "77")
				wantID = "77:" + id
			}
			if src.EventType.Header != "" {
				wantType = "webhook.test"
				args = append(args, "-type", wantType)
			}
			if key != "" {
				args = append(args, "-key", key)
			}
			args = append(args, "src", srv.URL+"/hooks/src")
			body := tc.body(id)
			for i, dup := range []string{`"duplicate":false`, `"duplicate":true`} {
				code, out, errOut := hookctl(t, body+"\n", args...)
				status := "200 OK\n"
				switch scheme {
				case webhook.SendGrid: // a batch's answer counts its duplicates
					dup = map[int]string{0: `"duplicates":0`, 1: `"duplicates":1`}[i]
				case webhook.Discord: // which wants 204 and nothing else, duplicate or not
					status, dup = "204 No Content\n", ""
				}
				if code != 0 || !strings.HasPrefix(out, status) || !strings.Contains(out, dup) {
					t.Fatalf("send %d: exit %d\n%s%s\nwant %s and %s", i+1, code, out, errOut, status, dup)
				}
			}
			got := rec.Last().Event
			if wantType == "" {
				wantType = got.Type // the body's; what matters is that it reached the receiver
			}
			if got.ID != wantID || got.Type != wantType || len(rec.All()) != 1 {
				t.Fatalf("claimed %q (type %q), %d commits; want %q (type %q), once", got.ID, got.Type, len(rec.All()), wantID, wantType)
			}
		})
	}
}

// TestSendRefusesAFlagTheSourceWouldNotRead: a flag for something the source reads elsewhere
// would be silently dropped; send refuses it, naming the flag, and asks for what is missing.
func TestSendRefusesAFlagTheSourceWouldNotRead(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sources.json")
	os.WriteFile(file, []byte(`{"sources":{
		"stripe":{"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"1d"},
		"github":{"scheme":"github","secrets":[{"env":"S"}],"retry_horizon":"1h"},
		"shop":{"scheme":"standard-webhooks","secrets":[{"env":"S"}],"retry_horizon":"1h"},
		"discord":{"scheme":"discord","public_keys":["`+strings.Repeat("ab", 32)+`"],"event_id":{"json":"event.data.id"}},
		"sms":{"scheme":"twilio","secrets":[{"env":"S"}],"event_type":{"form":"MessageStatus"},"url":"https://hooks.example.com/sms"}}}`), 0o600)
	t.Setenv("S", "secret")
	const url = "http://127.0.0.1:1/hooks/x"
	for _, c := range []struct {
		body string
		args []string
		want string
	}{
		{`{}`, []string{"github"}, "source github reads its event type from the X-GitHub-Event header: pass -type (for example -type push)"},
		{`{"id":"evt_1","type":"t"}`, []string{"-type", "t", "stripe"}, "-type t: source stripe reads its event type from the body (json:type)"},
		{`{"id":"evt_1","type":"t"}`, []string{"-id", "evt_2", "stripe"}, `-id evt_2: source stripe reads its event id from the body (json:id, here "evt_1")`},
		{`{}`, []string{"-scope", "7", "shop"}, "-scope: source shop's event ids are not scoped by a header"},
		{`{}`, []string{"-type", "push", "-delivery", "d", "github"}, "-delivery: source github's delivery id is its event id (X-GitHub-Delivery): pass -id"},
		{`{}`, []string{"discord"}, "source discord verifies with its provider's public keys: sign with the private key of one of them, -key KEY or -key @FILE (hookctl keygen discord makes a pair)"},
		{`{}`, []string{"-key", "k", "shop"}, "-key: source shop's standard-webhooks scheme signs with a shared secret"},
		{`a=b`, []string{"-signed-url", "https://x/y", "sms"}, "-signed-url: source sms signs its configured url https://hooks.example.com/sms"},
		{`{}`, []string{"-signed-url", "https://x/y", "shop"}, "-signed-url: source shop's standard-webhooks scheme does not sign the URL"},
		{`{}`, []string{"nobody"}, `no source "nobody" in ` + file + ` (its sources: discord, github, shop, sms, stripe)`},
	} {
		args := append(append([]string{"send", "-sources", file}, c.args...), url)
		if code, _, errOut := hookctl(t, c.body, args...); code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want %q", c.args, code, errOut, c.want)
		}
	}
}

// TestSendRefusesABodyLambdaWouldNotTake: a body on stdin over Lambda's 6 MB request limit is
// refused whole, nothing sent; one at the limit (less its final newline) is sent whole, never
// cut short and signed as if it were the delivery.
func TestSendRefusesABodyLambdaWouldNotTake(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"S"}],"retry_horizon":"1d"}}}`), 0o600)
	t.Setenv("S", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	var mu sync.Mutex
	var got []int // the bodies' lengths the server was sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, len(b))
		mu.Unlock()
	}))
	defer srv.Close()
	const limit = 6 << 20
	at := `{"type":"order.paid","pad":"` + strings.Repeat("a", limit-30) + `"}`
	if code, _, errOut := hookctl(t, at+"\n", "send", "-stack", "none", "-sources", file, "shop", srv.URL); code != 0 || !slices.Equal(got, []int{limit}) {
		t.Fatalf("a body of %d bytes: exit %d, %q; the server got %v", len(at), code, errOut, got)
	}
	mu.Lock()
	got = nil
	mu.Unlock()
	over := `{"type":"order.paid","pad":"` + strings.Repeat("a", limit-29) + `"}`
	if code, out, errOut := hookctl(t, over, "send", "-stack", "none", "-sources", file, "shop", srv.URL); code != 1 || !strings.Contains(errOut, "over 6 MiB") || out != "" || len(got) != 0 {
		t.Errorf("a body of %d bytes: exit %d, %q %q; the server got %v; want it refused, naming the limit, nothing sent", len(over), code, out, errOut, got)
	}
}

// TestRebuiltURL: what the receiver rebuilds from a request posted to a URL: https, and on the
// emulator's path form the domain the emulator reports and the path the function sees.
func TestRebuiltURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://127.0.0.1:4566/_aws/execute-api/a1b2c3/hooks/sms":          "https://a1b2c3.execute-api.localhost/hooks/sms",
		"http://127.0.0.1:4566/_aws/execute-api/a1b2c3/$default/hooks/sms": "https://a1b2c3.execute-api.localhost/hooks/sms",
		"http://127.0.0.1:8080/hooks/sms?rc=5":                             "https://127.0.0.1:8080/hooks/sms?rc=5",
		"https://abc.execute-api.eu-west-1.amazonaws.com/hooks/sms":        "https://abc.execute-api.eu-west-1.amazonaws.com/hooks/sms",
	} {
		if got, err := rebuiltURL(in); err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
}

// TestInspectTakesTheProvidersOwnID: GitHub's claim is <hook-id>:<delivery GUID>; inspect finds
// it from the GUID alone (saying which hook id to pass next time), with -scope, or whole.
func TestInspectTakesTheProvidersOwnID(t *testing.T) {
	const guid = "6f1bb2f0-9a4e-11ef-8c6d-1b2c3d4e5f60"
	table := commitClaim(t, "github", "4242:"+guid)
	file := filepath.Join(t.TempDir(), "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"github":{"scheme":"github","secrets":[{"env":"S"}],"retry_horizon":"1h"}}}`), 0o600)
	for name, c := range map[string]struct {
		args []string
		note string
	}{
		"the GUID":            {[]string{"github", guid}, "hookctl: github's ids are <scope>:<id>; found 4242:" + guid + " by scanning the table (pass -scope 4242 to read it directly)\n"},
		"the GUID and -scope": {[]string{"-scope", "4242", "github", guid}, ""},
		"the claim's id":      {[]string{"github", "4242:" + guid}, ""},
	} {
		code, out, errOut := hookctl(t, "", append([]string{"inspect", "-stack", "none", "-table", table, "-sources", file}, c.args...)...)
		if code != 0 || !strings.Contains(out, "EVT#github#4242:"+guid) || errOut != c.note {
			t.Errorf("%s: exit %d\n%s\nstderr %q, want %q", name, code, out, errOut, c.note)
		}
	}
	for _, args := range [][]string{{"github", "6f1bb2f0"}, {"-scope", "1", "github", guid}, {"-scope", "4242", "github", "4242:" + guid}} {
		if code, _, errOut := hookctl(t, "", append([]string{"inspect", "-stack", "none", "-table", table, "-sources", file}, args...)...); code != 1 {
			t.Errorf("%v: exit %d %s, want no claim found", args, code, errOut)
		}
	}
}

// TestTheGUIDAloneFindsOnlyOneHooksClaim: the scan for a GUID alone takes a claim
// <hook id>:<guid>, a hook id having no ':' ("1:x:abc" is hook 1's delivery "x:abc", not one of
// "abc"), and refuses a GUID two hooks' claims share, naming each -scope, acting on neither.
func TestTheGUIDAloneFindsOnlyOneHooksClaim(t *testing.T) {
	client, table := testTable(t)
	const guid = "6f1bb2f0-9a4e-11ef-8c6d-1b2c3d4e5f60"
	refuse := map[string]outbox.Executor{"ci": outbox.ExecutorFunc(func(context.Context, outbox.Task) error { return outbox.Permanent(errors.New("422")) })}
	for _, id := range []string{"111:" + guid, "222:" + guid, "1:x:abc", "7:x:def", "8:def"} {
		commitAndRun(t, client, table, "github", id, map[string]string{"build": "ci"}, refuse)
	}
	file := filepath.Join(t.TempDir(), "sources.json")
	os.WriteFile(file, []byte(`{"sources":{"github":{"scheme":"github","secrets":[{"env":"S"}],"retry_horizon":"1h"}}}`), 0o600)
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"inspect", "github", guid}, 1, []string{"-scope 111", "-scope 222"}},
		{[]string{"redrive", "github", guid}, 1, []string{"-scope 111", "-scope 222"}},
		{[]string{"inspect", "github", "abc"}, 1, []string{"no claim"}},
		{[]string{"redrive", "github", "abc"}, 1, []string{"no claim"}},
		{[]string{"redrive", "-scope", "1:x", "github", "abc"}, 1, []string{"no ':'"}},
		{[]string{"redrive", "github", "def"}, 0, []string{"re-drove build", "found 8:def", "-scope 8 "}},
	} {
		code, out, errOut := hookctl(t, "", append([]string{c.args[0], "-stack", "none", "-table", table, "-sources", file}, c.args[1:]...)...)
		for _, w := range c.want {
			if code != c.code || !strings.Contains(out+errOut, w) {
				t.Errorf("%v: exit %d, want %d and %q\n%s%s", c.args, code, c.code, w, out, errOut)
			}
		}
	}
	for _, id := range []string{"111:" + guid, "222:" + guid, "1:x:abc", "7:x:def", "8:def"} {
		cl, err := dedup.GetClaim(context.Background(), client, table, "github", id)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: dedup.IntentPending, false: dedup.IntentParked}[id == "8:def"]; cl.Intents["build"].Status != want {
			t.Errorf("%s: %s, want %s", id, cl.Intents["build"].Status, want)
		}
	}
}

// TestKeygenRefusesASharedSecretScheme: keygen makes keys for the public-key schemes only (its
// pairs are held to the receiver by the test above).
func TestKeygenRefusesASharedSecretScheme(t *testing.T) {
	t.Parallel()
	if code, _, errOut := hookctl(t, "", "keygen", "stripe"); code != 1 || !strings.Contains(errOut, "keygen is for discord and sendgrid") {
		t.Fatalf("%d %s", code, errOut)
	}
	var names []string
	for _, n := range webhook.Names {
		if sources.PublicKeyScheme(n) {
			names = append(names, n)
		}
	}
	if !slices.Equal(names, []string{webhook.Discord, webhook.SendGrid}) {
		t.Fatalf("public-key schemes %v: keygen makes keys for discord and sendgrid only", names)
	}
}
