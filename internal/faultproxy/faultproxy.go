// Package faultproxy is a failure proxy for tests: a TLS endpoint on loopback that sits between
// an AWS SDK client and the emulator, forwards each call to the emulator's real service, and
// fails it at a chosen point on real sockets: the dial refused, the connection reset during
// the TLS handshake (nothing of the request written), the request forwarded and the connection
// reset before the answer (the service acted), the answer cut mid-body, an error answered in
// the service's own shape without forwarding (or after forwarding), or the answer held until
// the client gives up.
//
// The client speaks HTTPS to the proxy (an httptest TLS server; Proxy.Client trusts its
// certificate), as it does to AWS: a reset during the handshake is then a failure before any
// byte of the request, which a plain-HTTP reset right after accept cannot promise (the
// client's write races it). Each connection carries one exchange (the proxy answers with
// Connection: close), so an SDK retry is a new connection and meets the fault again.
//
// What the service did is read from the service itself (a queue's messages, a state machine's
// executions), never from the proxy: the proxy only says when every request it forwarded has
// been answered by the emulator (Wait).
package faultproxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/faults"
)

// Fault is where the proxy fails a call.
type Fault int

// The failure points, in the order a call passes them.
const (
	// Forward passes the request to the service and its answer back: no failure.
	Forward Fault = iota
	// Refuse: nothing listens, the client's dial is refused. It applies to the whole proxy,
	// after its first Config.Pass connections.
	Refuse
	// ResetHandshake accepts the connection, reads the client's TLS ClientHello and resets it:
	// the client wrote nothing of its request.
	ResetHandshake
	// ResetAfterRequest forwards the request (the service acts on it) and resets the
	// connection instead of answering.
	ResetAfterRequest
	// CutAnswer forwards the request and relays the answer's status line, its headers and half
	// its body (an answer without a body is cut inside its headers), then resets.
	CutAnswer
	// Answer answers Config.Answer without forwarding: the service never sees the request.
	Answer
	// ActThenAnswer forwards the request (the service acts on it), throws its answer away and
	// answers Config.Answer instead.
	ActThenAnswer
	// Hold forwards the request and holds the answer until the client closes the connection
	// (its timeout).
	Hold
)

var faultNames = [...]string{"forward", "refuse", "reset during the handshake", "reset after the request",
	"cut answer", "answer", "act then answer", "hold"}

func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "fault " + strconv.Itoa(int(f))
}

// connectionLevel reports whether f happens before any request is read.
func (f Fault) connectionLevel() bool { return f == Refuse || f == ResetHandshake }

// Reply is an answer the proxy makes itself: an error in the service's own shape.
type Reply struct {
	Status int
	Header http.Header
	Body   string
}

// Config says what the proxy does.
type Config struct {
	// Upstream is the service's endpoint (http://127.0.0.1:4566).
	Upstream string
	// Fault is what happens to the calls Match accepts (to every connection, for Refuse and
	// ResetHandshake).
	Fault Fault
	// Choose, when set, draws the fault for each connection instead of Fault, and the answer
	// for Answer and ActThenAnswer (Answer when its Status is 0): a randomized schedule. It
	// may not return Refuse.
	Choose func() (Fault, Reply)
	// Match picks the requests a request-level fault applies to (nil: every request); the
	// others are forwarded untouched. Operation names a request's operation.
	Match func(r *http.Request, body []byte) bool
	// Pass is how many connections are served untouched before a connection-level fault
	// applies (a client's first call that the one under test depends on, such as reading a
	// state machine's type).
	Pass int
	// Answer is what Answer and ActThenAnswer reply.
	Answer Reply
}

// Proxy is a running failure proxy.
type Proxy struct {
	// URL is the proxy's endpoint, https://127.0.0.1:<port>: the client's BaseEndpoint.
	URL string

	cfg      Config
	upstream *url.URL
	srv      *httptest.Server
	ln       *listener
	forward  *http.Transport
	inflight sync.WaitGroup // forwarded requests not yet answered by the service
}

// Start runs a proxy for the test; it stops when the test ends.
func Start(t testing.TB, cfg Config) *Proxy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// connKey carries a request's connection, and so the fault drawn for it, to the handler.
type connKey struct{}

// New runs a proxy; Close stops it.
func New(cfg Config) (*Proxy, error) {
	up, err := url.Parse(cfg.Upstream)
	if err != nil || up.Host == "" {
		return nil, fmt.Errorf("faultproxy: upstream %q is not a URL", cfg.Upstream)
	}
	if cfg.Pass < 0 {
		return nil, fmt.Errorf("faultproxy: Pass %d", cfg.Pass)
	}
	p := &Proxy{cfg: cfg, upstream: up,
		forward: &http.Transport{MaxIdleConnsPerHost: 16, ResponseHeaderTimeout: 2 * time.Minute}}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	ln := &listener{Listener: p.srv.Listener, cfg: cfg, done: make(chan struct{})}
	p.srv.Listener, p.ln = ln, ln
	p.srv.Config.SetKeepAlivesEnabled(false)
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes it resets on purpose
	p.srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c.(*tls.Conn).NetConn())
	}
	if ln.refusing() && cfg.Pass == 0 {
		if err := ln.refuse(); err != nil {
			return nil, err
		}
	}
	p.srv.StartTLS()
	p.URL = p.srv.URL
	return p, nil
}

// Client is an HTTP client that trusts the proxy's certificate and opens a connection per
// request: the SDK's HTTPClient.
func (p *Proxy) Client() *http.Client {
	tr := p.srv.Client().Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr}
}

// Wait returns once every request the proxy forwarded has been answered by the service (the
// client may have given up long before): what the service did is then done.
func (p *Proxy) Wait() { p.inflight.Wait() }

// Close stops the proxy: it stops listening, resets the connections it holds, and waits for
// its forwarded requests. It returns the error of keeping the port bound for Refuse after Pass
// connections, if that failed: the port was then free for another listener to take.
func (p *Proxy) Close() error {
	p.srv.CloseClientConnections()
	p.srv.Close() // waits for the accepting goroutine, the one that sets ln.err
	p.inflight.Wait()
	p.forward.CloseIdleConnections()
	return p.ln.err
}

// listener draws each connection's fault as it accepts it, and for Refuse stops listening
// once the connections that pass are accepted.
type listener struct {
	net.Listener
	cfg Config

	n     int      // connections accepted
	bound *refuser // the port, kept without listening (Refuse)
	err   error    // why the port could not be kept bound, for Close to return
	done  chan struct{}
	once  sync.Once
}

func (l *listener) refusing() bool { return l.cfg.Choose == nil && l.cfg.Fault == Refuse }

// Accept runs on the server's one accepting goroutine, which alone touches n, bound and err.
func (l *listener) Accept() (net.Conn, error) {
	if l.bound != nil {
		<-l.done // the port stays bound until the proxy closes
		l.bound.close()
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	fc := &conn{Conn: c, fault: l.cfg.Fault, reply: l.cfg.Answer}
	if l.cfg.Choose != nil {
		var r Reply
		if fc.fault, r = l.cfg.Choose(); r.Status != 0 {
			fc.reply = r
		}
	}
	if fc.fault.connectionLevel() && l.n < l.cfg.Pass {
		fc.fault = Forward
	}
	l.n++
	if l.refusing() && l.n >= l.cfg.Pass {
		// The last connection that passes: nothing listens from now on. Should the port not
		// stay bound, Close says so: this goroutine has no one to tell.
		l.err = l.refuse()
	}
	return fc, nil
}

// refuse stops listening and keeps the port bound without listening, so that a dial to it is
// refused (and no other listener is handed the port meanwhile).
func (l *listener) refuse() error {
	addr := l.Addr().(*net.TCPAddr)
	l.Listener.Close()
	r, err := keepBound(addr)
	if err != nil {
		return fmt.Errorf("faultproxy: keep %s bound: %w", addr, err)
	}
	l.bound = r
	return nil
}

// keepBound binds a port without listening (bindOnly): a variable so that a test can make it
// fail.
var keepBound = bindOnly

func (l *listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// conn is an accepted connection with the fault drawn for it.
type conn struct {
	net.Conn
	fault Fault
	reply Reply
}

// Read fails a ResetHandshake connection as soon as the client's ClientHello arrives.
func (c *conn) Read(b []byte) (int, error) {
	if c.fault != ResetHandshake {
		return c.Conn.Read(b)
	}
	_, _ = c.Conn.Read(b[:1])
	c.reset()
	return 0, net.ErrClosed
}

// reset closes the connection with a TCP reset rather than an orderly close.
func (c *conn) reset() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Conn.Close()
}

func (p *Proxy) serve(w http.ResponseWriter, req *http.Request) {
	c := req.Context().Value(connKey{}).(*conn)
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	fault := c.fault
	if fault.connectionLevel() || (p.cfg.Match != nil && !p.cfg.Match(req, body)) {
		fault = Forward
	}
	if fault == Answer {
		reply(w, c.reply)
		return
	}
	answer, err := p.roundTrip(req, body)
	if err != nil {
		reply(w, Reply{Status: http.StatusBadGateway, Body: "faultproxy: " + err.Error()})
		return
	}
	switch fault {
	case ResetAfterRequest:
		c.reset()
	case CutAnswer:
		tc, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		var b bytes.Buffer
		_ = (&http.Response{StatusCode: answer.Status, ProtoMajor: 1, ProtoMinor: 1, Header: answer.Header, Close: true,
			ContentLength: int64(len(answer.Body)), Body: io.NopCloser(strings.NewReader(answer.Body))}).Write(&b)
		n := b.Len() - len(answer.Body) + len(answer.Body)/2
		if answer.Body == "" {
			n = b.Len() / 2 // cut inside the headers
		}
		_, _ = tc.Write(b.Bytes()[:n])
		c.reset()
	case ActThenAnswer:
		reply(w, c.reply)
	case Hold:
		select {
		case <-req.Context().Done(): // the client gave up and closed, or the proxy closed
		case <-time.After(5 * time.Minute):
		}
		c.reset()
	default:
		reply(w, answer)
	}
}

// roundTrip forwards the request to the service and reads its whole answer, whether or not
// the client is still there.
func (p *Proxy) roundTrip(req *http.Request, body []byte) (Reply, error) {
	p.inflight.Add(1)
	defer p.inflight.Done()
	u := *p.upstream
	u.Path, u.RawPath, u.RawQuery = req.URL.Path, req.URL.RawPath, req.URL.RawQuery
	out, err := http.NewRequestWithContext(context.Background(), req.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	out.Header = req.Header.Clone()
	out.Header.Del("Connection")
	out.Host = req.Host
	resp, err := p.forward.RoundTrip(out)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	resp.Header.Del("Connection")
	resp.Header.Del("Keep-Alive")
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: string(answer)}, err
}

func reply(w http.ResponseWriter, r Reply) {
	h := w.Header()
	maps.Copy(h, r.Header)
	h.Set("Content-Length", strconv.Itoa(len(r.Body)))
	if h.Get("Content-Type") == "" {
		h["Content-Type"] = nil // no type the service did not send
	}
	w.WriteHeader(r.Status)
	_, _ = io.WriteString(w, r.Body)
}

// Operation is the AWS operation a request calls: its X-Amz-Target's (JSON protocols), its
// Action (query protocols), or "Invoke" for a Lambda invocation.
func Operation(r *http.Request, body []byte) string {
	if r.Header.Get("X-Amz-Target") != "" {
		return faults.Operation(r)
	}
	if strings.HasSuffix(r.URL.Path, "/invocations") {
		return "Invoke"
	}
	if v, err := url.ParseQuery(string(body)); err == nil && v.Get("Action") != "" {
		return v.Get("Action")
	}
	return r.Method + " " + r.URL.Path
}

// Calls matches the requests of the named operations.
func Calls(ops ...string) func(*http.Request, []byte) bool {
	return func(r *http.Request, body []byte) bool { return slices.Contains(ops, Operation(r, body)) }
}
