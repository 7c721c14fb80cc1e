package receiver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// ServeHTTP answers a delivery POSTed to <anything>/hooks/{source} over plain net/http (a
// container, a server of your own) by the same code path as Handle: the same statuses, the
// same single write. It reads at most the largest max_body_bytes of the sources file (413
// beyond it), and passes the headers as API Gateway does (lower-case names, repeated values
// joined with commas). Mount it where the provider's URL points:
//
//	http.Handle("/hooks/", h)
//
// A source whose scheme signs the URL it calls (twilio, square) needs its url, or the hosts it
// is called at in Config.TrustedHosts: the Host header is the sender's to write, and is used
// only when trusted (CheckHTTP refuses, at start, a handler that has neither).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	headers := make(map[string]string, len(r.Header)+1)
	for k, v := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	headers["host"] = r.Host // net/http keeps it out of r.Header
	domain := h.trustedHost(r.Host)
	req := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		Headers:        headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: domain,
			RequestID:  r.Header.Get("X-Request-Id"),
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, SourceIP: r.RemoteAddr},
		},
	}
	untrusted := domain == "" && len(h.trusted) > 0
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(h.maxBody)))
	if err != nil {
		// Refused before Handle's path could read the body, and still a delivery: its span,
		// its log line and its metrics, as Handle's own refusals.
		var tooLarge *http.MaxBytesError
		resp := reply(http.StatusBadRequest, "the body could not be read", "body")
		if errors.As(err, &tooLarge) {
			resp = reply(http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over %d bytes", h.maxBody), "body")
		}
		writeResponse(w, h.respond(r.Context(), req, untrusted, &resp))
		return
	}
	req.Body = string(body) // the bytes as sent: a Go string holds any bytes
	writeResponse(w, h.serve(r.Context(), req, untrusted))
}

func writeResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.WriteString(w, resp.Body)
}

// trustedHost is host when Config.TrustedHosts lists it (any case, without a port), else "".
func (h *Handler) trustedHost(host string) string {
	if name, _, err := net.SplitHostPort(host); err == nil {
		host = name
	}
	host = strings.ToLower(host)
	if h.trusted[host] {
		return host
	}
	return ""
}

// CheckHTTP reports whether ServeHTTP can verify every source: it returns a
// *NoSignedURLError for the first source whose scheme signs the URL it calls (twilio, square)
// that sets no url while Config.TrustedHosts is empty. Call it before serving (launch's
// NewHTTPReceiver does), so such a deployment does not start instead of answering 500.
func (h *Handler) CheckHTTP() error {
	if len(h.trusted) > 0 {
		return nil
	}
	for _, name := range h.names {
		if src := h.sources[name]; src.signedURL != nil && src.conf.URL == "" {
			return &NoSignedURLError{Source: name, Scheme: src.conf.Scheme}
		}
	}
	return nil
}
