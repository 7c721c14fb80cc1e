package receiver_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/dedup"
)

// The receiver as an http.Handler: the same statuses and the same single write as through
// API Gateway, over a real HTTP server.
func TestTheReceiverServesPlainHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := httptest.NewServer(e.handler)
	defer srv.Close()
	post := func(path, body string, hdr http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	body := orderBody("msg_http_1", "ord_http_1")
	signed := e.request("shop", body, nil, "msg_http_1")
	hdr := http.Header{}
	for k, v := range signed.Headers {
		hdr.Set(k, v)
	}
	e.counter.Reset()
	if code, got := post("/hooks/shop", body, hdr); code != 200 || got != `{"received":true,"duplicate":false}` {
		t.Fatalf("first delivery: %d %s", code, got)
	}
	if e.counter.Total() != 1 {
		t.Fatalf("%d DynamoDB calls for one delivery, want 1", e.counter.Total())
	}
	if code, got := post("/hooks/shop", body, hdr); code != 200 || got != `{"received":true,"duplicate":true}` {
		t.Fatalf("the same delivery again: %d %s", code, got)
	}
	if n := e.countPrefix(dedup.ClaimKey("shop", "msg_http_1")); n != 1 {
		t.Fatalf("%d claims", n)
	}
	hdr.Set("Webhook-Signature", "v1,AAAA")
	if code, _ := post("/hooks/shop", body, hdr); code != http.StatusUnauthorized {
		t.Fatalf("a forged signature: %d", code)
	}
	if code, _ := post("/hooks/nobody", body, hdr); code != http.StatusNotFound {
		t.Fatalf("an unknown source: %d", code)
	}
	resp, err := srv.Client().Get(srv.URL + "/hooks/shop")
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("a GET: %v %v", resp, err)
	}
	// The largest body any source accepts is 1 MiB (the default); shop's own limit is 64 KiB.
	if code, _ := post("/hooks/shop", string(bytes.Repeat([]byte("x"), 70_000)), hdr); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the source's limit: %d", code)
	}
	if code, _ := post("/hooks/shop", string(bytes.Repeat([]byte("x"), 2<<20)), hdr); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over every source's limit: %d", code)
	}
}
