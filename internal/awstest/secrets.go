package awstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// Secret creates a Secrets Manager secret holding value, under prefix and a random suffix,
// deleted when the test ends. A create the SDK sent again after a lost answer finds its own
// secret (ResourceExists, holding our value): the emulator does not honour the create's
// idempotency token.
func Secret(t testing.TB, sm *secretsmanager.Client, prefix, value string) string {
	t.Helper()
	name := Name(prefix)
	Create[*smtypes.ResourceExistsException](t,
		func(ctx context.Context) (any, error) {
			return sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
		},
		func(ctx context.Context) (any, error) {
			got, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
			if err == nil && aws.ToString(got.SecretString) != value {
				err = fmt.Errorf("secret %s exists with another value", name)
			}
			return got, err
		})
	t.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	return name
}

// Name is prefix and a random suffix: a resource's name of a test's own, never one from the
// clock alone (two runs in one tick would meet), so that a resource found under it is the one
// this test made (see Create).
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Parameter puts value in an SSM SecureString parameter under prefix and a random suffix,
// deleted when the test ends. A put the SDK sent again after a lost answer finds its own
// parameter (ParameterAlreadyExists, holding our value).
func Parameter(t testing.TB, ps *ssm.Client, prefix, value string) string {
	t.Helper()
	name := Name(prefix)
	Create[*ssmtypes.ParameterAlreadyExists](t,
		func(ctx context.Context) (any, error) {
			return ps.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(value), Type: ssmtypes.ParameterTypeSecureString})
		},
		func(ctx context.Context) (any, error) {
			got, err := ps.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
			if err == nil && aws.ToString(got.Parameter.Value) != value {
				err = fmt.Errorf("parameter %s exists with another value", name)
			}
			return got, err
		})
	t.Cleanup(func() {
		_, _ = ps.DeleteParameter(context.Background(), &ssm.DeleteParameterInput{Name: aws.String(name)})
	})
	return name
}
