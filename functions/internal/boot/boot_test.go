package boot

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/faults"
	"github.com/oncehook/oncehook/internal/awstest"
)

// These tests set process environment variables, so they do not run in parallel.

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
		{"a malformed ONCEHOOK_FAULTS", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES": good, "BOOT_TEST_SECRET": "s",
			"ONCEHOOK_FAULTS": "dynamodb.throtle=0.1"}, `ONCEHOOK_FAULTS: "dynamodb.throtle": unknown field`},
		{"a fault probability over 1", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES": good, "BOOT_TEST_SECRET": "s",
			"ONCEHOOK_FAULTS": "dynamodb.error=2"}, `ONCEHOOK_FAULTS: "dynamodb.error"`},
		{"a missing sources file", map[string]string{"TABLE_NAME": "t", "ONCEHOOK_SOURCES_FILE": "/nonexistent/sources.json"}, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"TABLE_NAME", "ONCEHOOK_SOURCES", "ONCEHOOK_SOURCES_FILE", "BOOT_TEST_SECRET", "ONCEHOOK_FAULTS"} {
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
	if _, err := Worker(env); err != nil {
		t.Fatal(err)
	}
}

func TestFaultsAreOffUnlessConfiguredAndLoudWhenOn(t *testing.T) {
	awstest.Config(t)
	t.Setenv("TABLE_NAME", "t")
	t.Setenv("ONCEHOOK_SOURCES_FILE", "")
	t.Setenv("ONCEHOOK_SOURCES", `{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"S"}],"retry_horizon":"3d"}}}`)
	get := func(env *Env) error {
		_, err := env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("oncehook-boot-no-such-table"),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}, "sk": &types.AttributeValueMemberS{Value: "b"}}})
		return err
	}
	t.Setenv("ONCEHOOK_FAULTS", "")
	env, err := Load(context.Background(), Needs{})
	if err != nil {
		t.Fatal(err)
	}
	var rnf *types.ResourceNotFoundException
	if err := get(env); !errors.As(err, &rnf) {
		t.Fatalf("without faults the engine answers (no such table): %v", err)
	}
	t.Setenv("ONCEHOOK_FAULTS", "dynamodb.GetItem.error=1")
	if env, err = Load(context.Background(), Needs{}); err != nil {
		t.Fatal(err)
	}
	var ise *types.InternalServerError
	if err := get(env); !errors.As(err, &ise) {
		t.Fatalf("with dynamodb.GetItem.error=1 every GetItem fails before the engine: %v", err)
	}

	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	DynamoDBFaults(logger, faults.Spec{})(&dynamodb.Options{})
	if logs.Len() != 0 {
		t.Fatalf("no faults, yet: %s", logs.String())
	}
	spec, _ := faults.Parse("dynamodb.throttle=0.05,downstream.error=0.1")
	o := &dynamodb.Options{}
	DynamoDBFaults(logger, spec)(o)
	if !strings.Contains(logs.String(), "FAULT INJECTION IS ON") || !strings.Contains(logs.String(), `"faults":"dynamodb.throttle=0.05"`) || o.HTTPClient == nil {
		t.Fatalf("%s", logs.String())
	}
}
