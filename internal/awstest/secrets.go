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
)

// Secret creates a Secrets Manager secret holding value, under prefix and a random suffix (never
// a name from the clock alone: two runs in one tick would meet), deleted when the test ends. A
// create the SDK sent again after a lost answer finds its own secret: an engine that does not
// honour the create's idempotency token answers ResourceExists, and the secret holding our
// value is ours.
func Secret(t testing.TB, sm *secretsmanager.Client, prefix, value string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
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
