package targets_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/oncehook/oncehook/outbox/targets"
)

// failingFunction is a function that ran and failed, answering with its error payload as
// Lambda returns it (FunctionError "Unhandled", status 200).
type failingFunction struct{ payload string }

func (f failingFunction) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(f.payload)}, nil
}

// TestAFunctionsErrorAnswerNeverReachesASpan: a span never holds a downstream's answer
// (docs/operations.md: spans leave for a tracing backend the claims table's readers and the
// console's redaction do not guard; the claim's last_error keeps the whole error). A function
// invoked request-response that fails answers with its error payload, which may quote what it
// was given (a customer's address, a token); the Invoke span's status must describe the
// failure without that answer.
func TestAFunctionsErrorAnswerNeverReachesASpan(t *testing.T) {
	t.Parallel()
	const answer = `{"errorMessage":"card 4242424242424242 declined for jane@example.com","errorType":"Error"}`
	x := &targets.Lambda{Client: failingFunction{answer}, Function: "charge", Synchronous: true}
	ctx, _, rec := call(t)
	if err := x.Execute(ctx, task("evt_fe", "charge")); err == nil {
		t.Fatal("a function error was taken as done")
	}
	for _, s := range rec.Ended() {
		for _, what := range []string{s.Status().Description} {
			if strings.Contains(what, "4242424242424242") || strings.Contains(what, "jane@example.com") {
				t.Errorf("span %q's status holds the function's answer: %q", s.Name(), what)
			}
		}
		for _, kv := range s.Attributes() {
			if v := kv.Value.Emit(); strings.Contains(v, "4242424242424242") || strings.Contains(v, "jane@example.com") {
				t.Errorf("span %q's %s holds the function's answer: %q", s.Name(), kv.Key, v)
			}
		}
	}
}
