package awstest

import (
	"bytes"
	"io"
	"net/http"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/internal/faults"
)

// LoseResponses is an http.RoundTripper that delivers requests to the engine (of any service:
// see faults.Operation) but, for the first N requests of the named operation, throws the
// engine's answer away and reports a connection reset: the write happened, the client cannot
// know it, and the SDK retries.
type LoseResponses struct {
	Next      http.RoundTripper
	Operation string
	N         int
	// Match, when set, limits it to requests whose body contains it.
	Match string

	mu   sync.Mutex
	lost int
}

// Lost is how many responses were thrown away.
func (l *LoseResponses) Lost() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func (l *LoseResponses) RoundTrip(r *http.Request) (*http.Response, error) {
	matched := l.Match == "" || BodyContains(r, l.Match)
	resp, err := l.Next.RoundTrip(r)
	if err != nil || faults.Operation(r) != l.Operation || !matched {
		return resp, err
	}
	l.mu.Lock()
	drop := l.lost < l.N
	if drop {
		l.lost++
	}
	l.mu.Unlock()
	if !drop {
		return resp, nil
	}
	return nil, faults.Lost(resp)
}

// InjectErrors is an http.RoundTripper that answers the first N requests of the named operation
// itself, without reaching the engine, with a DynamoDB JSON error (Status and Body), the way
// DynamoDB answers when it throttles or cancels a transaction. N < 0 means every request.
type InjectErrors struct {
	Next      http.RoundTripper
	Operation string
	N         int
	Status    int
	Body      string
	// Skip lets the first Skip matching requests through before injecting.
	Skip int
	// Match, when set, limits injection to requests whose body contains it.
	Match string

	mu       sync.Mutex
	injected int
}

// Injected is how many requests were answered with the error.
func (f *InjectErrors) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

func (f *InjectErrors) RoundTrip(r *http.Request) (*http.Response, error) {
	if faults.Operation(r) == f.Operation && (f.Match == "" || BodyContains(r, f.Match)) {
		f.mu.Lock()
		inject := false
		if f.Skip > 0 {
			f.Skip--
		} else if f.N < 0 || f.injected < f.N {
			inject = true
			f.injected++
		}
		f.mu.Unlock()
		if inject {
			return faults.Answer(r, f.Status, f.Body), nil
		}
	}
	return f.Next.RoundTrip(r)
}

// BaseTransport is a transport for the test endpoint with room for the concurrency tests'
// connections; wrap it with LoseResponses or InjectErrors.
func BaseTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 512
	tr.MaxIdleConnsPerHost = 512
	return tr
}

// WithTransport makes a client send its requests through rt.
func WithTransport(rt http.RoundTripper) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: rt} }
}

// BodyContains reports whether r's body contains s, leaving the body readable (and
// re-readable, for the SDK's own retries).
func BodyContains(r *http.Request, s string) bool {
	if r.Body == nil {
		return false
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return bytes.Contains(b, []byte(s))
}

// SetN changes how many more requests are injected (N < 0: all).
func (f *InjectErrors) SetN(n int) {
	f.mu.Lock()
	f.N, f.injected = n, 0
	f.mu.Unlock()
}
