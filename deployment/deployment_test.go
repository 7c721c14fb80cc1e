package deployment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/sources"
)

func getenv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestWhatTheSynthWritesTheStartReadsBack: for generated settings, the environment
// Environment writes is read back by FromEnv as the same settings, with the defaults filled
// in, and every variable written is one Reserved names.
func TestWhatTheSynthWritesTheStartReadsBack(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string { return fmt.Sprintf("w%d", r.IntN(1000)) }
	words := func() []string {
		var out []string
		for range r.IntN(4) {
			out = append(out, word())
		}
		return out
	}
	pick := func(v ...string) string { return v[r.IntN(len(v))] }
	for i := range 500 {
		s := Settings{
			Table: "t-" + word(), Sources: pick("", `{"sources":{}}`), SourcesFile: pick("", "/var/task/sources.json"),
			SourcesSHA256: pick("", "ab12"), Bindings: pick("", `{"tables":{"orders":"Orders"}}`), Targets: words(),
			SecretsMaxAge: time.Duration(r.IntN(3)) * time.Hour, NoDuplicateProbe: r.IntN(2) == 0, TrustedHosts: words(),
			Faults: pick("", "dynamodb.error=0.1"), LogLevel: pick("", "debug", "info", "warn", "error"),
			MetricsNamespace: pick("", "shop/webhooks"), PendingShards: r.IntN(64), Lease: time.Duration(r.IntN(900)) * time.Second,
			MaxAttempts: r.IntN(20), RetryQueueURL: pick("", "https://sqs.eu-west-1.amazonaws.com/1/q"),
			SweepMinAge: time.Duration(r.IntN(600)) * time.Second, AuditPrefixes: words(), AuditSample: r.IntN(500),
		}
		env := s.Environment()
		for k := range env {
			if !Reserved(k) {
				t.Fatalf("case %d: Environment writes %s, which Reserved does not name", i, k)
			}
		}
		got, err := FromEnv(getenv(env))
		if err != nil {
			t.Fatalf("case %d: %+v: %v", i, s, err)
		}
		if want := s.WithDefaults(); !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: read back\n%+v\nwant\n%+v", i, got, want)
		}
	}
}

func TestUnsetSettingsTakeTheirDefaults(t *testing.T) {
	s, err := FromEnv(getenv(map[string]string{"TABLE_NAME": "t"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.PendingShards != 16 || s.Lease != time.Minute || s.MaxAttempts != 10 || s.SweepMinAge != 2*time.Minute ||
		s.AuditSample != 100 || s.SecretsMaxAge != 5*time.Minute || s.NoDuplicateProbe || s.Targets != nil {
		t.Fatalf("defaults %+v", s)
	}
}

// TestASettingThatCannotWorkIsRefusedNamed: read from the environment or built in code (the
// construct's), a setting that cannot work is refused with an *Error naming its variable.
func TestASettingThatCannotWorkIsRefusedNamed(t *testing.T) {
	env := []struct{ name, value string }{
		{"TABLE_NAME", ""},
		{"PENDING_SHARDS", "many"}, {"PENDING_SHARDS", "0"}, {"PENDING_SHARDS", "5000"},
		{"LEASE_SECONDS", "-1"}, {"LEASE_SECONDS", "1.5"}, {"MAX_ATTEMPTS", "0"}, {"AUDIT_SAMPLE", "x"},
		{"SWEEP_MIN_AGE_SECONDS", "2m"}, {"ONCEHOOK_SECRETS_MAX_AGE", "30s"}, {"ONCEHOOK_SECRETS_MAX_AGE", "soon"},
		{"ONCEHOOK_DUPLICATE_PROBE", "false"}, {"LOG_LEVEL", "verbose"},
		{"ONCEHOOK_TARGETS", strings.Repeat("t", 300)},
		// Names no intent can carry (dedup.ValidateTargetName): no plan could reach them.
		{"ONCEHOOK_TARGETS", "crm\u200b"}, {"ONCEHOOK_TARGETS", "crm\x7f"}, {"ONCEHOOK_TARGETS", "c\trm"},
	}
	for _, c := range env {
		m := map[string]string{"TABLE_NAME": "t", c.name: c.value}
		_, err := FromEnv(getenv(m))
		var e *Error
		if !errors.As(err, &e) || e.Var != c.name || !strings.Contains(err.Error(), c.name+"=") {
			t.Errorf("%s=%q: got %v, want an *Error naming %s", c.name, c.value, err, c.name)
		}
	}
	// The reason is the value's: a number of days over the limit is not "under a minute".
	if _, err := FromEnv(getenv(map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SECRETS_MAX_AGE": "3651d"})); err == nil || strings.Contains(err.Error(), "at least") {
		t.Errorf("ONCEHOOK_SECRETS_MAX_AGE=3651d: got %v, want the days' limit named", err)
	}
	code := []struct {
		name string
		s    Settings
	}{
		{"PENDING_SHARDS", Settings{PendingShards: -1}},
		{"LEASE_SECONDS", Settings{Lease: 1500 * time.Millisecond}},
		{"SWEEP_MIN_AGE_SECONDS", Settings{SweepMinAge: -time.Second}},
		{"MAX_ATTEMPTS", Settings{MaxAttempts: -3}},
		{"ONCEHOOK_SECRETS_MAX_AGE", Settings{SecretsMaxAge: time.Second}},
		{"ONCEHOOK_TARGETS", Settings{Targets: []string{"crm,billing"}}},
		{"ONCEHOOK_TARGETS", Settings{Targets: []string{"cr\u202em"}}},
		{"AUDIT_PREFIXES", Settings{AuditPrefixes: []string{""}}},
		{"ONCEHOOK_TRUSTED_HOSTS", Settings{TrustedHosts: []string{" hooks.example.com"}}},
	}
	for _, c := range code {
		var e *Error
		if err := c.s.Check(); !errors.As(err, &e) || e.Var != c.name {
			t.Errorf("%+v: got %v, want an *Error naming %s", c.s, err, c.name)
		}
	}
}

// TestAWholeNumberOfSecondsTooBigForADurationIsRefusedNamed: LEASE_SECONDS and
// SWEEP_MIN_AGE_SECONDS are whole seconds, held in a time.Duration; a number of seconds past
// what one holds (about 292 years) is refused with its variable and the value as written, never
// wrapped around into another duration (2^55 s wraps to 0, read as the default; 2^55 s + 120
// to 120 s).
func TestAWholeNumberOfSecondsTooBigForADurationIsRefusedNamed(t *testing.T) {
	for _, name := range []string{"LEASE_SECONDS", "SWEEP_MIN_AGE_SECONDS"} {
		for _, v := range []string{"36028797018963968", "36028797018964088", "20000000000", "9223372036854775807"} {
			s, err := FromEnv(getenv(map[string]string{"TABLE_NAME": "t", name: v}))
			var e *Error
			if !errors.As(err, &e) || e.Var != name || e.Value != v {
				t.Errorf("%s=%s: read as lease %s, sweep min age %s, %v; want an *Error naming %s with the value as written",
					name, v, s.Lease, s.SweepMinAge, err, name)
			}
		}
	}
}

// TestASweepMinAgeThatOutlastsAClaimIsRefusedNamed: the sweeper leaves claims younger than
// SWEEP_MIN_AGE_SECONDS alone, so one at least a source's retention would never sweep that
// source's claims: an intent the stream missed would expire unsent.
func TestASweepMinAgeThatOutlastsAClaimIsRefusedNamed(t *testing.T) {
	f, err := sources.Parse([]byte(`{"sources":{
  "long":  {"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d"},
  "short": {"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"1d","redrive_window":"0d","keep":"2d"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		age  time.Duration
		fits bool
	}{{0, true}, {2 * time.Minute, true}, {48*time.Hour - time.Second, true}, {48 * time.Hour, false}, {60 * 24 * time.Hour, false}} {
		err := Settings{Table: "t", SweepMinAge: c.age}.CheckFile(f)
		var e *Error
		switch {
		case c.fits && err != nil:
			t.Errorf("SWEEP_MIN_AGE_SECONDS %s: refused: %v", c.age, err)
		case !c.fits && (!errors.As(err, &e) || e.Var != "SWEEP_MIN_AGE_SECONDS" || !strings.Contains(e.Want, "sources.short")):
			t.Errorf("SWEEP_MIN_AGE_SECONDS %s: got %v, want an *Error naming it and sources.short", c.age, err)
		}
	}
}
