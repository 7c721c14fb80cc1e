package awstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// Secret creates a Secrets Manager secret holding value, under prefix and a random suffix (never
// a name from the clock alone: two runs in one tick would meet), deleted when the test ends. A
// create the SDK sent again after a lost answer finds its own secret: an engine that does not
// honour the create's idempotency token answers ResourceExists, and the secret holding our
// value is ours.
func Secret(t testing.TB, sm *secretsmanager.Client, prefix, value string) string {
	t.Helper()
	name := Name(prefix)
	ctx := context.Background()
	_, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
	var exists *smtypes.ResourceExistsException
	if errors.As(err, &exists) {
		got, gerr := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
		if gerr == nil && aws.ToString(got.SecretString) == value {
			err = nil
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	return name
}

// Name is prefix and a random suffix: a resource's name of a test's own, never one from the
// clock alone (two runs in one tick, or a create the SDK sent again, would meet).
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
	ctx := context.Background()
	_, err := ps.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(value), Type: ssmtypes.ParameterTypeSecureString})
	var exists *ssmtypes.ParameterAlreadyExists
	if errors.As(err, &exists) {
		got, gerr := ps.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
		if gerr == nil && aws.ToString(got.Parameter.Value) == value {
			err = nil
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ps.DeleteParameter(context.Background(), &ssm.DeleteParameterInput{Name: aws.String(name)})
	})
	return name
}
