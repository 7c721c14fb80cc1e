package sources_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/sources"
)

// TestSecretsComeFromEveryKindOfPlaceAndRotate reads secrets from the environment, Secrets
// Manager and SSM on the test endpoint, then rotates one and checks the rate-limited refresh.
func TestSecretsComeFromEveryKindOfPlaceAndRotate(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	ctx := context.Background()
	sm, ps := secretsmanager.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
	name := awstest.Secret(t, sm, "oncehook-test/"+strings.ReplaceAll(t.Name(), "/", "-")+"-", "whsec_from_secrets_manager")
	param := awstest.Parameter(t, ps, "/oncehook-test/"+strings.ReplaceAll(t.Name(), "/", "-")+"-", "from-ssm")

	f, err := sources.Parse([]byte(`{"sources":{"shop":{"scheme":"stripe","retry_horizon":"3d","secrets":[
		{"env":"SHOP_SECRET"},{"secretsmanager":"` + name + `"},{"ssm":"` + param + `"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := &sources.Resolver{SecretsManager: sm, SSM: ps, Getenv: func(k string) string {
		if k == "SHOP_SECRET" {
			return "from-env"
		}
		return ""
	}}
	secrets, err := sources.NewSecrets(ctx, f, r, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(secrets.Get("shop"), " "); got != "from-env whsec_from_secrets_manager from-ssm" {
		t.Fatalf("secrets %q", got)
	}

	// Rotation: the provider's new secret is put in Secrets Manager.
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(name), SecretString: aws.String("whsec_rotated")}); err != nil {
		t.Fatal(err)
	}
	changed, err := secrets.Refresh(ctx, "shop")
	if err != nil || !changed || secrets.Get("shop")[1] != "whsec_rotated" {
		t.Fatalf("refresh: changed=%v err=%v secrets=%q", changed, err, secrets.Get("shop"))
	}
	if changed, _ := secrets.Refresh(ctx, "shop"); changed {
		t.Fatal("a refresh with nothing new must report no change")
	}
}

func TestAMissingSecretStopsTheStart(t *testing.T) {
	t.Parallel()
	f, err := sources.Parse([]byte(`{"sources":{"shop":{"scheme":"stripe","retry_horizon":"3d","secrets":[{"env":"NOT_SET_ANYWHERE"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sources.NewSecrets(context.Background(), f, &sources.Resolver{Getenv: func(string) string { return "" }}, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "sources.shop") || !strings.Contains(err.Error(), "env:NOT_SET_ANYWHERE") {
		t.Fatalf("got %v, want an error naming the source and the reference", err)
	}
}

func TestRefreshIsRateLimited(t *testing.T) {
	t.Parallel()
	calls := 0
	f, _ := sources.Parse([]byte(`{"sources":{"shop":{"scheme":"stripe","retry_horizon":"3d","secrets":[{"env":"S"}]}}}`))
	r := &sources.Resolver{Getenv: func(string) string { calls++; return "v" + strings.Repeat("x", calls) }}
	secrets, err := sources.NewSecrets(context.Background(), f, r, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 { // a flood of forged signatures
		if _, err := secrets.Refresh(context.Background(), "shop"); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("%d reads of the secret, want 1 (the start) within the refresh interval", calls)
	}
}

// TestSecretsAreReadAgainAtTheirMaxAge: with MaxAge, a source's secrets are read again once
// they are that old, and not before; a failed read keeps the values held, is returned, and is
// not retried until MaxAge has passed again.
func TestSecretsAreReadAgainAtTheirMaxAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	value, reads := "v1", 0
	var fail error
	f, _ := sources.Parse([]byte(`{"sources":{"shop":{"scheme":"stripe","retry_horizon":"3d","secrets":[{"secretsmanager":"s"}]}}}`))
	r := &sources.Resolver{SecretsManager: smFunc(func() (string, error) { reads++; return value, fail })}
	secrets, err := sources.NewSecrets(context.Background(), f, r, time.Minute, sources.MaxAge(5*time.Minute), sources.Clock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	stale := func(want string, wantReads int, wantErr bool) {
		t.Helper()
		err := secrets.RefreshStale(context.Background(), "shop")
		if (err != nil) != wantErr || reads != wantReads || strings.Join(secrets.Get("shop"), ",") != want {
			t.Fatalf("at %s: err %v, %d reads, secrets %q; want err=%v, %d reads, %q", now.Format("15:04:05"), err, reads, secrets.Get("shop"), wantErr, wantReads, want)
		}
	}
	value = "v2" // revoked at the store
	now = now.Add(5*time.Minute - time.Second)
	stale("v1", 1, false) // younger than MaxAge: not read
	now = now.Add(time.Second)
	stale("v2", 2, false)                 // MaxAge old: read, the revoked value gone
	fail = errors.New("connection reset") // the store fails
	now = now.Add(5 * time.Minute)
	stale("v2", 3, true) // kept, and the failure said
	stale("v2", 3, false)
	now = now.Add(5 * time.Minute)
	value, fail = "v3", nil
	stale("v3", 4, false)

	never, _ := sources.NewSecrets(context.Background(), f, r, time.Minute)
	before := reads
	if err := never.RefreshStale(context.Background(), "shop"); err != nil || reads != before {
		t.Fatal("without MaxAge, RefreshStale read the secrets")
	}
}

// TestASecretRemovedFromItsStoreStopsVerifyingWithinMaxAge: rotation's last step deletes the
// previous (leaked) secret; the re-read after MaxAge finds it gone and drops it, keeping the
// current one. A failed re-read keeps what is held only when the store cannot answer, never
// when it answers that the secret is gone.
func TestASecretRemovedFromItsStoreStopsVerifyingWithinMaxAge(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	ctx := context.Background()
	sm := secretsmanager.NewFromConfig(cfg)
	current := awstest.Secret(t, sm, "oncehook-test/revoked-current-", "whsec_current")
	previous := awstest.Secret(t, sm, "oncehook-test/revoked-previous-", "whsec_previous_leaked")
	f, err := sources.Parse([]byte(`{"sources":{"shop":{"scheme":"stripe","retry_horizon":"3d","secrets":[
		{"secretsmanager":"` + current + `"},{"secretsmanager":"` + previous + `"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	secrets, err := sources.NewSecrets(ctx, f, &sources.Resolver{SecretsManager: sm}, time.Minute,
		sources.MaxAge(sources.DefaultMaxAge), sources.Clock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(secrets.Get("shop"), "whsec_previous_leaked") {
		t.Fatalf("secrets %q", secrets.Get("shop"))
	}

	// The operator revokes the leaked previous secret: removed from Secrets Manager.
	if _, err := sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(previous), ForceDeleteWithoutRecovery: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	// Well past the maximum age, several times over (each re-read is attempted and fails).
	for i := range 5 {
		now = now.Add(sources.DefaultMaxAge + time.Second)
		err := secrets.RefreshStale(ctx, "shop")
		_, _ = secrets.Refresh(ctx, "shop") // and a signature failure's re-read
		if held := secrets.Get("shop"); slices.Contains(held, "whsec_previous_leaked") {
			if i == 4 {
				t.Fatalf("%s after the secret was removed from Secrets Manager, the receiver still verifies with it (held %d secrets, %v; re-read error: %v)",
					5*(sources.DefaultMaxAge+time.Second), len(held), strings.Contains(strings.Join(held, ","), "whsec_current"), err)
			}
		}
	}
	if held := secrets.Get("shop"); !slices.Equal(held, []string{"whsec_current"}) {
		t.Fatalf("held %d secrets after the previous was removed, want the current one", len(held))
	}
}

// TestAParameterRemovedFromSSMStopsVerifyingWithinMaxAge: the same for SSM, whose answer is
// ParameterNotFound; a source whose only secret is removed verifies nothing.
func TestAParameterRemovedFromSSMStopsVerifyingWithinMaxAge(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	ctx := context.Background()
	ps := ssm.NewFromConfig(cfg)
	name := awstest.Parameter(t, ps, "/oncehook-test/revoked-", "leaked")
	f, err := sources.Parse([]byte(`{"sources":{"gh":{"scheme":"github","retry_horizon":"1h","secrets":[{"ssm":"` + name + `"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	secrets, err := sources.NewSecrets(ctx, f, &sources.Resolver{SSM: ps}, time.Minute, sources.MaxAge(sources.DefaultMaxAge), sources.Clock(func() time.Time { return now }))
	if err != nil || !slices.Equal(secrets.Get("gh"), []string{"leaked"}) {
		t.Fatalf("%v %d", err, len(secrets.Get("gh")))
	}
	if _, err := ps.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(sources.DefaultMaxAge)
	if err := secrets.RefreshStale(ctx, "gh"); err != nil || len(secrets.Get("gh")) != 0 {
		t.Fatalf("after the parameter was deleted: err %v, %d secrets held", err, len(secrets.Get("gh")))
	}
}

// smFunc is a Secrets Manager answering every read with what its function returns.
type smFunc func() (string, error)

func (f smFunc) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	v, err := f()
	if err != nil {
		return nil, err
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}
