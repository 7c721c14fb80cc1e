package receiver

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
)

// ServeHTTP answers a delivery POSTed to <anything>/hooks/{source} over net/http by the same
// pipeline as Handle. It reads at most the largest max_body_bytes of the sources file (413
// beyond it), and joins a header's repeated values with commas, as API Gateway does:
//
//	http.Handle("/hooks/", h)
//
// A source whose scheme signs the URL it calls (twilio, square) needs its url, or its hosts in
// Config.TrustedHosts: the Host header is the sender's, used only when trusted (CheckHTTP).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := make(http.Header, len(r.Header)+1)
	for k, v := range r.Header {
		hdr[canonical(k)] = []string{strings.Join(v, ",")}
	}
	hdr["Host"] = []string{r.Host} // net/http keeps it out of r.Header
	domain := h.trustedHost(r.Host)
	req := request{method: r.Method, source: sourceName(nil, r.URL.EscapedPath()), header: hdr, domain: domain,
		path: r.URL.EscapedPath(), query: r.URL.RawQuery, requestID: r.Header.Get("X-Request-Id"),
		untrustedHost: domain == "" && len(h.trusted) > 0}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(h.maxBody)))
	if err != nil {
		// Still a delivery: its span, log line and metrics, as the other refusals.
		resp := reply(http.StatusBadRequest, "the body could not be read", "body")
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			resp = reply(http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over %d bytes", h.maxBody), "body")
		}
		req.refused = &resp
	}
	req.body = string(body) // the bytes as sent: a Go string holds any bytes
	resp := h.serve(r.Context(), req)
	for k, v := range resp.headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(resp.status)
	_, _ = io.WriteString(w, resp.body)
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

// CheckHTTP reports whether ServeHTTP can verify every source: a *NoSignedURLError for the
// first URL-signing source without a url while Config.TrustedHosts is empty. Call it before
// serving (launch.NewHTTPReceiver does), so such a deployment does not start.
func (h *Handler) CheckHTTP() error {
	if len(h.trusted) > 0 {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(h.sources)) {
		if src := h.sources[name]; src.signedURL != nil && src.conf.URL == "" {
			return &NoSignedURLError{Source: name, Scheme: src.conf.Scheme}
		}
	}
	return nil
}
