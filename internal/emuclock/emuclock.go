// Package emuclock starts a private MiniStack for one test, with a clock the test moves: what
// the emulator does with time (an SQS or SNS FIFO deduplication window of 5 minutes) can then
// be tested without waiting for it. The shared emulator keeps the wall clock; only this
// private one is moved, so nothing else running against the shared one sees its clock jump.
//
// It runs MiniStack from the project's virtualenv (.cache/venv, which localstack/up installs)
// under clock.py, which patches Python's time.time before MiniStack is imported. A test skips,
// saying why, where there is no such virtualenv (AWS_ENDPOINT_URL naming another emulator).
package emuclock

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

//go:embed clock.py
var clockPy []byte

// Emulator is a private MiniStack with a movable clock.
type Emulator struct {
	// URL is its endpoint, http://127.0.0.1:<port>.
	URL string

	t     testing.TB
	cmd   *exec.Cmd
	ctl   io.WriteCloser
	acks  *bufio.Reader
	moved time.Duration
}

// Python is the MiniStack virtualenv's interpreter: $ONCEHOOK_MINISTACK_PYTHON, else
// .cache/venv/bin/python in the module's root; "" when there is none.
func Python() string {
	if p := os.Getenv("ONCEHOOK_MINISTACK_PYTHON"); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, ".cache", "venv", "bin", "python")
			if _, err := os.Stat(p); err == nil {
				return p
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Start runs a private emulator of services (e.g. "sqs,sns") for the test, stopped when it
// ends. The test is skipped when no MiniStack virtualenv is found.
func Start(t testing.TB, services string) *Emulator {
	t.Helper()
	python := Python()
	if python == "" {
		t.Skip("no MiniStack virtualenv (.cache/venv, installed by localstack/up; or ONCEHOOK_MINISTACK_PYTHON): the emulator's clock cannot be moved")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "clock.py")
	if err := os.WriteFile(script, clockPy, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ackR, ackW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("GATEWAY_PORT=%d", port), "BIND_HOST=127.0.0.1", "SERVICES="+services,
		"SFTP_ENABLED=0", "IOT_MTLS_ENABLED=0", "LOG_LEVEL=WARNING", "MINISTACK_HOST=127.0.0.1")
	cmd.ExtraFiles = []*os.File{ackW} // fd 3
	log, err := os.Create(filepath.Join(dir, "ministack.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	ctl, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start MiniStack (%s): %v", python, err)
	}
	ackW.Close()
	e := &Emulator{URL: fmt.Sprintf("http://127.0.0.1:%d", port), t: t, cmd: cmd, ctl: ctl, acks: bufio.NewReader(ackR)}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		ctl.Close() // clock.py exits when its stdin closes
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		ackR.Close()
		log.Close()
	})
	for tries := 0; ; tries++ {
		if tries > 1200 {
			t.Fatalf("MiniStack on %s never answered its health check", e.URL)
		}
		resp, err := http.Get(e.URL + "/_ministack/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e
			}
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("MiniStack exited while starting (%v):\n%s", err, out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Advance moves the emulator's clock forward by d, and returns once the emulator has.
func (e *Emulator) Advance(d time.Duration) {
	e.t.Helper()
	if _, err := fmt.Fprintf(e.ctl, "advance %f\n", d.Seconds()); err != nil {
		e.t.Fatalf("advance the emulator's clock: %v", err)
	}
	line, err := e.acks.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ok ") {
		e.t.Fatalf("advance the emulator's clock: %q, %v", line, err)
	}
	e.moved += d
}

// Moved is how far the emulator's clock has been moved.
func (e *Emulator) Moved() time.Duration { return e.moved }
