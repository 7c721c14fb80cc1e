package outbox_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

var updateMatrix = flag.Bool("update-matrix", false, "rewrite docs/outbox.md's failure-point matrix from TestTheHTTPFailureMatrix")

// failurePoint is where a call fails, played by a raw TCP server (real sockets): what it does
// with each connection.
type failurePoint struct {
	name  string
	serve func(c net.Conn, br *bufio.Reader, saw func())
	tls   bool // the client speaks https: it writes nothing of the request before a handshake
}

func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// readRequest reads one request in full and counts it as seen by the downstream.
func readRequest(br *bufio.Reader, saw func()) bool {
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	_, _ = io.ReadAll(req.Body)
	saw()
	return true
}

var failurePoints = []failurePoint{
	{"before connect (refused)", nil, false},
	// Connected, and reset before the request is written: an https client writes nothing of
	// it before its handshake, which the reset fails. (A plain http client's write races the
	// reset: either outcome can happen, and each is classified by whether it wrote.)
	{"after connect, before the request (handshake reset)", func(c net.Conn, br *bufio.Reader, _ func()) {
		_, _ = br.ReadByte() // the ClientHello
		reset(c)
	}, true},
	{"after the request was written (reset)", func(c net.Conn, br *bufio.Reader, saw func()) {
		readRequest(br, saw)
		reset(c)
	}, false},
	{"after a partial answer", func(c net.Conn, br *bufio.Reader, saw func()) {
		if readRequest(br, saw) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Le")
		}
		reset(c)
	}, false},
	{"a 5xx (503)", func(c net.Conn, br *bufio.Reader, saw func()) {
		if readRequest(br, saw) {
			_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}
		c.Close()
	}, false},
	{"a timeout (no answer)", func(c net.Conn, br *bufio.Reader, saw func()) {
		if readRequest(br, saw) {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = br.ReadByte() // until the client gives up and closes
		}
		c.Close()
	}, false},
	{"none (200)", func(c net.Conn, br *bufio.Reader, saw func()) {
		if readRequest(br, saw) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}
		c.Close()
	}, false},
}

// failureServer plays p on every connection and counts the requests it read.
func failureServer(t *testing.T, p failurePoint) (url string, seen func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url = "http://" + ln.Addr().String() + "/send"
	if p.tls {
		url = "https://" + ln.Addr().String() + "/send"
	}
	var mu sync.Mutex
	n := 0
	seen = func() int { mu.Lock(); defer mu.Unlock(); return n }
	if p.serve == nil {
		ln.Close() // nothing listens: the dial is refused
		return url, seen
	}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.serve(c, bufio.NewReader(c), func() { mu.Lock(); n++; mu.Unlock() })
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return url, seen
}

// TestTheHTTPFailureMatrix: for every point an HTTP call can fail at, and both semantics, one
// attempt by the real worker against a real TCP server on loopback: how many times the
// downstream saw the request, and what the intent then records. The invariants: at most once,
// the downstream never sees it twice, and the intent is retried only when it cannot have seen
// it; at least once, an intent is done only when the downstream answered 2xx. The table is the
// one in docs/outbox.md (go test ./outbox -run TestTheHTTPFailureMatrix -update-matrix
// rewrites it).
func TestTheHTTPFailureMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var rows []string
	for i, p := range failurePoints {
		cells := []string{p.name}
		for _, amo := range []bool{false, true} {
			url, seen := failureServer(t, p)
			id := fmt.Sprintf("evt_matrix_%d_%t", i, amo)
			e.commitOne(id)
			var x outbox.Executor = &outbox.HTTPExecutor{URL: url, Timeout: 300 * time.Millisecond}
			if amo {
				x = outbox.AtMostOnce(x)
			}
			w := e.worker(func(c *outbox.Config) { c.Executors["email"] = x })
			if _, err := w.Process(context.Background(), e.claim(id)); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			in := e.claim(id).Intents["email.send"]
			n := seen()
			outcome := in.Status
			if in.Status == dedup.IntentPending {
				outcome = "retried"
			}
			switch {
			case amo && n > 1:
				t.Errorf("%s, at most once: the downstream saw it %d times", p.name, n)
			case amo && n > 0 && in.Status == dedup.IntentPending:
				t.Errorf("%s, at most once: retried after the downstream saw it", p.name)
			case in.Status == dedup.IntentDone && p.name != "none (200)":
				t.Errorf("%s: done without a 2xx", p.name)
			case in.Status != dedup.IntentDone && p.name == "none (200)":
				t.Errorf("%s: %+v, want done", p.name, in)
			}
			cells = append(cells, fmt.Sprint(n), outcome)
		}
		rows = append(rows, "| "+strings.Join(cells, " | ")+" |")
	}
	table := "| the call fails | at least once: seen | intent | at most once: seen | intent |\n|---|---|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
	const doc, begin, end = "../docs/outbox.md", "<!-- failure matrix: begin -->\n", "<!-- failure matrix: end -->"
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no failure matrix markers", doc)
	}
	if got := s[i+len(begin) : j]; got != table {
		if *updateMatrix {
			if err := os.WriteFile(doc, []byte(s[:i+len(begin)]+table+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/outbox.md's failure matrix is not what the worker does (-update-matrix rewrites it):\n%s", table)
	}
}
