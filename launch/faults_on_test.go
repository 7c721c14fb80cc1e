//go:build faultinject

package launch

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/internal/awstest"
)

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
	if opts, err := dynamoDBFaults(logger, ""); err != nil || len(opts) != 0 || logs.Len() != 0 {
		t.Fatalf("no faults, yet: %v %v %s", opts, err, logs.String())
	}
	opts, err := dynamoDBFaults(logger, "dynamodb.throttle=0.05,downstream.error=0.1")
	o := &dynamodb.Options{}
	if err != nil || len(opts) != 1 {
		t.Fatal(opts, err)
	}
	opts[0](o)
	if !strings.Contains(logs.String(), "FAULT INJECTION IS ON") || !strings.Contains(logs.String(), `"faults":"dynamodb.throttle=0.05"`) || o.HTTPClient == nil {
		t.Fatalf("%s", logs.String())
	}
}
