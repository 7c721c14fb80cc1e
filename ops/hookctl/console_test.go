package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/ops/console"
	"github.com/oncehook/oncehook/outbox"
)

func TestConsoleRefusesAnUnsafeAddressOrATableNotOncehooks(t *testing.T) {
	_, table := testTable(t)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"console", "-table", table, "-addr", "0.0.0.0:0"}, "not a loopback address: set a token"},
		{[]string{"console", "-table", table, "-addr", "0.0.0.0:0", "-token", "1234"}, "the token is guessable"},
		{[]string{"console", "-table", "no-such-table-console", "-addr", "127.0.0.1:0"}, "does not exist"},
		{[]string{"console", "-addr", "127.0.0.1:0", "extra"}, "takes no arguments"},
	} {
		code, _, errOut := hookctl(t, "", c.args...)
		if code != 1 || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: %d %q, want it refused saying %q", c.args, code, errOut, c.says)
		}
	}
}

// hookctl console serves the console package over the table, and stops when its context ends.
func TestConsoleServesTheEventPage(t *testing.T) {
	client, table := testTable(t)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_console", Type: "order.paid", Payload: []byte(`{}`)}, dedup.Plan{}); err != nil {
		t.Fatal(err)
	}
	line, stop := startConsole(t, io.Discard, "-table", table, "-sources", "../../localstack/sources.local.json", "-addr", "127.0.0.1:0", "-read-only")
	browser, base := signIn(t, line, &http.Client{})
	resp, err := browser.Get(base + "/events/shop/evt_console")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "evt_console") || !strings.Contains(string(body), "read-only") {
		t.Fatalf("%d\n%s", resp.StatusCode, body)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d after the context ended", code)
	}
}

// hookctl redrive records who ran it ($USER) on the intent, as the console does.
func TestRedriveRecordsWhoRanIt(t *testing.T) {
	client, table := testTable(t)
	t.Setenv("USER", "ada")
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := store.Commit(ctx, dedup.Event{Source: "shop", ID: "evt_refused", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.New(client, outbox.Config{Table: table, Executors: map[string]outbox.Executor{
		"email": outbox.ExecutorFunc(func(context.Context, outbox.Task) error { return outbox.Permanent(errors.New("422")) })}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := dedup.GetClaim(ctx, client, table, "shop", "evt_refused")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Process(ctx, c); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := hookctl(t, "", "redrive", "-table", table, "shop", "evt_refused"); code != 0 || !strings.Contains(out, "re-drove email.send") {
		t.Fatalf("redrive: %d %s %s", code, out, errOut)
	}
	c, _ = dedup.GetClaim(ctx, client, table, "shop", "evt_refused")
	if in := c.Intents["email.send"]; in.RedrivenBy != "ada (hookctl redrive)" || in.RedrivenAt == "" {
		t.Fatalf("%+v: want the redrive recorded as ada's", in)
	}
}

func TestOperatorIsBoundedAndPrintable(t *testing.T) {
	for user, want := range map[string]string{"": "operator (x)", "ada\n": "ada (x)", strings.Repeat("é", 40): strings.Repeat("é", 30) + " (x)"} {
		t.Setenv("USER", user)
		if got := operator("x"); got != want || dedup.ValidRedrivenBy(got) != nil {
			t.Errorf("USER %q: %q, want %q", user, got, want)
		}
	}
}

// The console's server bounds how long a client may hold a connection at every stage: its
// headers, its body, the answer, an idle keep-alive, and the size of its headers. Without
// them a client that sends slowly (or not at all) keeps a connection and a goroutine forever.
func TestTheConsolesServerBoundsEveryStageOfAConnection(t *testing.T) {
	srv := consoleServer(http.NotFoundHandler())
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout} {
		if d <= 0 {
			t.Errorf("%s is not set", name)
		}
	}
	if srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > http.DefaultMaxHeaderBytes {
		t.Errorf("MaxHeaderBytes %d, want set, at most the default", srv.MaxHeaderBytes)
	}
}

// The token guards the console; ONCEHOOK_CONSOLE_TOKEN is how docs/console.md says to give it
// without putting it on the command line. -token's default is read from that variable, and the
// usage, printed for -h and for any mistyped flag (into a terminal, a shared screen or a CI
// log), never shows it as the flag's default.
func TestTheConsolesUsageDoesNotPrintTheTokenFromTheEnvironment(t *testing.T) {
	const token = "4f1c9a7e2b8d6035e1a9c4f7b2d8e063-from-the-env"
	t.Setenv("ONCEHOOK_CONSOLE_TOKEN", token)
	for _, args := range [][]string{{"console", "-h"}, {"console", "-adr", "127.0.0.1:0"}} {
		_, out, errOut := hookctl(t, "", args...)
		if !strings.Contains(out+errOut, "-token") {
			t.Fatalf("%v: no usage printed:\n%s%s", args, out, errOut)
		}
		if strings.Contains(out+errOut, token) {
			t.Errorf("%v prints the console's token:\n%s%s", args, out, errOut)
		}
	}
}

// hookctl console -sources FILE with a file it cannot read (a typo, or a field this hookctl
// does not know yet: sources.Parse is strict) does not start, as it refuses a table that is
// not oncehook's. Served without the sources file, the console would know none of the
// targets' secrets, so an error quoting a target's path ("Cannot POST /hooks/<token>") would
// be shown whole, and no target flagged at-most-once.
func TestConsoleRefusesToStartWithoutTheSourcesFileItWasGiven(t *testing.T) {
	client, table := testTable(t)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := store.Commit(ctx, dedup.Event{Source: "shop", ID: "evt_echo", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.New(client, outbox.Config{Table: table, Executors: map[string]outbox.Executor{
		"email": outbox.ExecutorFunc(func(context.Context, outbox.Task) error {
			return outbox.Permanent(errors.New(`POST https://hooks.example.test/…: 404 Not Found: "Cannot POST /hooks/T0KEN-SECRET-9x"`))
		})}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := dedup.GetClaim(ctx, client, table, "shop", "evt_echo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Process(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The deployment's file, with a field a newer release added to its target.
	path := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(path, []byte(`{"sources": {"shop": {"scheme": "stripe", "secrets": [{"env": "S"}], "redrive_window": "30d"}},
	  "targets": {"email": {"url": "https://hooks.example.test/hooks/T0KEN-SECRET-9x", "a_field_of_a_newer_release": 4}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var errOut lockedBuilder
	line, stop := startConsole(t, &errOut, "-table", table, "-sources", path, "-addr", "127.0.0.1:0")
	if !strings.Contains(line, "http://") {
		if code := stop(); code == 0 {
			t.Fatalf("exit 0 without serving: %s", errOut.String())
		}
		return // refused: what must hold
	}
	browser, base := signIn(t, line, &http.Client{})
	resp, err := browser.Get(base + "/events/shop/evt_echo")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	stop()
	t.Errorf("hookctl console started without the sources file it was given (stderr: %q); the event page (%d) shows the target's token: %v",
		strings.TrimSpace(errOut.String()), resp.StatusCode, strings.Contains(string(body), "T0KEN-SECRET"))
}

// A page whose AWS call failed says what failed, the error's code, and "the console's log has
// the details, reference <ref>" (docs/console.md: the error itself only in the log, under that
// reference). hookctl console gives the console a Logger writing to its own output, so the
// reference names an entry the operator can find.
func TestConsoleLogsTheErrorAPageGivesAReferenceFor(t *testing.T) {
	client, table := testTable(t)
	var errOut lockedBuilder
	line, stop := startConsole(t, &errOut, "-table", table, "-addr", "127.0.0.1:0")
	browser, base := signIn(t, line, &http.Client{})
	get := func(p string) string {
		resp, err := browser.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	get("/audit") // the table is checked once, on the first page
	// The table goes away under the console (deleted, or the credentials lose access).
	if _, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
		t.Fatal(err)
	}
	page := get("/events/shop/evt_1")
	m := regexp.MustCompile(`reference ([0-9a-f]{8})`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("setup: the page gives no reference:\n%s", page)
	}
	stop()
	if !strings.Contains(errOut.String(), m[1]) {
		t.Errorf("the page names reference %s; hookctl console's output has no such entry:\n%s", m[1], errOut.String())
	}
}

type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startConsole runs hookctl console with args until the test ends (or stop): the line it
// prints first, "" if it ends without one, and stop, which ends it and returns its exit code.
func startConsole(t *testing.T, stderr io.Writer, args ...string) (line string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := run(ctx, append([]string{"console"}, args...), strings.NewReader(""), outW, stderr)
		outW.Close()
		done <- code
	}()
	line, _ = bufio.NewReader(outR).ReadString('\n')
	go io.Copy(io.Discard, outR)
	var once sync.Once
	code := 0
	stop = func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	t.Cleanup(func() { stop() })
	return line, stop
}

// signInLink is the link hookctl console prints: its base address and its token.
var signInLink = regexp.MustCompile(`(https?://\S+)/login\?token=(\S+)`)

// signIn follows the sign-in link in line with a browser's cookie jar: the client, signed in,
// and the console's base address.
func signIn(t *testing.T, line string, client *http.Client) (*http.Client, string) {
	t.Helper()
	m := signInLink.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no sign-in link in %q", line)
	}
	client.Jar, _ = cookiejar.New(nil)
	resp, err := client.Get(m[0])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the sign-in link %s: %d", m[0], resp.StatusCode)
	}
	return client, m[1]
}

// hookctl console prints a link that signs the operator in, with a token of its own making
// when none is given, and answers nothing without it: on loopback too, any process of the
// machine could otherwise re-drive with the operator's AWS credentials.
func TestConsoleSignsInByTheLinkItPrintsAndNothingElse(t *testing.T) {
	_, table := testTable(t)
	t.Setenv("ONCEHOOK_CONSOLE_TOKEN", "")
	var tokens []string
	for range 2 {
		line, _ := startConsole(t, io.Discard, "-table", table, "-addr", "127.0.0.1:0")
		m := signInLink.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no sign-in link printed: %q", line)
		}
		if !console.StrongToken(m[2]) {
			t.Errorf("the generated token %q is not strong", m[2])
		}
		tokens = append(tokens, m[2])
		resp, err := http.Get(m[1] + "/audit")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("/audit without the token: %d, want 401", resp.StatusCode)
		}
		client, base := signIn(t, line, &http.Client{})
		if resp, err = client.Get(base + "/audit"); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/audit signed in: %d", resp.StatusCode)
		}
	}
	if tokens[0] == tokens[1] {
		t.Errorf("two runs made the same token %q", tokens[0])
	}
}

// Off loopback the token, the login cookie and every page cross the network: hookctl console
// serves an address that is not loopback only over TLS, with the certificate and key it is
// given, and refuses to start without them, naming the flags.
func TestConsoleServesAnAddressOffLoopbackOnlyOverTLS(t *testing.T) {
	_, table := testTable(t)
	t.Setenv("ONCEHOOK_CONSOLE_TOKEN", "4f1c9a7e2b8d6035e1a9c4f7b2d8e063")
	var errOut lockedBuilder
	if line, stop := startConsole(t, &errOut, "-table", table, "-addr", "0.0.0.0:0"); line != "" || stop() != 1 || !strings.Contains(errOut.String(), "-tls-cert") {
		t.Fatalf("0.0.0.0 without TLS: printed %q, stderr %q; want refused naming -tls-cert", line, errOut.String())
	}
	certFile, keyFile, pool := selfSigned(t)
	line, _ := startConsole(t, io.Discard, "-table", table, "-addr", "0.0.0.0:0", "-tls-cert", certFile, "-tls-key", keyFile)
	m := signInLink.FindStringSubmatch(line)
	if m == nil || !strings.HasPrefix(m[1], "https://") {
		t.Fatalf("want an https sign-in link: %q", line)
	}
	port := m[1][strings.LastIndex(m[1], ":")+1:]
	link := "https://127.0.0.1:" + port + "/login?token=" + m[2]
	client, _ := signIn(t, link, &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}})
	resp, err := client.Get("https://127.0.0.1:" + port + "/audit")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/audit over TLS: %d", resp.StatusCode)
	}
	if resp, err := http.Get("http://127.0.0.1:" + port + "/audit"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("/audit answered over plain HTTP")
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key to files: their paths, and a pool
// that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "console test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
