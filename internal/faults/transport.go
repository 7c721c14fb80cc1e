package faults

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
)

// DynamoDB's own error bodies, as its JSON 1.0 protocol answers them.
const (
	bodyProvisioned = `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."}`
	bodyThrottling  = `{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`
	bodyInternal    = `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}`
)

// LogLine is the message of the log line a function writes for each fault it injected (with
// "operation" and "kind"): a run counts them in the functions' logs.
const LogLine = "fault injected"

// Transport is an http.RoundTripper for a DynamoDB client that injects the faults of a Spec.
// Each request draws once: a throttle is answered here (400, alternately
// ProvisionedThroughputExceededException and ThrottlingException, by where the draw fell), an
// error is answered here (500 InternalServerError), a lose is sent to the engine, which applies
// it, and its answer replaced by a connection reset. The engine never sees a throttled or
// failed request.
type Transport struct {
	Next http.RoundTripper
	Spec Spec
	// Rand draws in [0, 1); NewTransport uses Dice seeded from Spec.Seed. Tests inject their own.
	Rand func() float64
	// OnFault, when set, is told of every fault injected (the functions log each one, so that
	// a run can count, from outside, the faults it asked for).
	OnFault func(operation string, kind Kind)
}

// NewTransport wraps next.
func NewTransport(next http.RoundTripper, spec Spec) *Transport {
	return &Transport{Next: next, Spec: spec, Rand: NewDice(spec.Seed).Float64}
}

// Operation is an AWS request's operation ("PutItem"): from its X-Amz-Target, or, for a REST
// service such as Lambda that sends none, from the SDK's metadata in its context ("" on a
// request no SDK client sent).
func Operation(r *http.Request) string {
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		return target[strings.LastIndexByte(target, '.')+1:]
	}
	return awsmiddleware.GetOperationName(r.Context())
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	op := Operation(r)
	rates := t.Spec.Rates(op)
	if rates.Zero() {
		return t.Next.RoundTrip(r)
	}
	u := t.Rand()
	kind := rates.Pick(u)
	if kind == None {
		return t.Next.RoundTrip(r)
	}
	if t.OnFault != nil {
		t.OnFault(op, kind)
	}
	switch kind {
	case Throttle:
		body := bodyThrottling
		if u < rates.Throttle/2 {
			body = bodyProvisioned
		}
		return injected(r, http.StatusBadRequest, body), nil
	case Error:
		return injected(r, http.StatusInternalServerError, bodyInternal), nil
	default: // Lose
		resp, err := t.Next.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		return nil, Lost(resp)
	}
}

// Lost throws resp away and is the connection reset the client sees instead: the request
// landed, and the client cannot know it.
func Lost(resp *http.Response) error {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// injected is Answer under a request id that says where it came from.
func injected(r *http.Request, status int, body string) *http.Response {
	resp := Answer(r, status, body)
	resp.Header.Set("X-Amzn-Requestid", "oncehook-fault-injected")
	return resp
}

// Answer is an error response in DynamoDB's JSON protocol (status and body), made without
// reaching the engine; r's body is read and closed as a server would.
func Answer(r *http.Request, status int, body string) *http.Response {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode:    status,
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:          io.NopCloser(bytes.NewBufferString(body)),
		ContentLength: int64(len(body)),
		Request:       r,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
	}
}
