// Command fn is the Lambda function the targets tests deploy to the emulator: it answers the
// outbox's envelope, and fails when the intent's payload asks it to.
package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/oncehook/oncehook/outbox/targets"
)

func main() {
	lambda.Start(func(_ context.Context, e targets.Envelope) (map[string]string, error) {
		var p struct{ Fail bool }
		if json.Unmarshal(e.Payload, &p) == nil && p.Fail {
			return nil, errors.New("the payload asked to fail")
		}
		return map[string]string{"key": e.IdempotencyKey}, nil
	})
}
