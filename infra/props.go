package infra

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/launch/tracing"
	"github.com/oncehook/oncehook/sources"
)

// configure reads the sources file and checks the props, filling in the defaults: what cannot
// work is refused before a resource is defined. Each part's check is in the part's file.
func configure(props *Props) (cfg Props, file *sources.File, raw []byte, err error) {
	if props == nil || props.SourcesFile == "" {
		return cfg, nil, nil, errors.New("Props.SourcesFile is required")
	}
	if raw, err = os.ReadFile(props.SourcesFile); err != nil {
		return cfg, nil, nil, fmt.Errorf("Props.SourcesFile: %w", err)
	}
	if file, err = sources.Parse(raw); err != nil {
		return cfg, nil, nil, fmt.Errorf("%s: %w", props.SourcesFile, err)
	}
	cfg = *props
	cfg.GoModuleDir = cmp.Or(cfg.GoModuleDir, ".")
	for _, check := range []func(*Props, *sources.File) error{checkTable, checkReceiver, checkOutbox, checkSweeper, checkFunctions, checkAlarms,
		deployable, checkEnvironmentProp, checkTelemetry, checkSettings} {
		if err := check(&cfg, file); err != nil {
			return cfg, nil, nil, err
		}
	}
	return cfg, file, raw, nil
}

// checkEnvironmentProp refuses in Props.Environment a setting the construct derives, and an
// empty one of deployment's, which the start would read as unset: the default, silently,
// where a value was meant.
func checkEnvironmentProp(cfg *Props, _ *sources.File) error {
	for k, v := range cfg.Environment {
		if derived(k) {
			return fmt.Errorf("Props.Environment: %s is set by the construct", k)
		}
		if deployment.Reserved(k) && v == "" {
			return fmt.Errorf("Props.Environment: %s is empty: give it a value, or leave it out for its default", k)
		}
	}
	return nil
}

// checkSettings refuses the props the functions' settings are written from where the start
// would refuse them (deployment.Settings.Check), naming the prop.
func checkSettings(cfg *Props, _ *sources.File) error {
	err := deployment.Settings{Targets: sortedKeys(cfg.Outbox.Executors), AuditPrefixes: cfg.Sweeper.AuditPrefixes,
		AuditSample: cfg.Sweeper.AuditSample, PendingShards: cfg.Table.PendingShards}.Check()
	var e *deployment.Error
	if !errors.As(err, &e) {
		return err
	}
	prop := map[string]string{"ONCEHOOK_TARGETS": "Props.Outbox.Executors", "AUDIT_PREFIXES": "Props.Sweeper.AuditPrefixes",
		"AUDIT_SAMPLE": "Props.Sweeper.AuditSample", "PENDING_SHARDS": "Props.Table.PendingShards"}[e.Var]
	return fmt.Errorf("%s: %q: want %s", prop, e.Value, e.Want)
}

// deployable refuses, on a stack that is not Local, a sources file that only works on a
// developer's machine: an env secret (the stack sets none) or a target on a loopback or private
// address (unreachable from Lambda, or an SSRF hole).
func deployable(cfg *Props, f *sources.File) error {
	if cfg.Local {
		return nil
	}
	for _, name := range f.Names() {
		for i, ref := range f.Sources[name].Secrets {
			if ref.Env != "" && !cfg.AllowEnvSecrets {
				return fmt.Errorf("sources.%s.secrets[%d]: %q is read from the environment, which this stack does not set: use secretsmanager or ssm (or Props.AllowEnvSecrets and Props.Environment)", name, i, ref.Env)
			}
		}
	}
	for _, name := range sortedKeys(f.Targets) {
		if f.Targets[name].Type != sources.TargetHTTP {
			continue // an AWS resource, reached through its service's API
		}
		u, err := url.Parse(f.Targets[name].URL)
		if err != nil {
			return fmt.Errorf("targets.%s.url: %w", name, err)
		}
		if private(u.Hostname()) && !cfg.AllowPrivateTargets {
			return fmt.Errorf("targets.%s.url: %s is a loopback or private address, not reachable from Lambda on AWS (Props.AllowPrivateTargets if it is, in a VPC)", name, u.Host)
		}
	}
	return nil
}

// shownURL is a URL as an error may show it: its scheme and host, "/…" for the rest, which may
// hold a key (an integration's or an intake's path, query or password), or "(not shown)"
// without a host. A synth's error is kept by CI logs and build output.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(not shown)"
	}
	if shown := u.Scheme + "://" + u.Host; shown != raw {
		return shown + "/…"
	}
	return raw
}

func private(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified())
}

// settable are the deployment's settings (package deployment) Props.Environment may set; each
// function's start checks them, and so does the synth. The construct derives the others from
// its props and resources, and Props.Telemetry.OpenTelemetry's headers.
var settable = []string{"LOG_LEVEL", "MAX_ATTEMPTS", "SWEEP_MIN_AGE_SECONDS", "ONCEHOOK_SECRETS_MAX_AGE"}

func derived(k string) bool {
	return deployment.Reserved(k) && !slices.Contains(settable, k) || k == tracing.OTLPHeadersSecret || k == tracing.OTLPHeadersParameter
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
