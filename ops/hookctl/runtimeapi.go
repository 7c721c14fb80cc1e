package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// runtimeAPI is a minimal Lambda Runtime API on a loopback port (aws-lambda-go's
// runtime_api_client.go contract). AWS's runtime interface emulator wraps one process and takes
// one invocation at a time; coldstart runs many processes on one queue. As an http.RoundTripper
// it hands each request to them as an API Gateway HTTP API (payload 2.0) event, so
// harness.Sender and harness.Storm drive the binary as they drive a deployed stack.
type runtimeAPI struct {
	addr    string
	queue   chan *invocation
	timeout time.Duration // the most one invocation may take
	srv     *http.Server
	polls   atomic.Int64
	ids     atomic.Int64
	first   atomic.Pointer[time.Time] // the first GET /next: the end of a process's init
	// inflight holds the invocations handed to a process and not yet answered, by id.
	inflight sync.Map

	exited chan struct{}                    // closed when a process exits: its invocations will never be answered
	oldest atomic.Pointer[runningBootstrap] // the first process started
	died   atomic.Pointer[runningBootstrap] // the first process that exited
}

type invocation struct {
	id      string
	payload []byte
	done    chan struct{} // closed when the result has been POSTed
	failed  bool          // POSTed to /error
	result  []byte
}

func startRuntimeAPI(timeout time.Duration) (*runtimeAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &runtimeAPI{addr: ln.Addr().String(), queue: make(chan *invocation, 1<<12), timeout: timeout, exited: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", a.next)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", a.answer(false))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", a.answer(true))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted) // the process exits next; its output says why
	})
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *runtimeAPI) close() { _ = a.srv.Close() }

func (a *runtimeAPI) next(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	a.first.CompareAndSwap(nil, &now)
	a.polls.Add(1)
	var inv *invocation
	select {
	case inv = <-a.queue:
	case <-r.Context().Done():
		return
	}
	a.inflight.Store(inv.id, inv)
	w.Header().Set("Lambda-Runtime-Aws-Request-Id", inv.id)
	w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(30*time.Second).UnixMilli(), 10))
	w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:oncehook-coldstart")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(inv.payload)
}

func (a *runtimeAPI) answer(failed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20))
		v, ok := a.inflight.LoadAndDelete(r.PathValue("id"))
		if !ok || err != nil {
			http.Error(w, `{"errorMessage":"Invalid request ID","errorType":"InvalidRequestID"}`, http.StatusBadRequest)
			return
		}
		inv := v.(*invocation)
		inv.failed, inv.result = failed, body
		w.WriteHeader(http.StatusAccepted)
		close(inv.done)
	}
}

// RoundTrip invokes the function with req as API Gateway would, and answers with the
// function's response (502 with its error when it failed).
func (a *runtimeAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	headers := map[string]string{}
	for k, v := range req.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",") // API Gateway lower-cases header names
	}
	inv := &invocation{id: fmt.Sprintf("req-%d", a.ids.Add(1)), done: make(chan struct{})}
	route, path := req.Method+" "+req.URL.Path, req.URL.Path
	inv.payload, err = json.Marshal(events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: route, RawPath: path, Headers: headers, Body: string(body),
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: inv.id, Stage: "$default", RouteKey: route,
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: req.Method, Path: path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
		},
	})
	if err != nil {
		return nil, err
	}
	a.queue <- inv // buffered beyond any storm's concurrency
	select {
	case <-inv.done:
	case <-a.exited:
		select {
		case <-inv.done:
		default:
			return nil, a.failure("")
		}
	case <-time.After(a.timeout):
		return nil, a.failure(fmt.Sprintf("no response within %s", a.timeout))
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	resp := &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{}, Request: req}
	answer := inv.result
	var r events.APIGatewayV2HTTPResponse
	if !inv.failed && json.Unmarshal(inv.result, &r) == nil {
		resp.StatusCode, answer = r.StatusCode, []byte(r.Body)
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	return resp, nil
}

// failure says why an invocation got no answer, with what a process wrote last: the one that
// exited, else the first.
func (a *runtimeAPI) failure(why string) error {
	p := a.died.Load()
	if p == nil {
		p = a.oldest.Load()
	} else {
		why = fmt.Sprintf("the process exited (%s) before answering", p.cmd.ProcessState)
	}
	return fmt.Errorf("%s; its output:\n%s", why, p.out.tail())
}

// runningBootstrap is one process of a bootstrap.
type runningBootstrap struct {
	started time.Time
	cmd     *exec.Cmd
	out     *tailBuffer
	stop    func() // kills it and waits for it
}

// start execs bootstrap in its own directory with env, polling a. Once a process has exited,
// an invocation not yet answered never will be: it fails.
func (a *runtimeAPI) start(bootstrap string, env []string) (*runningBootstrap, error) {
	cmd := exec.Command(bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = append(append([]string(nil), env...), "AWS_LAMBDA_RUNTIME_API="+a.addr)
	p := &runningBootstrap{cmd: cmd, out: &tailBuffer{}, started: time.Now()}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a.oldest.CompareAndSwap(nil, p)
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
		if a.died.CompareAndSwap(nil, p) {
			close(a.exited)
		}
	}()
	p.stop = sync.OnceFunc(func() { _ = cmd.Process.Kill(); <-exited })
	return p, nil
}

// cpu is the process's user + system CPU time, once it has stopped.
func (p *runningBootstrap) cpu() time.Duration {
	if p.cmd.ProcessState == nil {
		return 0
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// tailBuffer keeps the last 8 KiB a process wrote, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 8<<10 {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-8<<10:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
