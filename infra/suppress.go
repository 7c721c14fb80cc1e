package infra

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// suppress records, with its reason, every cdk-nag AwsSolutions finding the design accepts
// (the new alarm topic's and X-Ray's are where those are made). Anything not suppressed fails
// TestCdkNagFindsNoUnsuppressedErrors.
func suppress(o *Oncehook) {
	// Only the webhook route goes without an authorizer: the suppression is on it, not on the API.
	for _, child := range *o.Api.Node().Children() {
		if route, ok := child.(awsapigatewayv2.HttpRoute); ok && strings.HasPrefix(*route.Node().Id(), "POST--hooks--") {
			nag(route, "AwsSolutions-APIG4", "Webhook providers cannot use IAM, Cognito or JWT authorizers; each delivery is authenticated by its provider's HMAC signature over the raw body, verified in constant time by the receiver before anything is written.")
		}
	}
	nag(o.FailureQueue, "AwsSolutions-SQS3", "This queue is itself the dead-letter (on-failure) destination of the outbox's stream mapping; it alarms when not empty.")
	nag(o.Outbox.Role(), "AwsSolutions-IAM5", "dynamodb:ListStreams, added by the DynamoDB event source, supports no resource-level permissions.", "Resource::*")
	for _, fn := range o.functions() {
		nag(fn.Role(), "AwsSolutions-IAM5", "Log streams are created at run time; the grant is limited to the streams of this function's own log group.",
			map[string]any{"regex": `/^Resource::<[A-Za-z]+Logs[0-9A-F]+\.Arn>:\*$/g`})
	}
}

// nag suppresses one cdk-nag finding on c and its children, with its reason; appliesTo narrows
// it to those of its findings' resources.
func nag(c constructs.IConstruct, id, reason string, appliesTo ...any) {
	s := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		s.AppliesTo = &appliesTo
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{s}, jsii.Bool(true))
}
