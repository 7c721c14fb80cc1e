package faultproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// upstream is a service that counts the requests it answered.
func upstream(t *testing.T) (string, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"answer":"from the service, long enough to be cut in two"}`)
	}))
	t.Cleanup(s.Close)
	return s.URL, &n
}

// call posts one request through p and reports whether any of it was written.
func call(p *Proxy, timeout time.Duration, target string) (status int, body string, wrote bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var w atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { w.Store(true) }})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/", strings.NewReader(`{"q":1}`))
	req.Header.Set("X-Amz-Target", target)
	resp, err := p.Client().Do(req)
	if err != nil {
		return 0, "", w.Load(), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), w.Load(), err
}

func TestEveryFaultFailsTheCallWhereItSays(t *testing.T) {
	t.Parallel()
	reply := Reply{Status: 503, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}}, Body: `{"__type":"ServiceUnavailable"}`}
	for _, c := range []struct {
		fault   Fault
		status  int  // 0: the call fails
		wrote   bool // the client wrote its request
		reached int32
	}{
		{Forward, 200, true, 1},
		{Refuse, 0, false, 0},
		{ResetHandshake, 0, false, 0},
		{ResetAfterRequest, 0, true, 1},
		{CutAnswer, 0, true, 1},
		{Answer, 503, true, 0},
		{ActThenAnswer, 503, true, 1},
		{Hold, 0, true, 1},
	} {
		t.Run(c.fault.String(), func(t *testing.T) {
			t.Parallel()
			up, n := upstream(t)
			p := Start(t, Config{Upstream: up, Fault: c.fault, Answer: reply})
			status, body, wrote, err := call(p, 2*time.Second, "S.Op")
			p.Wait()
			if c.status == 0 && err == nil || c.status != 0 && status != c.status {
				t.Fatalf("status %d, %v: want %d", status, err, c.status)
			}
			if wrote != c.wrote || n.Load() != c.reached {
				t.Fatalf("wrote %v, the service answered %d: want %v, %d", wrote, n.Load(), c.wrote, c.reached)
			}
			switch c.fault {
			case Refuse:
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Fatalf("%v: want the dial refused", err)
				}
			case Hold:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%v: want the client's timeout", err)
				}
			case Answer, ActThenAnswer:
				if body != reply.Body {
					t.Fatalf("body %q", body)
				}
			}
		})
	}
}

func TestPassAndMatchLetTheOtherCallsThrough(t *testing.T) {
	t.Parallel()
	up, n := upstream(t)
	p := Start(t, Config{Upstream: up, Fault: Refuse, Pass: 1})
	if status, _, _, err := call(p, 2*time.Second, "S.Describe"); err != nil || status != 200 {
		t.Fatalf("the first connection: %d, %v", status, err)
	}
	if _, _, _, err := call(p, 2*time.Second, "S.Op"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("the second: %v, want refused", err)
	}

	p = Start(t, Config{Upstream: up, Fault: ResetAfterRequest, Match: Calls("Op")})
	if status, _, _, err := call(p, 2*time.Second, "S.Describe"); err != nil || status != 200 {
		t.Fatalf("another operation: %d, %v", status, err)
	}
	if _, _, _, err := call(p, 2*time.Second, "S.Op"); err == nil {
		t.Fatal("the matched operation was not reset")
	}
	p.Wait()
	if n.Load() != 3 {
		t.Fatalf("the service answered %d, want 3", n.Load())
	}
}

func TestOperationNamesEveryProtocolsCall(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		target, path, body, want string
	}{
		{"AmazonSQS.SendMessage", "/", `{}`, "SendMessage"},
		{"", "/", "Action=Publish&Version=2010-03-31", "Publish"},
		{"", "/2015-03-31/functions/f/invocations", `{}`, "Invoke"},
	} {
		r := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
		if c.target != "" {
			r.Header.Set("X-Amz-Target", c.target)
		}
		if got := Operation(r, []byte(c.body)); got != c.want {
			t.Errorf("%+v: %q", c, got)
		}
	}
}

func TestChooseDrawsEachConnectionsFault(t *testing.T) {
	t.Parallel()
	up, n := upstream(t)
	draws := []struct {
		fault Fault
		reply Reply
	}{{Answer, Reply{Status: 429, Body: "slow down"}}, {ResetAfterRequest, Reply{}}, {Forward, Reply{}}}
	var i atomic.Int32
	p := Start(t, Config{Upstream: up, Choose: func() (Fault, Reply) {
		d := draws[int(i.Add(1)-1)%len(draws)]
		return d.fault, d.reply
	}})
	if status, body, _, err := call(p, 2*time.Second, "S.Op"); err != nil || status != 429 || body != "slow down" {
		t.Fatalf("the first: %d %q %v", status, body, err)
	}
	if _, _, _, err := call(p, 2*time.Second, "S.Op"); err == nil {
		t.Fatal("the second was not reset")
	}
	if status, _, _, err := call(p, 2*time.Second, "S.Op"); err != nil || status != 200 {
		t.Fatalf("the third: %d %v", status, err)
	}
	p.Wait()
	if n.Load() != 2 {
		t.Fatalf("the service answered %d, want 2", n.Load())
	}
}

// When Refuse cannot keep the port bound, the proxy says so, and nothing listens on the port:
// New returns the error, and with Pass, where the port is let go on the accepting goroutine,
// Close returns it (Start fails the test with it).
func TestAPortRefuseCannotKeepBoundIsAnError(t *testing.T) {
	// Not parallel: it swaps keepBound, which the package's parallel tests call once it ends.
	up, _ := upstream(t)
	var port atomic.Value
	keepBound = func(addr *net.TCPAddr) (*refuser, error) {
		port.Store(addr.String())
		return nil, errors.New("the port is taken")
	}
	defer func() { keepBound = bindOnly }()
	notListening := func(when string) {
		t.Helper()
		if c, err := net.DialTimeout("tcp", port.Load().(string), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: the dial: %v, want refused", when, err)
		}
	}

	if _, err := New(Config{Upstream: up, Fault: Refuse}); err == nil || !strings.Contains(err.Error(), "the port is taken") {
		t.Errorf("New: %v, want the bind's error", err)
	}
	notListening("after New")

	p, err := New(Config{Upstream: up, Fault: Refuse, Pass: 1})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _, err := call(p, 2*time.Second, "S.Describe"); err != nil || status != 200 {
		t.Fatalf("the connection that passes: %d, %v", status, err)
	}
	if _, _, _, err := call(p, 2*time.Second, "S.Op"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the next: %v, want refused", err)
	}
	if err := p.Close(); err == nil || !strings.Contains(err.Error(), "the port is taken") {
		t.Errorf("Close: %v, want the bind's error", err)
	}
	notListening("after Close")
}
