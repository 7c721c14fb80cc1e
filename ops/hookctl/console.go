package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/emf"
	"github.com/oncehook/oncehook/ops/console"
)

const consoleUsage = "console [-addr 127.0.0.1:8030 -token T -tls-cert F -tls-key F -read-only -show-payloads -operator NAME -metrics]"

type consoleFlags struct {
	addr, token, operator, namespace string
	tlsCert, tlsKey                  string
	readOnly, showPayloads, metrics  bool
	maxReads                         int
}

func (f *consoleFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8030", "where to listen: a loopback address, or any with -token, -tls-cert and -tls-key")
	// The token's default is read after parsing (consoleCmd), never given to the flag package,
	// which would print it as the flag's default in every usage message.
	fs.StringVar(&f.token, "token", "", "required of every request (default $ONCEHOOK_CONSOLE_TOKEN, else a generated one; prefer the variable: a flag shows in ps)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain), required off loopback")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the PEM private key of -tls-cert")
	fs.BoolVar(&f.readOnly, "read-only", false, "hide and refuse every action (redrive)")
	fs.BoolVar(&f.showPayloads, "show-payloads", false, "show intent payloads and effect records' values")
	fs.StringVar(&f.operator, "operator", operator("hookctl console"), "who redrives, resolves, pauses and resumes are recorded as done by")
	fs.BoolVar(&f.metrics, "metrics", false, "chart deliveries and intents from the stack's CloudWatch metrics")
	fs.StringVar(&f.namespace, "metrics-namespace", "", "the stack's metrics namespace (default $METRICS_NAMESPACE, else the local stack's, else "+emf.DefaultNamespace+")")
	fs.IntVar(&f.maxReads, "max-reads", 500, "entries of the pending index one page reads at most (and so the claims it reads)")
}

// metricsNamespace is the namespace the stack's functions write their metrics in, as -metrics
// charts it (the construct's default is oncehook/<its path>).
func (c *cli) metricsNamespace() string {
	ns, _ := c.setting("METRICS_NAMESPACE", stackNamespace)
	return cmp.Or(c.console.namespace, ns, emf.DefaultNamespace)
}

// consoleCmd serves the operator console (package console) until interrupted.
func consoleCmd(ctx context.Context, c *cli, args []string) error {
	if len(args) != 0 {
		return errors.New("takes no arguments")
	}
	f := c.console
	f.token = cmp.Or(f.token, os.Getenv("ONCEHOOK_CONSOLE_TOKEN"))
	// Off loopback the token is the operator's to set (and share); on loopback one is made.
	if err := console.CheckAddr(f.addr, f.token, f.tlsCert != ""); err != nil {
		return err
	}
	if f.token == "" {
		f.token = console.NewToken()
	}
	shards, err := c.shards()
	if err != nil {
		return err
	}
	db, err := c.dynamo(ctx)
	if err != nil {
		return err
	}
	if err := console.CheckTable(ctx, db, c.table); err != nil {
		return err
	}
	// The console's log is where a page's "reference" leads: what a page cannot show a person
	// (an AWS error's details) is written there, on stderr.
	cfg := console.Config{DynamoDB: db, Table: c.table, PendingShards: shards, ReadOnly: f.readOnly,
		ShowPayloads: f.showPayloads, Token: f.token, Operator: f.operator, MaxIndexReads: f.maxReads,
		Logger: slog.New(slog.NewTextHandler(c.stderr, nil))}
	// Without a sources file the console knows no target's secrets to redact and no
	// at-most-once target to flag: it serves without one only when none was named.
	if cfg.Sources, err = c.namedSources(); err != nil {
		return err
	}
	if cfg.Sources == nil {
		fmt.Fprintf(c.stderr, "hookctl console: no sources file (pass -sources or set ONCEHOOK_SOURCES_FILE): sources are not checked by name, only absolute URLs are redacted from errors, and no target's delivery is known, so a redrive by query leaves every parked intent parked (each can still be redriven by ticking it)\n")
	}
	if f.metrics {
		awsCfg, err := c.config(ctx)
		if err != nil {
			return err
		}
		cfg.Metrics = &console.CloudWatch{Client: cloudwatch.NewFromConfig(awsCfg), Namespace: c.metricsNamespace()}
	}
	h, err := console.New(cfg)
	if err != nil {
		return err
	}
	srv := consoleServer(h)
	scheme := "http"
	if f.tlsCert != "" || f.tlsKey != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return fmt.Errorf("-tls-cert and -tls-key: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		scheme = "https"
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	if scheme == "https" {
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	// The link signs the operator in: the token, generated or given, is asked of every request.
	// A console on every interface is linked by the machine's name.
	host := ln.Addr().String()
	if h, port, _ := net.SplitHostPort(host); net.ParseIP(h).IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			host = net.JoinHostPort(name, port)
		}
	}
	fmt.Fprintf(c.stdout, "oncehook console for %s: sign in at %s://%s/login?token=%s (Ctrl-C stops it)\n", c.table, scheme, host, url.QueryEscape(f.token))
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// operator names the person running hookctl for a redrive's record (redriven_by): $USER and
// the tool, bounded and printable as outbox.RedriveBy requires.
func operator(tool string) string {
	user := strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, os.Getenv("USER"))
	if user == "" {
		user = "operator"
	}
	suffix := " (" + tool + ")"
	if max := dedup.MaxRedrivenBy - len(suffix); len(user) > max {
		user = strings.ToValidUTF8(user[:max], "")
	}
	return user + suffix
}

// consoleServer is the http.Server hookctl console serves h with: every stage of a connection
// bounded, so a client that sends slowly or not at all cannot hold it. The write bound leaves
// room for the slowest page, a redrive of 200 intents.
func consoleServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
}
