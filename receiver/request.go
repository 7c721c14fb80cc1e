package receiver

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/events"
)

// request is one delivery as the receiver reads it, whichever edge (Handle, HandleV1,
// ServeHTTP) built it.
type request struct {
	method, source string
	header         http.Header // canonical names, one value each; nil when twice is set
	twice          string      // a header name sent twice in different case
	body           string      // the bytes as sent, or their base64 when base64 is set
	base64         bool
	// domain is the host served on, when trusted; path and query are as sent. A URL-signing
	// source's URL is built from them.
	domain, path, query string
	requestID           string
	untrustedHost       bool      // over ServeHTTP, a Host not among Config.TrustedHosts
	refused             *response // ServeHTTP's answer to a body it could not read
}

// response is the receiver's answer, converted to its edge's type.
type response struct {
	status  int
	headers map[string]string
	body    string
}

// Handle answers one API Gateway HTTP API (payload v2) or Lambda function URL request.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	r := h.serve(ctx, fromV2(req))
	return events.APIGatewayV2HTTPResponse{StatusCode: r.status, Headers: r.headers, Body: r.body}, nil
}

// fromV2 is an HTTP API's (or a function URL's) request as the receiver's.
func fromV2(req events.APIGatewayV2HTTPRequest) request {
	hdr, twice := header(req.Headers)
	return request{method: req.RequestContext.HTTP.Method, source: sourceName(req.PathParameters, req.RawPath),
		header: hdr, twice: twice, body: req.Body, base64: req.IsBase64Encoded, domain: req.RequestContext.DomainName,
		path: req.RawPath, query: req.RawQueryString, requestID: req.RequestContext.RequestID}
}

// HandleV1 answers a REST API (payload format 1.0) request as Handle answers its v2 shape.
// Multi-value headers are joined with commas, as the HTTP API does; a name sent twice in
// different case is refused (400). A URL-signing source verifies against the path the client
// called (the stage included) on API Gateway's domain; payload 1.0 carries the query decoded,
// so it is re-encoded with its parameters sorted: such a source behind a REST API should be
// called with at most one query parameter (Twilio's bodySHA256), or set its url.
func (h *Handler) HandleV1(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	headers := make(map[string]string, len(req.Headers)+len(req.MultiValueHeaders))
	multi := make(map[string]bool, len(req.MultiValueHeaders))
	for k, vs := range req.MultiValueHeaders {
		headers[k] = strings.Join(vs, ",")
		multi[canonical(k)] = true
	}
	for k, v := range req.Headers {
		if !multi[canonical(k)] { // Headers repeats MultiValueHeaders' last value: one header
			headers[k] = v
		}
	}
	path := cmp.Or(req.RequestContext.Path, req.Path) // with the stage, as the client called it
	query := url.Values{}
	for k, v := range req.QueryStringParameters {
		query[k] = []string{v}
	}
	for k, vs := range req.MultiValueQueryStringParameters {
		query[k] = vs
	}
	hdr, twice := header(headers)
	r := h.serve(ctx, request{method: req.HTTPMethod, source: sourceName(req.PathParameters, path), header: hdr, twice: twice,
		body: req.Body, base64: req.IsBase64Encoded, domain: req.RequestContext.DomainName, path: path, query: query.Encode(),
		requestID: req.RequestContext.RequestID})
	return events.APIGatewayProxyResponse{StatusCode: r.status, Headers: r.headers, Body: r.body}, nil
}

// sourceName reads the source from the {source} path parameter, or else the path (the stack's
// routes are one per source, as is a function URL's).
func sourceName(params map[string]string, path string) string {
	if s := params["source"]; s != "" {
		return s
	}
	p := strings.TrimSuffix(path, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 && strings.HasSuffix(p[:i], "/hooks") {
		return p[i+1:]
	}
	return ""
}

// header turns API Gateway's header map into an http.Header, with one backing array for the
// values and canonical names from a cache (canonicalizing a lower-case name allocates). A name
// held twice in different case is returned as twice (the least such) with no header: either
// spelling would win by map order, and a signature is over one value.
func header(m map[string]string) (h http.Header, twice string) {
	h = make(http.Header, len(m))
	vals := make([]string, 0, len(m))
	for k, v := range m {
		c := canonical(k)
		if _, seen := h[c]; seen && (twice == "" || c < twice) {
			twice = c
		}
		vals = append(vals, v)
		h[c] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if twice != "" {
		return nil, boundedID(twice)
	}
	return h, ""
}

var canonicalNames sync.Map // lower-case name -> canonical name, bounded by maxCanonicalNames

const maxCanonicalNames = 512

var canonicalCount atomic.Int32

func canonical(k string) string {
	if c, ok := canonicalNames.Load(k); ok {
		return c.(string)
	}
	c := textproto.CanonicalMIMEHeaderKey(k)
	if canonicalCount.Load() < maxCanonicalNames { // senders choose header names: bound the cache
		if _, loaded := canonicalNames.LoadOrStore(k, c); !loaded {
			canonicalCount.Add(1)
		}
	}
	return c
}

// okHeaders is shared by every 200: nothing writes to it (error replies get their own map).
var okHeaders = map[string]string{"Content-Type": "application/json"}

// reply is an error answer: its message, and the field at fault when one is.
func reply(status int, msg, field string) response {
	body := struct {
		Error string `json:"error"`
		Field string `json:"field,omitempty"`
	}{msg, field}
	b, _ := json.Marshal(body)
	return response{status: status, headers: map[string]string{"Content-Type": "application/json"}, body: string(b)}
}
