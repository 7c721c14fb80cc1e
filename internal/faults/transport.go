package faults

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
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

// Operation is a DynamoDB request's operation ("PutItem"), from its X-Amz-Target.
func Operation(r *http.Request) string {
	target := r.Header.Get("X-Amz-Target")
	return target[strings.LastIndexByte(target, '.')+1:]
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
		return answer(r, http.StatusBadRequest, body), nil
	case Error:
		return answer(r, http.StatusInternalServerError, bodyInternal), nil
	default: // Lose
		resp, err := t.Next.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
}

// answer is DynamoDB's error response, made without reaching the engine.
func answer(r *http.Request, status int, body string) *http.Response {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: status,
		Status:     fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header: http.Header{
			"Content-Type":     {"application/x-amz-json-1.0"},
			"X-Amzn-Requestid": {"oncehook-fault-injected"},
		},
		Body:          io.NopCloser(bytes.NewBufferString(body)),
		ContentLength: int64(len(body)),
		Request:       r,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
	}
}
