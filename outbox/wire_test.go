package outbox_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/outbox"
)

// wireServer is a downstream on a raw TCP listener, so a test decides what happens on the
// connection itself: answer, or close it after reading a request (before any answer), as a
// server restarting mid-request or a load balancer dropping an idle connection does. It counts
// the requests it read in full, by Idempotency-Key: what the downstream saw.
type wireServer struct {
	ln   net.Listener
	URL  string
	mu   sync.Mutex
	seen map[string]int
	body map[string]string // the last body read, by key
	// drop says, for the n-th request read in full with key (1-based), whether to close the
	// connection instead of answering; and whether to stop listening too (a replay then meets
	// a refused connection).
	drop func(key string, n int) (drop, stopListening bool)
}

func newWireServer(t *testing.T) *wireServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &wireServer{ln: ln, URL: "http://" + ln.Addr().String() + "/send", seen: map[string]int{}, body: map[string]string{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *wireServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(req.Body)
		key := req.Header.Get("Idempotency-Key")
		s.mu.Lock()
		s.seen[key]++
		s.body[key] = string(b)
		n := s.seen[key]
		drop := s.drop
		s.mu.Unlock()
		if drop != nil {
			if d, stop := drop(key, n); d {
				if stop {
					s.ln.Close()
				}
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // a reset, not a polite close
				}
				return
			}
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	}
}

func (s *wireServer) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[key]
}

// TestAnEmptyAtMostOnceRequestIsNeverReplayedByTheTransport: net/http replays a request on a
// reused connection that the server closed after reading it, when the request has no body
// (http.NoBody) or can rewind it, and carries an Idempotency-Key. An at-most-once intent with
// an empty payload must reach the downstream once, and its failure be one that may have been
// sent; the at-least-once one may be replayed (its key makes that harmless).
func TestAnEmptyAtMostOnceRequestIsNeverReplayedByTheTransport(t *testing.T) {
	t.Parallel()
	for _, payload := range []string{"", `{"to":"ada@example.com"}`} {
		t.Run("payload "+map[bool]string{true: "empty", false: "json"}[payload == ""], func(t *testing.T) {
			t.Parallel()
			s := newWireServer(t)
			s.drop = func(key string, n int) (bool, bool) { return strings.HasSuffix(key, ":once") && n == 1, false }
			x := &outbox.HTTPExecutor{URL: s.URL, Timeout: 2 * time.Second, Client: &http.Client{Transport: &http.Transport{}}}
			prime := task()
			prime.IdempotencyKey = "shop:evt_prime:warm"
			if err := x.Execute(context.Background(), prime); err != nil { // leaves an idle connection to reuse
				t.Fatal(err)
			}
			tk := task()
			tk.IdempotencyKey, tk.Payload, tk.AtMostOnce = "shop:evt_1:once", []byte(payload), true
			err := x.Execute(context.Background(), tk)
			if n := s.count(tk.IdempotencyKey); n != 1 {
				t.Fatalf("the downstream saw the at-most-once request %d times (err %v), want once", n, err)
			}
			if err == nil || outbox.IsNotSent(err) {
				t.Fatalf("%v: want a failure that may have been sent (the server had read the request)", err)
			}
			s.mu.Lock()
			got := s.body[tk.IdempotencyKey]
			s.mu.Unlock()
			if got != payload {
				t.Fatalf("the downstream read %q, want the payload %q", got, payload)
			}
		})
	}
}

// TestAResetAfterTheRequestWasWrittenIsNotANotSent: the server reads the request and drops the
// connection, and by the time anything could try again nothing listens: whatever comes back,
// the request was written, so it may have been sent, never NotSent (which an at-most-once
// intent would be sent again after).
func TestAResetAfterTheRequestWasWrittenIsNotANotSent(t *testing.T) {
	t.Parallel()
	for _, atMostOnce := range []bool{false, true} {
		s := newWireServer(t)
		s.drop = func(key string, n int) (bool, bool) { return strings.HasSuffix(key, ":once"), true }
		x := &outbox.HTTPExecutor{URL: s.URL, Timeout: 2 * time.Second, Client: &http.Client{Transport: &http.Transport{}}}
		prime := task()
		prime.IdempotencyKey = "shop:evt_prime:warm"
		if err := x.Execute(context.Background(), prime); err != nil {
			t.Fatal(err)
		}
		tk := task()
		tk.IdempotencyKey, tk.Payload, tk.AtMostOnce = "shop:evt_2:once", nil, atMostOnce
		err := x.Execute(context.Background(), tk)
		var op *net.OpError
		if err == nil || outbox.IsNotSent(err) {
			t.Fatalf("at-most-once %v: %v (dial error %v): a request the server read is not NotSent", atMostOnce, err, errors.As(err, &op) && op.Op == "dial")
		}
	}
}

// TestARefusedConnectionIsNotSent: nothing listens, nothing was written: NotSent.
func TestARefusedConnectionIsNotSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/send"
	ln.Close()
	for _, atMostOnce := range []bool{false, true} {
		tk := task()
		tk.AtMostOnce = atMostOnce
		if err := (&outbox.HTTPExecutor{URL: url, Timeout: time.Second}).Execute(context.Background(), tk); !outbox.IsNotSent(err) {
			t.Fatalf("at-most-once %v: %v, want NotSent", atMostOnce, err)
		}
	}
}
