package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

// sendFlags are send's: where each part of a delivery goes is the sources file's business, so
// each flag says what it is (the event's id, its type...) and send puts it where the source's
// provider does, refusing a flag the source would never read.
type sendFlags struct {
	id, eventType, delivery, scope string
	key, secret, signedURL         string
	headers                        []string
}

func (f *sendFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.id, "id", "", "the event id, for a source that reads it from a header (Standard Webhooks' webhook-id, GitHub's\n"+
		"X-GitHub-Delivery GUID, Shopify's X-Shopify-Webhook-Id...); default a fresh one. An id in the body is the body's")
	fs.StringVar(&f.eventType, "type", "", "the event type, for a source that reads it from a header (GitHub's X-GitHub-Event, Shopify's\n"+
		"X-Shopify-Topic, Linear-Event, Twitch's subscription type). A type in the body is the body's")
	fs.StringVar(&f.delivery, "delivery", "", "the delivery id, for a source that reads it from a header of its own (Shopify's X-Shopify-Event-Id);\n"+
		"default a fresh one (GitHub's is the event id)")
	fs.StringVar(&f.scope, "scope", "", "the header that scopes the id, for a source with one (GitHub's X-GitHub-Hook-ID: the hook's id); default 1")
	fs.StringVar(&f.key, "key", "", "for a source that verifies with the provider's public keys (discord, sendgrid): the private key of one\n"+
		"of them, as hookctl keygen prints it, or @FILE holding it")
	fs.StringVar(&f.secret, "secret", "", "sign with this secret (or @FILE) instead of the source's first, resolved as the receiver does")
	fs.StringVar(&f.signedURL, "signed-url", "", "for a source that signs the URL (twilio, square) and sets no url: the URL to sign, as the receiver\n"+
		"rebuilds it; default the URL posted to, as https, and on the emulator's path form /_aws/execute-api/<id>/...\n"+
		"the domain MiniStack reports, https://<id>.execute-api.localhost/...")
	listFlag(fs, &f.headers, "header", ":", "add a header, 'Name: value' (repeatable)")
}

// buildDelivery signs body for source as its provider would, with what f says, and addresses
// it to target.
func (c *cli) buildDelivery(ctx context.Context, file *sources.File, source, target string, body []byte, f sendFlags) (*http.Request, error) {
	src := file.Sources[source]
	var opts []receivertest.Option

	// The event id: a header's is -id (fresh by default); a body's is the body's.
	switch {
	case inHeader(src.EventID):
		opts = append(opts, receivertest.WithEventID(cmp.Or(f.id, freshID("msg_"))))
	case f.id != "":
		if got := bodyID(src, body); got != f.id {
			return nil, fmt.Errorf("-id %s: source %s reads its event id from the body (%s, here %q), which is what the receiver claims: drop -id, or put the id in the body",
				f.id, source, src.EventID, got)
		}
	}
	// The event type: a header's is -type, which must be given; a body's is the body's.
	switch {
	case inHeader(src.EventType) && f.eventType == "":
		return nil, fmt.Errorf("source %s reads its event type from the %s header: pass -type (for example -type %s)", source, src.EventType.Header, cmp.Or(exampleTypes[src.Scheme], "order.paid"))
	case inHeader(src.EventType):
		opts = append(opts, receivertest.WithEventType(f.eventType))
	case f.eventType != "":
		return nil, fmt.Errorf("-type %s: source %s reads its event type from the body (%s): drop -type, or put the type in the body", f.eventType, source, src.EventType)
	}
	switch {
	case f.delivery == "":
	case inHeader(src.DeliveryID) && inHeader(src.EventID) && src.DeliveryID.Header == src.EventID.Header:
		return nil, fmt.Errorf("-delivery: source %s's delivery id is its event id (%s): pass -id", source, src.DeliveryID.Header)
	case inHeader(src.DeliveryID):
		opts = append(opts, receivertest.WithDeliveryID(f.delivery))
	default:
		return nil, fmt.Errorf("-delivery: source %s reads no delivery id from a header", source)
	}
	switch {
	case f.scope == "":
	case src.ScopedIDs():
		opts = append(opts, receivertest.WithScope(f.scope))
	default:
		return nil, fmt.Errorf("-scope: source %s's event ids are not scoped by a header", source)
	}
	for _, h := range f.headers {
		name, value, _ := strings.Cut(h, ":")
		opts = append(opts, receivertest.WithHeader(strings.TrimSpace(name), strings.TrimSpace(value)))
	}

	// The URL signed, for the schemes that sign one.
	signed := target
	switch {
	case !sources.URLScheme(src.Scheme) && f.signedURL != "":
		return nil, fmt.Errorf("-signed-url: source %s's %s scheme does not sign the URL", source, src.Scheme)
	case src.URL != "" && f.signedURL != "":
		return nil, fmt.Errorf("-signed-url: source %s signs its configured url %s", source, src.URL)
	case f.signedURL != "":
		signed = f.signedURL
	case sources.URLScheme(src.Scheme):
		rebuilt, err := rebuiltURL(target)
		if err != nil {
			return nil, err
		}
		signed = rebuilt
	}
	// Last, once every flag is known to fit: resolving the secret may call AWS.
	secret, err := c.signingSecret(ctx, src, source, f)
	if err != nil {
		return nil, err
	}
	req, err := receivertest.HTTPRequest(file, source, secret, signed, body, opts...)
	if err != nil {
		return nil, err
	}
	if signed != target { // signed over the URL the receiver sees, posted to the one it listens on
		if req.URL, err = url.Parse(target); err != nil {
			return nil, err
		}
		req.Host = req.URL.Host
	}
	return req.WithContext(ctx), nil
}

// inHeader reports whether l locates its value in a header (a flag's business), not the body.
func inHeader(l *sources.Locator) bool { return l != nil && l.Header != "" }

// rebuiltURL is the URL a receiver rebuilds from a request POSTed to target (the receiver's
// source.url): https, the domain API Gateway served it on (RequestContext.DomainName), the raw
// path and query as API Gateway hands them to Lambda. On the emulator's path form,
// http://127.0.0.1:4566/_aws/execute-api/<api>/hooks/x, the domain is the one MiniStack reports,
// <api>.execute-api.localhost, and the path the function sees starts after the API id (and a
// $default stage); another engine's domain is given with -signed-url.
func rebuiltURL(target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute URL", target)
	}
	u.Scheme = "https"
	if m := executeAPIPath.FindStringSubmatch(u.EscapedPath()); m != nil {
		u.RawPath, u.Path = "", ""
		p, err := url.PathUnescape(m[2])
		if err != nil {
			return "", err
		}
		u.Host, u.Path = m[1]+".execute-api.localhost", p
	}
	return u.String(), nil
}

var executeAPIPath = regexp.MustCompile(`^/_aws/execute-api/([^/]+)(?:/\$default)?(/.*)$`)

// signingSecret is what signs source's deliveries: -key for a public-key scheme, -secret, or
// the source's first secret, resolved as the receiver resolves it.
func (c *cli) signingSecret(ctx context.Context, src *sources.Source, source string, f sendFlags) (string, error) {
	if sources.PublicKeyScheme(src.Scheme) {
		if f.key == "" {
			return "", fmt.Errorf("source %s verifies with its provider's public keys: sign with the private key of one of them, -key KEY or -key @FILE (hookctl keygen %s makes a pair)", source, src.Scheme)
		}
		if f.secret != "" {
			return "", fmt.Errorf("-secret: source %s verifies with public keys: sign with -key", source)
		}
		return fileOrValue("-key", f.key)
	}
	if f.key != "" {
		return "", fmt.Errorf("-key: source %s's %s scheme signs with a shared secret: drop -key (or pass -secret)", source, src.Scheme)
	}
	if f.secret != "" {
		return fileOrValue("-secret", f.secret)
	}
	if len(src.Secrets) == 0 {
		return "", fmt.Errorf("source %s lists no secrets", source)
	}
	return c.secret(ctx, src.Secrets[0])
}

func fileOrValue(flagName, v string) (string, error) {
	path, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flagName, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// bodyID reads the event id of a source that locates it in the body (a JSON path, or a form
// key), "" when absent.
func bodyID(src *sources.Source, body []byte) string {
	payload, l := body, src.EventID
	if key, ok := src.FormPayload(); ok || l.Form != "" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return ""
		}
		if l.Form != "" {
			return form.Get(l.Form)
		}
		payload = []byte(form.Get(key))
	}
	v, _ := receiver.JSONField(payload, l.JSON)
	return v
}

// exampleTypes are a typical event type per scheme, for -type's hint (order.paid for another).
var exampleTypes = map[string]string{"github": "push", "shopify": "orders/create", "linear": "Issue", "twitch": "channel.follow"}

// target is the sources file and where to post source's deliveries: url, else the local
// stack's URL for the source.
func (c *cli) target(source, url string) (*sources.File, string, error) {
	f, err := c.sources()
	if err != nil {
		return nil, "", err
	}
	if f.Sources[source] == nil {
		return nil, "", fmt.Errorf("no source %q in %s (its sources: %s)", source, c.sourcesPath, strings.Join(f.Names(), ", "))
	}
	if url != "" {
		return f, url, nil
	}
	if tmpl := c.stack.get(stackWebhookURL); tmpl != "" {
		c.noteStack()
		return f, strings.ReplaceAll(tmpl, "{source}", source), nil
	}
	return nil, "", errors.New("want <url>, the source's webhook URL" + noStack)
}

// maxSendBody is the largest body send reads: Lambda's request payload limit, 6 MB (6 MiB:
// AWS's MB are binary), which no delivery API Gateway passes on can exceed.
const maxSendBody = 6 << 20

func send(ctx context.Context, c *cli, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return errors.New("want <source> [url], with the body on stdin")
	}
	source := args[0]
	file, target, err := c.target(source, strings.Join(args[1:], ""))
	if err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(c.stdin, maxSendBody+3)) // the limit, a final "\r\n" and a byte over
	if err != nil {
		return err
	}
	// The body is stdin without the one newline that echo and editors end it with (as curl -d).
	body = bytes.TrimSuffix(bytes.TrimSuffix(body, []byte("\n")), []byte("\r"))
	if len(body) > maxSendBody { // cut short, it would be signed and sent as if it were the delivery
		return fmt.Errorf("the body on stdin is over 6 MiB (%d bytes), the largest request Lambda takes from API Gateway: nothing sent", maxSendBody)
	}
	req, err := c.buildDelivery(ctx, file, source, target, body, c.send)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Fprintf(c.stdout, "%d %s\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	if answer = bytes.TrimSpace(answer); len(answer) > 0 {
		fmt.Fprintf(c.stdout, "%s\n", answer)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return nil
}

// keygen makes a key pair for a public-key scheme's local tests: the public key for the
// sources file's public_keys, the private one for send -key (the webhook package's formats).
func keygen(_ context.Context, c *cli, args []string) error {
	if len(args) != 1 {
		return errors.New("want <scheme>: discord or sendgrid")
	}
	var public, private string
	switch args[0] {
	case "discord":
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		public, private = hex.EncodeToString(pub), hex.EncodeToString(priv.Seed())
	case "sendgrid":
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return err
		}
		priv, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		public, private = base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(priv)
	default:
		return fmt.Errorf("%q signs with a shared secret, or is no scheme: keygen is for discord and sendgrid", args[0])
	}
	fmt.Fprintf(c.stdout, "public key   %s\n  (in the source's \"public_keys\")\nprivate key  %s\n  (hookctl send -key; keep it out of the repository)\n", public, private)
	return nil
}
