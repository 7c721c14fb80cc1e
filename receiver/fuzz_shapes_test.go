package receiver_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

// FuzzFormAndBatchBodies feeds hostile bodies to the form, form:<key> and batch readers,
// signed (so they reach the reader) and forged: nothing panics, a signed body is accepted (200)
// or refused as malformed (400) and nothing else, every claimed id is in the body, and a forged
// body is never accepted.
func FuzzFormAndBatchBodies(f *testing.F) {
	file, err := sources.Parse([]byte(`{"sources":{
  "form":    {"scheme":"slack","secrets":[{"env":"S"}],"body":"form","event_id":{"form":"id"},"event_type":{"form":"type"}},
  "actions": {"scheme":"slack","secrets":[{"env":"S"}],"body":"form:payload","event_id":{"json":"trigger_id"},"event_type":{"json":"type"}},
  "batch":   {"scheme":"slack","secrets":[{"env":"S"}],"batch":true,"event_id":{"json":"id"},"event_type":{"json":"type"}}}}`))
	if err != nil {
		f.Fatal(err)
	}
	secrets := map[string]string{"form": "s", "actions": "s", "batch": "s"}
	for _, seed := range []string{
		"id=1&type=t", "id=1&id=2&type=t", "id=%zz&type=t", "type=t", "id=&type=t", ";;;",
		`payload=%7B%22trigger_id%22%3A%221%22%2C%22type%22%3A%22t%22%7D`, "payload=1&payload=2", "payload=%7B",
		`[{"id":"1","type":"t"},{"id":"2","type":"t"}]`, `[{"id":"1","type":"t"},{"id":"1","type":"t"}]`, `[]`, `[1,2]`, `[{"id":"1"}]`, `{"id":"1","type":"t"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		h, rec, err := receivertest.NewHandler(file, secrets, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, source := range []string{"form", "actions", "batch"} {
			req, err := receivertest.Request(file, source, "s", []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := h.Handle(context.Background(), req)
			if resp.StatusCode != 200 && resp.StatusCode != 400 {
				t.Fatalf("%s %q: %d %s", source, body, resp.StatusCode, resp.Body)
			}
			forged, _ := receivertest.Request(file, source, "not-s", []byte(body))
			if resp, _ := h.Handle(context.Background(), forged); resp.StatusCode != 401 {
				t.Fatalf("%s %q forged: %d %s", source, body, resp.StatusCode, resp.Body)
			}
		}
		for _, c := range rec.All() {
			if c.Event.ID == "" || !strings.Contains(body, c.Event.ID) && !strings.Contains(strings.ReplaceAll(body, "+", " "), c.Event.ID) && !decodedContains(body, c.Event.ID) {
				t.Fatalf("claimed id %q, which %q does not hold", c.Event.ID, body)
			}
		}
	})
}

// decodedContains reports whether the form-decoded body holds s (a form's id may be escaped).
func decodedContains(body, s string) bool {
	for _, part := range strings.FieldsFunc(body, func(r rune) bool { return r == '&' || r == '=' }) {
		if dec, err := url.QueryUnescape(part); err == nil && strings.Contains(dec, s) {
			return true
		}
	}
	return false
}
