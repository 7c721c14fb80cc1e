// Package deployment is a deployment's settings as one typed value: the construct (infra)
// writes it into the functions' environment, launch reads it back (FromEnv), and
// receivertest.WithSettings builds from it. Each setting is parsed, defaulted and checked here
// only, and every refusal names its variable.
//
// The environment variables, by field:
//
//	TABLE_NAME               Table: the claims table (required)
//	ONCEHOOK_SOURCES         Sources: the sources file's JSON, inline; or
//	ONCEHOOK_SOURCES_FILE    SourcesFile: its path (default: sources.json beside the binary)
//	ONCEHOOK_SOURCES_SHA256  SourcesSHA256: the bundled file's SHA-256; any other file is refused
//	ONCEHOOK_BINDINGS        Bindings: the bound tables' names and targets' ARNs, as JSON (sources.Bindings)
//	ONCEHOOK_TARGETS         Targets: intent targets the application's own executors serve, comma-separated
//	ONCEHOOK_SECRETS_MAX_AGE SecretsMaxAge: receiver, how long a secret is used before it is read again (default 5m, at least 1m)
//	ONCEHOOK_DUPLICATE_PROBE NoDuplicateProbe: receiver, on (default) or off (receiver.Config.NoDuplicateProbe)
//	ONCEHOOK_TRUSTED_HOSTS   TrustedHosts: net/http receiver, hosts whose Host header stands for a URL-signing source's URL
//	ONCEHOOK_FAULTS          Faults: the fault injector's plan (binaries built with -tags faultinject only)
//	LOG_LEVEL                LogLevel: debug, info (default), warn, error
//	METRICS_NAMESPACE        MetricsNamespace: the EMF metrics' CloudWatch namespace (default oncehook)
//	PENDING_SHARDS           PendingShards: the pending index's shard count (default 16)
//	LEASE_SECONDS            Lease: outbox and sweeper, whole seconds (default 60)
//	MAX_ATTEMPTS             MaxAttempts: outbox and sweeper, failed attempts before parking (default 10)
//	RETRY_QUEUE_URL          RetryQueueURL: outbox and sweeper, the SQS queue that wakes retries
//	SWEEP_MIN_AGE_SECONDS    SweepMinAge: sweeper, claims younger than this are left alone (default 120;
//	                         under every source's retention: CheckFile)
//	AUDIT_PREFIXES           AuditPrefixes: sweeper, the leak audit's partition-key prefixes, comma-separated
//	AUDIT_SAMPLE             AuditSample: sweeper, items each sweep audits (default 100)
//
// OpenTelemetry's OTEL_ variables are launch/tracing's.
package deployment

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// BundledSources is the sources file's name beside a function's bootstrap: the construct
// bundles it there, and a function reads it from there unless SourcesFile names another.
const BundledSources = "sources.json"

// SourcesSum is the SHA-256 of a sources file's bytes, in hex, as SourcesSHA256 holds it.
func SourcesSum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Defaults: those of the packages that apply them.
const (
	DefaultLease         = outbox.DefaultLease
	DefaultMaxAttempts   = outbox.DefaultMaxAttempts
	DefaultSweepMinAge   = outbox.DefaultSweepMinAge
	DefaultAuditSample   = dedup.DefaultAuditSample
	DefaultSecretsMaxAge = sources.DefaultMaxAge
	// MinSecretsMaxAge is the least SecretsMaxAge: a source's secrets are re-read at most
	// once a minute.
	MinSecretsMaxAge = time.Minute
)

// maxSeconds is the most whole seconds a time.Duration holds.
const maxSeconds = int64(math.MaxInt64 / time.Second)

// Settings is one deployment's configuration. Its zero fields take their defaults (Defaults).
type Settings struct {
	Table         string
	Sources       string
	SourcesFile   string
	SourcesSHA256 string
	Bindings      string
	Targets       []string
	SecretsMaxAge time.Duration
	// NoDuplicateProbe turns the receiver's duplicate probe off.
	NoDuplicateProbe bool
	TrustedHosts     []string
	Faults           string
	LogLevel         string
	MetricsNamespace string
	PendingShards    int
	Lease            time.Duration
	MaxAttempts      int
	RetryQueueURL    string
	SweepMinAge      time.Duration
	AuditPrefixes    []string
	AuditSample      int
}

// An Error is a setting that cannot work, named by its environment variable.
type Error struct {
	Var, Value, Want string
}

func (e *Error) Error() string { return fmt.Sprintf("%s=%q: want %s", e.Var, e.Value, e.Want) }

// vars are the variables the package owns (Reserved).
var vars = []string{"TABLE_NAME", "ONCEHOOK_SOURCES", "ONCEHOOK_SOURCES_FILE", "ONCEHOOK_SOURCES_SHA256",
	"ONCEHOOK_BINDINGS", "ONCEHOOK_TARGETS", "ONCEHOOK_SECRETS_MAX_AGE", "ONCEHOOK_DUPLICATE_PROBE",
	"ONCEHOOK_TRUSTED_HOSTS", "ONCEHOOK_FAULTS", "LOG_LEVEL", "METRICS_NAMESPACE", "PENDING_SHARDS",
	"LEASE_SECONDS", "MAX_ATTEMPTS", "RETRY_QUEUE_URL", "SWEEP_MIN_AGE_SECONDS", "AUDIT_PREFIXES", "AUDIT_SAMPLE"}

// Reserved says whether name is a variable of Settings, which only Settings.Environment sets.
func Reserved(name string) bool { return slices.Contains(vars, name) }

// FromEnv reads the settings from getenv (os.Getenv), with their defaults, and checks them.
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{
		Table: getenv("TABLE_NAME"), Sources: getenv("ONCEHOOK_SOURCES"), SourcesFile: getenv("ONCEHOOK_SOURCES_FILE"),
		SourcesSHA256: getenv("ONCEHOOK_SOURCES_SHA256"), Bindings: getenv("ONCEHOOK_BINDINGS"),
		Targets: list(getenv("ONCEHOOK_TARGETS")), TrustedHosts: list(getenv("ONCEHOOK_TRUSTED_HOSTS")),
		Faults: getenv("ONCEHOOK_FAULTS"), LogLevel: getenv("LOG_LEVEL"), MetricsNamespace: getenv("METRICS_NAMESPACE"),
		RetryQueueURL: getenv("RETRY_QUEUE_URL"), AuditPrefixes: list(getenv("AUDIT_PREFIXES")),
	}
	if s.Table == "" {
		return s, &Error{Var: "TABLE_NAME", Want: "the claims table's name"}
	}
	switch v := getenv("ONCEHOOK_DUPLICATE_PROBE"); v {
	case "", "on":
	case "off":
		s.NoDuplicateProbe = true
	default:
		return s, &Error{Var: "ONCEHOOK_DUPLICATE_PROBE", Value: v, Want: "on (the default) or off"}
	}
	if v := getenv("ONCEHOOK_SECRETS_MAX_AGE"); v != "" {
		d, err := sources.ParseDuration(v)
		if err != nil {
			return s, &Error{Var: "ONCEHOOK_SECRETS_MAX_AGE", Value: v, Want: "a duration (5m, 1h, 30d; whole days up to 3650d): " + err.Error()}
		}
		if d < MinSecretsMaxAge {
			return s, &Error{Var: "ONCEHOOK_SECRETS_MAX_AGE", Value: v, Want: "a duration of at least " + MinSecretsMaxAge.String() + " (5m, 1h)"}
		}
		s.SecretsMaxAge = d
	}
	ints := []struct {
		name string
		to   *int
	}{{"PENDING_SHARDS", &s.PendingShards}, {"MAX_ATTEMPTS", &s.MaxAttempts}, {"AUDIT_SAMPLE", &s.AuditSample}}
	for _, i := range ints {
		if v := getenv(i.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return s, &Error{Var: i.name, Value: v, Want: "a positive whole number"}
			}
			*i.to = n
		}
	}
	secs := []struct {
		name string
		to   *time.Duration
	}{{"LEASE_SECONDS", &s.Lease}, {"SWEEP_MIN_AGE_SECONDS", &s.SweepMinAge}}
	for _, d := range secs {
		if v := getenv(d.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 || n > maxSeconds {
				return s, &Error{Var: d.name, Value: v, Want: fmt.Sprintf("a positive whole number of seconds, at most %d", maxSeconds)}
			}
			*d.to = time.Duration(n) * time.Second
		}
	}
	s = s.WithDefaults()
	return s, s.Check()
}

// WithDefaults is s with each zero setting at its default.
func (s Settings) WithDefaults() Settings {
	orDefault(&s.PendingShards, dedup.PendingShards)
	orDefault(&s.MaxAttempts, DefaultMaxAttempts)
	orDefault(&s.AuditSample, DefaultAuditSample)
	orDefault(&s.Lease, DefaultLease)
	orDefault(&s.SweepMinAge, DefaultSweepMinAge)
	orDefault(&s.SecretsMaxAge, DefaultSecretsMaxAge)
	s.Targets = sortedSet(s.Targets)
	return s
}

// CheckFile refuses settings that cannot work with the sources file f, naming the variable: a
// SWEEP_MIN_AGE_SECONDS at least a source's retention, whose claims would expire before the
// sweeper looked at them (an intent the stream missed, never sent).
func (s Settings) CheckFile(f *sources.File) error {
	if len(f.Sources) == 0 {
		return nil
	}
	s = s.WithDefaults()
	shortest := slices.MinFunc(f.Names(), func(a, b string) int {
		return cmp.Compare(f.Sources[a].Retention().Effective(), f.Sources[b].Retention().Effective())
	})
	if keep := f.Sources[shortest].Retention().Effective(); s.SweepMinAge >= keep {
		return &Error{Var: "SWEEP_MIN_AGE_SECONDS", Value: strconv.Itoa(int(s.SweepMinAge / time.Second)),
			Want: fmt.Sprintf("less than sources.%s's retention (%s), or its claims expire before a sweep looks at them", shortest, sources.Duration(keep))}
	}
	return nil
}

func orDefault[T int | time.Duration](v *T, d T) {
	if *v == 0 {
		*v = d
	}
}

// Check refuses settings that cannot work, naming the variable, for settings built in code too.
func (s Settings) Check() error {
	s = s.WithDefaults()
	switch strings.ToLower(s.LogLevel) {
	case "", "debug", "info", "warn", "error":
	default:
		return &Error{Var: "LOG_LEVEL", Value: s.LogLevel, Want: "debug, info, warn or error"}
	}
	if s.PendingShards < 1 || s.PendingShards > dedup.MaxPendingShards {
		return &Error{Var: "PENDING_SHARDS", Value: strconv.Itoa(s.PendingShards), Want: fmt.Sprintf("between 1 and %d", dedup.MaxPendingShards)}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"MAX_ATTEMPTS", s.MaxAttempts}, {"AUDIT_SAMPLE", s.AuditSample}} {
		if n.v < 1 {
			return &Error{Var: n.name, Value: strconv.Itoa(n.v), Want: "a positive whole number"}
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"LEASE_SECONDS", s.Lease}, {"SWEEP_MIN_AGE_SECONDS", s.SweepMinAge}} {
		if d.v < time.Second || d.v%time.Second != 0 {
			return &Error{Var: d.name, Value: d.v.String(), Want: "a positive whole number of seconds"}
		}
	}
	if s.SecretsMaxAge < MinSecretsMaxAge {
		return &Error{Var: "ONCEHOOK_SECRETS_MAX_AGE", Value: s.SecretsMaxAge.String(), Want: "a duration of at least " + MinSecretsMaxAge.String() + " (5m, 1h)"}
	}
	for _, h := range s.TrustedHosts {
		if err := sources.CheckHost(h); err != nil {
			return &Error{Var: "ONCEHOOK_TRUSTED_HOSTS", Value: h, Want: "host names (no scheme, port or path)"}
		}
	}
	for _, l := range []struct {
		name string
		v    []string
	}{{"ONCEHOOK_TARGETS", s.Targets}, {"AUDIT_PREFIXES", s.AuditPrefixes}, {"ONCEHOOK_TRUSTED_HOSTS", s.TrustedHosts}} {
		for _, e := range l.v {
			if e == "" || strings.Contains(e, ",") || strings.TrimSpace(e) != e {
				return &Error{Var: l.name, Value: e, Want: "non-empty entries without commas or spaces around them"}
			}
		}
	}
	for _, t := range s.Targets { // a name no intent can carry names a target no plan can reach
		if inv, ok := errors.AsType[*dedup.InvalidError](dedup.ValidateTargetName(t)); ok {
			return &Error{Var: "ONCEHOOK_TARGETS", Value: t, Want: "names an intent can carry: this one " + inv.Reason}
		}
	}
	return nil
}

// Environment is s as the functions' environment variables: only those s sets, so that the
// start applies the defaults.
func (s Settings) Environment() map[string]string {
	env := map[string]string{}
	set := func(name, v string) {
		if v != "" {
			env[name] = v
		}
	}
	num := func(name string, n int) {
		if n != 0 {
			env[name] = strconv.Itoa(n)
		}
	}
	set("TABLE_NAME", s.Table)
	set("ONCEHOOK_SOURCES", s.Sources)
	set("ONCEHOOK_SOURCES_FILE", s.SourcesFile)
	set("ONCEHOOK_SOURCES_SHA256", s.SourcesSHA256)
	set("ONCEHOOK_BINDINGS", s.Bindings)
	set("ONCEHOOK_TARGETS", strings.Join(sortedSet(s.Targets), ","))
	if s.SecretsMaxAge != 0 {
		env["ONCEHOOK_SECRETS_MAX_AGE"] = s.SecretsMaxAge.String()
	}
	if s.NoDuplicateProbe {
		env["ONCEHOOK_DUPLICATE_PROBE"] = "off"
	}
	set("ONCEHOOK_TRUSTED_HOSTS", strings.Join(s.TrustedHosts, ","))
	set("ONCEHOOK_FAULTS", s.Faults)
	set("LOG_LEVEL", s.LogLevel)
	set("METRICS_NAMESPACE", s.MetricsNamespace)
	num("PENDING_SHARDS", s.PendingShards)
	num("LEASE_SECONDS", int(s.Lease/time.Second))
	num("MAX_ATTEMPTS", s.MaxAttempts)
	set("RETRY_QUEUE_URL", s.RetryQueueURL)
	num("SWEEP_MIN_AGE_SECONDS", int(s.SweepMinAge/time.Second))
	set("AUDIT_PREFIXES", strings.Join(s.AuditPrefixes, ","))
	num("AUDIT_SAMPLE", s.AuditSample)
	return env
}

// list splits a comma-separated value, dropping blanks.
func list(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// sortedSet is v sorted, without repeats: nil when empty.
func sortedSet(v []string) []string { return slices.Compact(slices.Sorted(slices.Values(v))) }
