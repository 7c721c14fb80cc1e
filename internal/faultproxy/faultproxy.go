// Package faultproxy is a failure proxy for tests: a TLS endpoint on loopback that sits between
// an AWS SDK client and the emulator, forwards each call to the emulator's real service, and
// fails it at a chosen point on real sockets: the dial refused, the connection reset during
// the TLS handshake (nothing of the request written), the request forwarded and the connection
// reset before the answer (the service acted), the answer cut mid-body, an error answered in
// the service's own shape without forwarding (or after forwarding), or the answer held until
// the client gives up.
//
// The client speaks HTTPS to the proxy (Proxy.Client trusts its certificate), as it does to
// AWS: a reset during the handshake is then a failure before any byte of the request, which a
// plain-HTTP reset right after accept cannot promise (the client's write races it). Each
// connection carries one exchange (the proxy answers with Connection: close), so an SDK retry
// is a new connection and meets the fault again.
//
// What the service did is read from the service itself (a queue's messages, a state machine's
// executions), never from the proxy: the proxy only says when every request it forwarded has
// been answered by the emulator (Wait).
package faultproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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
	ln       net.Listener
	tls      *tls.Config
	pool     *x509.CertPool
	forward  *http.Transport

	mu       sync.Mutex
	conns    int
	refusing *refuser
	open     map[net.Conn]bool
	inflight sync.WaitGroup // forwarded requests not yet answered by the service
	handlers sync.WaitGroup
	closed   bool
}

// Start runs a proxy for the test; it stops when the test ends.
func Start(t testing.TB, cfg Config) *Proxy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// New runs a proxy; Close stops it.
func New(cfg Config) (*Proxy, error) {
	up, err := url.Parse(cfg.Upstream)
	if err != nil || up.Host == "" {
		return nil, fmt.Errorf("faultproxy: upstream %q is not a URL", cfg.Upstream)
	}
	if cfg.Pass < 0 {
		return nil, fmt.Errorf("faultproxy: Pass %d", cfg.Pass)
	}
	cert, pool, err := certificate()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		URL:      "https://" + ln.Addr().String(),
		cfg:      cfg,
		upstream: up,
		ln:       ln,
		tls:      &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}},
		pool:     pool,
		forward:  &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, ResponseHeaderTimeout: 2 * time.Minute},
		open:     map[net.Conn]bool{},
	}
	if cfg.Choose == nil && cfg.Fault == Refuse && cfg.Pass == 0 {
		if err := p.refuse(); err != nil {
			return nil, err
		}
		return p, nil
	}
	p.handlers.Add(1)
	go p.accept()
	return p, nil
}

// Client is an HTTP client that trusts the proxy's certificate and opens a connection per
// request: the SDK's HTTPClient.
func (p *Proxy) Client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:             nil,
		TLSClientConfig:   &tls.Config{RootCAs: p.pool},
		DisableKeepAlives: true,
		ForceAttemptHTTP2: false,
	}}
}

// Connections is how many connections the proxy accepted.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}

// Wait returns once every request the proxy forwarded has been answered by the service (the
// client may have given up long before): what the service did is then done.
func (p *Proxy) Wait() { p.inflight.Wait() }

// Close stops the proxy: it stops listening, resets the connections it holds, and waits for
// its forwarded requests.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.open {
		c.Close()
	}
	r := p.refusing
	p.mu.Unlock()
	p.ln.Close()
	if r != nil {
		r.close()
	}
	p.handlers.Wait()
	p.inflight.Wait()
	p.forward.CloseIdleConnections()
}

func (p *Proxy) accept() {
	defer p.handlers.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		n := p.conns
		p.conns++
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.open[c] = true
		p.handlers.Add(1)
		p.mu.Unlock()
		fault, reply := p.cfg.Fault, p.cfg.Answer
		if p.cfg.Choose != nil {
			var r Reply
			if fault, r = p.cfg.Choose(); r.Status != 0 {
				reply = r
			}
		}
		if fault.connectionLevel() && n < p.cfg.Pass {
			fault = Forward
		}
		if p.cfg.Choose == nil && p.cfg.Fault == Refuse && n+1 >= p.cfg.Pass {
			// The last connection that passes: nothing listens from now on.
			if err := p.refuse(); err != nil {
				panic(err)
			}
		}
		go func() {
			defer p.handlers.Done()
			defer func() {
				p.mu.Lock()
				delete(p.open, c)
				p.mu.Unlock()
			}()
			p.serve(c, fault, reply)
		}()
		if p.cfg.Choose == nil && p.cfg.Fault == Refuse && n+1 >= p.cfg.Pass {
			return
		}
	}
}

// refuse stops listening and keeps the port bound without listening, so that a dial to it is
// refused (and no other listener is handed the port meanwhile).
func (p *Proxy) refuse() error {
	addr := p.ln.Addr().(*net.TCPAddr)
	p.ln.Close()
	r, err := bindOnly(addr)
	if err != nil {
		return fmt.Errorf("faultproxy: keep %s bound: %w", addr, err)
	}
	p.mu.Lock()
	p.refusing = r
	p.mu.Unlock()
	return nil
}

func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

func (p *Proxy) serve(raw net.Conn, fault Fault, reply Reply) {
	if fault == ResetHandshake {
		_ = raw.SetReadDeadline(time.Now().Add(time.Minute))
		var b [1]byte
		_, _ = raw.Read(b[:]) // the ClientHello's first byte
		reset(raw)
		return
	}
	defer raw.Close()
	c := tls.Server(raw, p.tls)
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	if err := c.Handshake(); err != nil {
		return
	}
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	if fault.connectionLevel() || (p.cfg.Match != nil && !p.cfg.Match(req, body)) {
		fault = Forward
	}
	if fault == Answer {
		_ = writeReply(c, reply)
		return
	}
	status, header, answer, err := p.roundTrip(req, body)
	if err != nil {
		_ = writeReply(c, Reply{Status: http.StatusBadGateway, Body: "faultproxy: " + err.Error()})
		return
	}
	switch fault {
	case ResetAfterRequest:
		reset(raw)
	case CutAnswer:
		head := responseHead(status, header, len(answer))
		if len(answer) == 0 {
			head = head[:len(head)/2]
		}
		_, _ = c.Write(append(head, answer[:len(answer)/2]...))
		reset(raw)
	case ActThenAnswer:
		_ = writeReply(c, reply)
	case Hold:
		_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
		_, _ = io.Copy(io.Discard, c) // until the client gives up and closes
	default:
		_, _ = c.Write(append(responseHead(status, header, len(answer)), answer...))
	}
}

// roundTrip forwards the request to the service and reads its whole answer, whether or not
// the client is still there.
func (p *Proxy) roundTrip(req *http.Request, body []byte) (int, http.Header, []byte, error) {
	p.inflight.Add(1)
	defer p.inflight.Done()
	u := *p.upstream
	u.Path, u.RawPath, u.RawQuery = req.URL.Path, req.URL.RawPath, req.URL.RawQuery
	out, err := http.NewRequestWithContext(context.Background(), req.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	out.Header = req.Header.Clone()
	out.Header.Del("Connection")
	out.Host = req.Host
	out.ContentLength = int64(len(body))
	resp, err := p.forward.RoundTrip(out)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, answer, nil
}

// responseHead is an HTTP/1.1 status line and headers for a body of n bytes, closing the
// connection after it.
func responseHead(status int, header http.Header, n int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	for _, k := range []string{"Connection", "Content-Length", "Transfer-Encoding", "Keep-Alive"} {
		h.Del(k)
	}
	h.Set("Content-Length", strconv.Itoa(n))
	h.Set("Connection", "close")
	_ = h.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

func writeReply(w io.Writer, r Reply) error {
	_, err := w.Write(append(responseHead(r.Status, r.Header, len(r.Body)), r.Body...))
	return err
}

// Operation is the AWS operation a request calls: its X-Amz-Target's (JSON protocols), its
// Action (query protocols), or "Invoke" for a Lambda invocation.
func Operation(r *http.Request, body []byte) string {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		return t[strings.LastIndexByte(t, '.')+1:]
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
	return func(r *http.Request, body []byte) bool {
		op := Operation(r, body)
		for _, o := range ops {
			if o == op {
				return true
			}
		}
		return false
	}
}

var (
	certOnce sync.Once
	certTLS  tls.Certificate
	certPool *x509.CertPool
	certErr  error
)

// certificate is a self-signed certificate for 127.0.0.1, made once per process.
func certificate() (tls.Certificate, *x509.CertPool, error) {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			certErr = err
			return
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1),
			Subject:      pkix.Name{CommonName: "faultproxy"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IsCA:         true, BasicConstraintsValid: true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			certErr = err
			return
		}
		leaf, err := x509.ParseCertificate(der)
		if err != nil {
			certErr = err
			return
		}
		certTLS = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
		certPool = x509.NewCertPool()
		certPool.AddCert(leaf)
	})
	return certTLS, certPool, certErr
}
