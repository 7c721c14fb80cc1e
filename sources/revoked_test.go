package sources_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/sources"
)

// TestASecretRemovedFromItsStoreStopsVerifyingWithinMaxAge: rotation's last step deletes the
// previous (leaked) secret; the re-read after MaxAge finds it gone and drops it, keeping the
// current one. A failed re-read keeps what is held only when the store cannot answer, never
// when it answers that the secret is gone. Found by review.
func TestASecretRemovedFromItsStoreStopsVerifyingWithinMaxAge(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	ctx := context.Background()
	sm := secretsmanager.NewFromConfig(cfg)
	base := "oncehook-test/revoked-" + time.Now().Format("150405.000000")
	current, previous := base+"-current", base+"-previous"
	for name, v := range map[string]string{current: "whsec_current", previous: "whsec_previous_leaked"} {
		if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(v)}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true)})
		})
	}
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
	name := "/oncehook-test/revoked-" + time.Now().Format("150405.000000")
	if _, err := ps.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String("leaked"), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ps.DeleteParameter(context.Background(), &ssm.DeleteParameterInput{Name: aws.String(name)})
	})
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
