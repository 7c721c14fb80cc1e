// Package lambdart runs a Lambda function's built bootstrap the way Lambda does, under a
// minimal Lambda Runtime API on a loopback port: hookctl coldstart's machinery, for timing
// cold starts and a receiver's own throughput without an emulator's Lambda layer.
//
// The contract is aws-lambda-go's (lambda/runtime_api_client.go, invoke_loop.go): GET
// /2018-06-01/runtime/invocation/next answers 200 with the event and the
// Lambda-Runtime-Aws-Request-Id and Lambda-Runtime-Deadline-Ms (epoch ms) headers; the result
// is POSTed to .../invocation/<id>/response (or /error) and answered 202. AWS's runtime
// interface emulator implements the same API, but as a program that wraps one process and
// takes one invocation at a time; a benchmark that runs many processes on one queue and reads
// each invocation's timings needs the server in process, which is these 150 lines.
package lambdart

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Server is a Runtime API: Queue hands invocations to the processes' GET /next; their results
// complete them.
type Server struct {
	// Addr is host:port, for AWS_LAMBDA_RUNTIME_API.
	Addr string
	// Queue takes invocations; each is served to the next process that polls.
	Queue chan *Invocation

	srv   *http.Server
	polls atomic.Int64

	mu       sync.Mutex
	first    time.Time
	inflight map[string]*Invocation
}

// Invocation is one event and, once Done is closed, its result.
type Invocation struct {
	ID      string
	Payload []byte
	// Done is closed when the result has been POSTed.
	Done     chan struct{}
	Served   time.Time // when GET /next handed it out
	Answered time.Time // when its result was POSTed
	Failed   bool      // the result was POSTed to /error
	// Status and Body are the API Gateway response the function returned; Raw is the result
	// as POSTed.
	Status int
	Body   string
	Raw    []byte
}

// NewInvocation is an invocation of payload under the request id id.
func NewInvocation(id string, payload []byte) *Invocation {
	return &Invocation{ID: id, Payload: payload, Done: make(chan struct{})}
}

// Start serves a Runtime API on a free loopback port.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &Server{Addr: ln.Addr().String(), Queue: make(chan *Invocation), inflight: map[string]*Invocation{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", a.next)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", a.result(false))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", a.result(true))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted) // the process exits next; its output says why
	})
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

// Close stops the server.
func (a *Server) Close() { _ = a.srv.Close() }

// FirstPoll is when a process first asked for an invocation: the end of its init.
func (a *Server) FirstPoll() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.first
}

// Polls counts the GET /next requests so far.
func (a *Server) Polls() int64 { return a.polls.Load() }

func (a *Server) next(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	a.mu.Lock()
	if a.first.IsZero() {
		a.first = now
	}
	a.mu.Unlock()
	a.polls.Add(1)
	var inv *Invocation
	select {
	case inv = <-a.Queue:
	case <-r.Context().Done():
		return
	}
	a.mu.Lock()
	a.inflight[inv.ID] = inv
	inv.Served = time.Now()
	a.mu.Unlock()
	w.Header().Set("Lambda-Runtime-Aws-Request-Id", inv.ID)
	w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(30*time.Second).UnixMilli(), 10))
	w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:oncehook-coldstart")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(inv.Payload)
}

func (a *Server) result(failed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20))
		now := time.Now()
		a.mu.Lock()
		inv, ok := a.inflight[r.PathValue("id")]
		delete(a.inflight, r.PathValue("id"))
		a.mu.Unlock()
		if !ok || err != nil {
			http.Error(w, `{"errorMessage":"Invalid request ID","errorType":"InvalidRequestID"}`, http.StatusBadRequest)
			return
		}
		inv.Answered, inv.Failed, inv.Raw = now, failed, body
		var resp events.APIGatewayV2HTTPResponse
		if !failed && json.Unmarshal(body, &resp) == nil {
			inv.Status, inv.Body = resp.StatusCode, resp.Body
		}
		w.WriteHeader(http.StatusAccepted)
		close(inv.Done)
	}
}

// Process is one running bootstrap.
type Process struct {
	Started time.Time
	cmd     *exec.Cmd
	out     *tailBuffer
	exited  chan struct{}
	once    sync.Once
}

// StartProcess execs bootstrap in its own directory with env and AWS_LAMBDA_RUNTIME_API=addr.
func StartProcess(bootstrap string, env []string, addr string) (*Process, error) {
	cmd := exec.Command(bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = append(append([]string(nil), env...), "AWS_LAMBDA_RUNTIME_API="+addr)
	p := &Process{cmd: cmd, out: &tailBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Await waits for inv's result, or for the process to exit without one.
func (p *Process) Await(ctx context.Context, inv *Invocation, timeout time.Duration) error {
	select {
	case <-inv.Done:
		return nil
	case <-p.exited:
		select {
		case <-inv.Done:
			return nil
		default:
		}
		return fmt.Errorf("the process exited (%s) before answering; its output:\n%s", p.cmd.ProcessState, p.out.tail())
	case <-time.After(timeout):
		return fmt.Errorf("no response within %s; its output:\n%s", timeout, p.out.tail())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop kills the process and waits for it.
func (p *Process) Stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
}

// CPU is the process's user + system CPU time, once it has stopped.
func (p *Process) CPU() time.Duration {
	if p.cmd.ProcessState == nil {
		return 0
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// Output is the last 8 KiB the process wrote.
func (p *Process) Output() string { return p.out.tail() }

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
