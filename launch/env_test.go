package launch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// These tests set process environment variables, so they do not run in parallel.

// reread reads the deployment's settings again, as a new start would, after a test changed
// the environment.
func reread(env *Env) error {
	s, err := deployment.FromEnv(os.Getenv)
	if err == nil {
		env.Settings = s
	}
	return err
}

func TestLoadRefusesToStartWithABadEnvironment(t *testing.T) {
	awstest.Config(t) // needs the endpoint for the AWS config; skipped in -short mode
	const good = `{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"BOOT_TEST_SECRET"}],"retry_horizon":"3d","redrive_window":"30d"}}}`
	cases := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"no table", map[string]string{"ONCEHOOK_SOURCES": good}, "TABLE_NAME"},
		{"an invalid sources file", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES": `{"sources":{"shop":{}}}`}, "ONCEHOOK_SOURCES"},
		{"a retention shorter than the provider's horizon", map[string]string{"TABLE_NAME": "t",
			"ONCEHOOK_SOURCES": strings.Replace(good, `"redrive_window":"30d"`, `"redrive_window":"30d","keep":"2d"`, 1)}, "shorter than its retry horizon"},
		{"a secret that is not set", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES": good, "BOOT_TEST_SECRET": ""}, "env:BOOT_TEST_SECRET"},
		{"a pending shard count that is not a number", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES": good, "BOOT_TEST_SECRET": "s",
			"PENDING_SHARDS": "many"}, `PENDING_SHARDS="many"`},
		{"a sweep min age no claim lives to", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES": good, "BOOT_TEST_SECRET": "s",
			"SWEEP_MIN_AGE_SECONDS": strconv.Itoa(50 * 24 * 3600)}, "SWEEP_MIN_AGE_SECONDS"},
		{"a missing sources file", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES_FILE": "/nonexistent/sources.json"}, "no such file"},
	}
	if FaultInjection {
		cases = append(cases,
			struct {
				name    string
				env     map[string]string
				wantErr string
			}{"a malformed ONCEHOOK_FAULTS", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES": good, "BOOT_TEST_SECRET": "s",
				"ONCEHOOK_FAULTS": "dynamodb.throtle=0.1"}, `ONCEHOOK_FAULTS: "dynamodb.throtle": unknown field`},
			struct {
				name    string
				env     map[string]string
				wantErr string
			}{"a fault probability over 1", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES": good, "BOOT_TEST_SECRET": "s",
				"ONCEHOOK_FAULTS": "dynamodb.error=2"}, `ONCEHOOK_FAULTS: "dynamodb.error"`})
	} else {
		cases = append(cases, struct {
			name    string
			env     map[string]string
			wantErr string
		}{"ONCEHOOK_FAULTS in a binary built without fault injection", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES": good, "BOOT_TEST_SECRET": "s",
			"ONCEHOOK_FAULTS": "dynamodb.error=0.1"}, `built without fault injection`})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"TABLE_NAME", "ONCEHOOK_SOURCES", "ONCEHOOK_SOURCES_FILE", "BOOT_TEST_SECRET", "ONCEHOOK_FAULTS", "PENDING_SHARDS", "SWEEP_MIN_AGE_SECONDS"} {
				t.Setenv(k, c.env[k])
			}
			_, err := Load(context.Background(), Needs{Secrets: true})
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.wantErr)
			}
		})
	}
}

func TestLoadBuildsTheStoreFromASourcesFile(t *testing.T) {
	awstest.Config(t)
	path := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(path, []byte(`{"sources":{"shop":{"scheme":"github","secrets":[{"env":"BOOT_TEST_SECRET"}],"retry_horizon":"1h","redrive_window":"3d"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TABLE_NAME", "oncehook-boot-test")
	t.Setenv("ONCEHOOK_SOURCES", "")
	t.Setenv("ONCEHOOK_SOURCES_FILE", path)
	t.Setenv("BOOT_TEST_SECRET", "s3cret")
	env, err := Load(context.Background(), Needs{Secrets: true})
	if err != nil {
		t.Fatal(err)
	}
	if env.Table != "oncehook-boot-test" || env.Store.Table() != "oncehook-boot-test" {
		t.Fatalf("table %q", env.Table)
	}
	if got := env.Secrets.Get("shop"); len(got) != 1 || got[0] != "s3cret" {
		t.Fatal("the secret was not resolved")
	}
	if r, ok := env.Store.Retention("shop"); !ok || r.RetryHorizon.Hours() != 1 {
		t.Fatalf("retention %+v", r)
	}
}

func TestTheWorkersStartWithoutReadingSecrets(t *testing.T) {
	awstest.Config(t)
	t.Setenv("TABLE_NAME", "t")
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	// A secret the worker's role could not read on AWS: it must not try.
	t.Setenv("ONCEHOOK_SOURCES", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"ssm":"/oncehook/not-readable"}],"retry_horizon":"3d"}}}`)
	env, err := Load(context.Background(), Needs{})
	if err != nil || env.Secrets != nil {
		t.Fatalf("got %v, %v; want an Env without secrets", env, err)
	}
	if _, err := NewWorker(env, nil); err != nil {
		t.Fatal(err)
	}
}

// TestTheSweeperAuditsWhenAskedAndRefusesAnAuditThatCannotWork: AUDIT_PREFIXES turns the leak
// audit on; a prefix in the claims' key space, or a sample over the limit, stops the start.
func TestTheSweeperAuditsWhenAskedAndRefusesAnAuditThatCannotWork(t *testing.T) {
	awstest.Config(t)
	t.Setenv("TABLE_NAME", "t")
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	t.Setenv("ONCEHOOK_SOURCES", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"ssm":"/s"}],"retry_horizon":"3d"}}}`)
	env, err := Load(context.Background(), Needs{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSweeper(env, nil)
	if err != nil || s.Audit != nil {
		t.Fatalf("%v, %v: no audit unless asked", s, err)
	}
	t.Setenv("AUDIT_PREFIXES", "ORDER#,SHIPMENT#")
	t.Setenv("AUDIT_SAMPLE", "50")
	if err := reread(env); err != nil {
		t.Fatal(err)
	}
	if s, err = NewSweeper(env, nil); err != nil || s.Audit == nil || strings.Join(s.Audit.Prefixes, " ") != "ORDER# SHIPMENT#" || s.Audit.Sample != 50 {
		t.Fatalf("%+v, %v", s, err)
	}
	for _, bad := range [][2]string{{"ORDER#,EVT#shop", "50"}, {"ORDER#", "5000"}, {"ORDER#", "many"}} {
		t.Setenv("AUDIT_PREFIXES", bad[0])
		t.Setenv("AUDIT_SAMPLE", bad[1])
		err := reread(env)
		if err == nil {
			_, err = NewSweeper(env, nil)
		}
		if err == nil || !strings.Contains(err.Error(), "AUDIT_") {
			t.Errorf("%v: got %v, want the setting named", bad, err)
		}
	}
}

func TestStartRefusesPlannersAndTargetsThatCannotRun(t *testing.T) {
	awstest.Config(t)
	t.Setenv("TABLE_NAME", "t")
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	t.Setenv("ONCEHOOK_SOURCES", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"LAUNCH_SECRET"}],"retry_horizon":"3d"}},
		"targets":{"email":{"url":"https://email.example/send"}}}`)
	t.Setenv("LAUNCH_SECRET", "s")
	t.Setenv("ONCEHOOK_TARGETS", "crm, billing")
	env, err := Load(context.Background(), Needs{Secrets: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(KnownTargets(env.Sources, env.Settings.Targets), ","); got != "billing,crm,email" {
		t.Fatalf("known targets %q", got)
	}
	// A planner for a source the file does not have would never run: refused, named.
	_, err = NewReceiver(env, func(p *receiver.Planners) {
		p.Handle("shop", "order.paid", func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, nil })
		p.Handle("stirpe", "charge.succeeded", func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, nil })
	})
	if err == nil || !strings.Contains(err.Error(), "stirpe charge.succeeded") {
		t.Fatalf("got %v, want the unknown source named", err)
	}
	// An executor without a bound: the outbox refuses to start, naming it (outbox.Bounds).
	_, err = NewWorker(env, map[string]outbox.Executor{"crm": outbox.ExecutorFunc(func(context.Context, outbox.Task) error { return nil })})
	if err == nil || !strings.Contains(err.Error(), `Executors["crm"] (outbox.ExecutorFunc) declares no bound`) {
		t.Fatalf("got %v, want the executor without a bound named", err)
	}
	// A target declared as the application's with no executor for it: the outbox refuses.
	_, err = NewWorker(env, map[string]outbox.Executor{"crm": outbox.BoundedFunc(time.Second, func(context.Context, outbox.Task) error { return nil })})
	if err == nil || !strings.Contains(err.Error(), `"billing"`) {
		t.Fatalf("got %v, want the target without an executor named", err)
	}
	if _, err := NewWorker(env, map[string]outbox.Executor{
		"crm":     outbox.BoundedFunc(time.Second, func(context.Context, outbox.Task) error { return nil }),
		"billing": outbox.BoundedFunc(time.Second, func(context.Context, outbox.Task) error { return nil }),
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFaultInjectionIsOnlyInLocalBuilds: the binaries make synth builds for AWS (no
// faultinject tag) do not contain the fault injector at all; the local stack's builds do.
func TestFaultInjectionIsOnlyInLocalBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	deps := func(tags string) string {
		cmd := exec.Command("go", "list", "-deps", "-tags", tags, "../functions/receiver", "../functions/outbox", "../functions/sweeper")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		return string(out)
	}
	const injector = "github.com/oncehook/oncehook/internal/faults\n"
	if strings.Contains(deps("lambda.norpc"), injector) {
		t.Fatal("the AWS build links the fault injector")
	}
	if !strings.Contains(deps("lambda.norpc,faultinject"), injector) {
		t.Fatal("the local build does not link the fault injector")
	}
}

func TestABundledSourcesFileMustBeTheOneTheStackWasSynthesizedWith(t *testing.T) {
	awstest.Config(t)
	path := filepath.Join(t.TempDir(), "sources.json")
	content := `{"sources":{"shop":{"scheme":"github","secrets":[{"env":"LAUNCH_SECRET"}],"retry_horizon":"1h","redrive_window":"3d"}}}`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TABLE_NAME", "t")
	t.Setenv("ONCEHOOK_SOURCES", "")
	t.Setenv("ONCEHOOK_SOURCES_FILE", path)
	t.Setenv("ONCEHOOK_TARGETS", "")
	t.Setenv("ONCEHOOK_SOURCES_SHA256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") // sha256 of nothing
	if _, err := Load(context.Background(), Needs{}); err == nil || !strings.Contains(err.Error(), "not the file the stack was synthesized with") {
		t.Fatalf("got %v", err)
	}
	// sha256sum of the content above, computed outside the code.
	t.Setenv("ONCEHOOK_SOURCES_SHA256", "68b7562d46a5e54dd0bab5dc45b09d0629376342083dd4369992b92c4ced818f")
	if _, err := Load(context.Background(), Needs{}); err != nil {
		t.Fatal(err)
	}
}

// TestEachTargetTypeGetsItsExecutor: the sources file's targets become the executors of their
// types, configured from the file.
func TestEachTargetTypeGetsItsExecutor(t *testing.T) {
	f, err := sources.Parse([]byte(`{"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"30d"}},
  "targets":{"h":{"url":"https://e.example/send"},"m":{"url":"https://smtp-gateway.example/send","delivery":"at-most-once"},"q":{"type":"sqs","arn":"arn:aws:sqs:eu-west-1:222222222222:orders.fifo","group_id":"g"},
             "n":{"type":"sns","arn":"arn:aws:sns:eu-west-1:222222222222:alerts"},"e":{"type":"eventbridge","detail_type":"Shipped"},
             "s":{"type":"stepfunctions","arn":"arn:aws:states:eu-west-1:222222222222:stateMachine:fulfil"},
             "l":{"type":"lambda","arn":"arn:aws:lambda:eu-west-1:222222222222:function:crm","invocation":"request-response","timeout":"30s"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := TargetExecutors(f, aws.Config{Region: "eu-west-1"})
	if x, ok := m["h"].(*outbox.HTTPExecutor); !ok || x.URL != "https://e.example/send" {
		t.Errorf("h: %#v", m["h"])
	}
	if outbox.IsAtMostOnce(m["h"]) || !outbox.IsAtMostOnce(m["m"]) {
		t.Errorf("at-most-once: h %v, m %v; want only m", outbox.IsAtMostOnce(m["h"]), outbox.IsAtMostOnce(m["m"]))
	}
	if x, ok := m["q"].(*targets.SQS); !ok || x.QueueURL != "https://sqs.eu-west-1.amazonaws.com/222222222222/orders.fifo" || x.GroupID != "g" {
		t.Errorf("q: %#v", m["q"])
	}
	if x, ok := m["n"].(*targets.SNS); !ok || x.TopicARN != "arn:aws:sns:eu-west-1:222222222222:alerts" {
		t.Errorf("n: %#v", m["n"])
	}
	if x, ok := m["e"].(*targets.EventBridge); !ok || x.Bus != "default" || x.DetailType != "Shipped" {
		t.Errorf("e: %#v", m["e"])
	}
	if x, ok := m["s"].(*targets.StepFunctions); !ok || x.StateMachineARN == "" {
		t.Errorf("s: %#v", m["s"])
	}
	if x, ok := m["l"].(*targets.Lambda); !ok || !x.Synchronous || x.Timeout != 30*time.Second {
		t.Errorf("l: %#v", m["l"])
	}
}

// TestTheSweeperAuditsTheTablesMarkedForIt: a table of the sources file with audit is sampled
// by its own auditor, with its keys; one without is not.
func TestTheSweeperAuditsTheTablesMarkedForIt(t *testing.T) {
	awstest.Config(t)
	t.Setenv("TABLE_NAME", "t")
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	t.Setenv("ONCEHOOK_SOURCES", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"ssm":"/s"}],"retry_horizon":"3d"}},
	  "tables":{"orders":{"name":"Orders-prod","partition_key":"order_id","actions":["put"],"audit":true},
	            "ledger":{"partition_key":"account","sort_key":"seq","actions":["update"]}}}`)
	t.Setenv("AUDIT_SAMPLE", "25")
	env, err := Load(context.Background(), Needs{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSweeper(env, nil)
	if err != nil || s.Audit != nil || len(s.AuditTables) != 1 {
		t.Fatalf("%+v, %v: want one table audit and no own-table audit", s, err)
	}
	if a := s.AuditTables[0]; a.Audited != "Orders-prod" || a.PartitionKey != "order_id" || a.Table != "t" || a.Sample != 25 {
		t.Fatalf("auditor %+v", a)
	}
}

// loadSignedURLSource loads the environment of a deployment whose one source (Twilio) signs
// the URL it calls and sets no url.
func loadSignedURLSource(t *testing.T) *Env {
	t.Helper()
	awstest.Config(t)
	t.Setenv("TABLE_NAME", "t")
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	t.Setenv("ONCEHOOK_SOURCES", `{"sources":{"sms":{"scheme":"twilio","secrets":[{"env":"LAUNCH_SECRET"}],"event_type":{"form":"MessageStatus"},"redrive_window":"1d"}}}`)
	t.Setenv("LAUNCH_SECRET", "s")
	env, err := Load(context.Background(), Needs{Secrets: true})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestAnHTTPReceiverRefusesASignedURLItCannotKnow: served over net/http, a Twilio source with no
// url can only be verified at a trusted host; without one the receiver does not start.
func TestAnHTTPReceiverRefusesASignedURLItCannotKnow(t *testing.T) {
	env := loadSignedURLSource(t)
	t.Setenv("ONCEHOOK_TRUSTED_HOSTS", "")
	if err := reread(env); err != nil {
		t.Fatal(err)
	}
	if _, err := NewHTTPReceiver(env, nil); err == nil || !strings.Contains(err.Error(), "sources.sms") || !strings.Contains(err.Error(), "ONCEHOOK_TRUSTED_HOSTS") {
		t.Fatalf("got %v, want the source and the setting named", err)
	}
	t.Setenv("ONCEHOOK_TRUSTED_HOSTS", "hooks.example.com, sms.example.com")
	if err := reread(env); err != nil {
		t.Fatal(err)
	}
	if _, err := NewHTTPReceiver(env, nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ONCEHOOK_TRUSTED_HOSTS", "https://hooks.example.com")
	err := reread(env) // refused where the settings are read, named
	if err == nil {
		_, err = NewHTTPReceiver(env, nil)
	}
	if err == nil || !strings.Contains(err.Error(), "ONCEHOOK_TRUSTED_HOSTS") {
		t.Fatalf("a URL for a host: got %v", err)
	}
}

// TestTheDuplicateProbeIsOnUnlessTurnedOff: ONCEHOOK_DUPLICATE_PROBE is on when unset, off
// only when it says so, and any other value stops the receiver's start, named.
func TestTheDuplicateProbeIsOnUnlessTurnedOff(t *testing.T) {
	for v, off := range map[string]bool{"": false, "on": false, "off": true} {
		t.Setenv("ONCEHOOK_DUPLICATE_PROBE", v)
		t.Setenv("TABLE_NAME", "t")
		s, err := deployment.FromEnv(os.Getenv)
		if got := s.NoDuplicateProbe; err != nil || got != off {
			t.Errorf("ONCEHOOK_DUPLICATE_PROBE=%q: off %v, %v; want off %v", v, got, err, off)
		}
	}
	awstest.Config(t)
	t.Setenv("TABLE_NAME", "t")
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	t.Setenv("ONCEHOOK_SOURCES", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"LAUNCH_SECRET"}],"retry_horizon":"3d"}}}`)
	t.Setenv("LAUNCH_SECRET", "s")
	env, err := Load(context.Background(), Needs{Secrets: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ONCEHOOK_DUPLICATE_PROBE", "false")
	err = reread(env)
	if err == nil {
		_, err = NewReceiver(env, nil)
	}
	if err == nil || !strings.Contains(err.Error(), `ONCEHOOK_DUPLICATE_PROBE="false"`) {
		t.Fatalf("got %v, want the setting named", err)
	}
	t.Setenv("ONCEHOOK_DUPLICATE_PROBE", "off")
	if err := reread(env); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReceiver(env, nil); err != nil {
		t.Fatal(err)
	}
}

// TestAnApplicationExecutorForAnAtMostOnceTargetKeepsItsSemantics: the sources file makes
// "mail" at-most-once; the application registers its own executor for it (not wrapped in
// outbox.AtMostOnce). The file's promise holds: a failure that may have reached the downstream
// parks the intent instead of sending it again.
func TestAnApplicationExecutorForAnAtMostOnceTargetKeepsItsSemantics(t *testing.T) {
	db := awstest.Client(t)
	table := awstest.Table(t, db)
	t.Setenv("TABLE_NAME", table)
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	t.Setenv("ONCEHOOK_TARGETS", "")
	t.Setenv("ONCEHOOK_SOURCES", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"ssm":"/s"}],"retry_horizon":"3d"}},
	  "targets":{"mail":{"url":"https://smtp-gateway.example/send","delivery":"at-most-once"}}}`)
	env, err := Load(context.Background(), Needs{})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	w, err := NewWorker(env, map[string]outbox.Executor{"mail": outbox.BoundedFunc(time.Second, func(context.Context, outbox.Task) error {
		calls++
		return errors.New("connection reset by peer") // after the request went out
	})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_mail", Type: "t", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "welcome", Target: "mail", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	claim := readClaim(t, db, table, "evt_mail")
	if _, err := w.Process(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	if in := readClaim(t, db, table, "evt_mail").Intents["welcome"]; in.Status != dedup.IntentParked || calls != 1 {
		t.Fatalf("%+v after %d calls: want parked after one, as the file's at-most-once says", in, calls)
	}
}

func readClaim(t *testing.T, db *dynamodb.Client, table, id string) *dedup.Claim {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dedup.ClaimKey("shop", id)}, "sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK}}})
	if err != nil || out.Item == nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	c, err := dedup.UnmarshalClaim(out.Item)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTrustedHostsTheReceiverCannotUseAreRefusedNamingTheVariable: ONCEHOOK_TRUSTED_HOSTS lists
// host names; an entry with a port or a scheme, which the receiver cannot match a Host header
// against, stops the start with an error naming the variable, as every setting's does.
func TestTrustedHostsTheReceiverCannotUseAreRefusedNamingTheVariable(t *testing.T) {
	env := loadSignedURLSource(t)
	for _, v := range []string{"hooks.example.com:443", "https://hooks.example.com", "hooks.example.com/hooks"} {
		t.Setenv("ONCEHOOK_TRUSTED_HOSTS", v)
		err := reread(env)
		if err == nil {
			_, err = NewHTTPReceiver(env, nil)
		}
		if err == nil || !strings.Contains(err.Error(), "ONCEHOOK_TRUSTED_HOSTS") {
			t.Errorf("ONCEHOOK_TRUSTED_HOSTS=%s: got %v, want the start refused naming the variable", v, err)
		}
	}
}

// Without a target in the sources file or the application's list (an empty one included),
// the receiver accepts any target: KnownTargets is nil, not an empty list that names none.
func TestKnownTargetsIsNilWhenThereAreNone(t *testing.T) {
	t.Parallel()
	f, err := sources.Parse([]byte(`{"sources":{"s":{"scheme":"github","secrets":[{"env":"S"}],"retry_horizon":"3d","redrive_window":"30d"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, own := range [][]string{nil, {}} {
		if got := KnownTargets(f, own); got != nil {
			t.Errorf("KnownTargets(no targets, %#v) = %#v, want nil (any target)", own, got)
		}
		if got := ReceiverConfig(deployment.Settings{Targets: own}, f).Targets; got != nil {
			t.Errorf("ReceiverConfig with Targets %#v: Config.Targets = %#v, want nil (any target)", own, got)
		}
	}
}
