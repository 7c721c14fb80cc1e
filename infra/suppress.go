package infra

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// suppress records, with its reason, every cdk-nag AwsSolutions finding the design accepts.
// Anything not listed here fails TestCdkNagFindsNoUnsuppressedErrors.
func suppress(api awsapigatewayv2.HttpApi, dlq awssqs.Queue, worker awslambda.Function, functions ...awslambda.Function) {
	nag := func(id, reason string, appliesTo ...interface{}) *cdknag.NagPackSuppression {
		s := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
		if len(appliesTo) > 0 {
			s.AppliesTo = &appliesTo
		}
		return s
	}
	// Only the webhook route goes without an authorizer: the suppression is on it, not on the API.
	for _, child := range *api.Node().Children() {
		if route, ok := child.(awsapigatewayv2.HttpRoute); ok && strings.HasPrefix(*route.Node().Id(), "POST--hooks--") {
			cdknag.NagSuppressions_AddResourceSuppressions(route, &[]*cdknag.NagPackSuppression{
				nag("AwsSolutions-APIG4", "Webhook providers cannot use IAM, Cognito or JWT authorizers; each delivery is authenticated by its provider's HMAC signature over the raw body, verified in constant time by the receiver before anything is written."),
			}, jsii.Bool(true))
		}
	}
	cdknag.NagSuppressions_AddResourceSuppressions(dlq, &[]*cdknag.NagPackSuppression{
		nag("AwsSolutions-SQS3", "This queue is itself the dead-letter (on-failure) destination of the outbox's stream mapping; it alarms when not empty."),
	}, jsii.Bool(true))
	cdknag.NagSuppressions_AddResourceSuppressions(worker.Role(), &[]*cdknag.NagPackSuppression{
		nag("AwsSolutions-IAM5", "dynamodb:ListStreams, added by the DynamoDB event source, supports no resource-level permissions.", "Resource::*"),
	}, jsii.Bool(true))
	for _, fn := range functions {
		cdknag.NagSuppressions_AddResourceSuppressions(fn.Role(), &[]*cdknag.NagPackSuppression{
			nag("AwsSolutions-IAM5", "Log streams are created at run time; the grant is limited to the streams of this function's own log group.",
				map[string]interface{}{"regex": `/^Resource::<[A-Za-z]+Logs[0-9A-F]+\.Arn>:\*$/g`}),
		}, jsii.Bool(true))
	}
}

// suppressTopic excuses the new alarm topic's encryption: CloudWatch alarms cannot publish to a
// topic encrypted with the AWS managed SNS key, and a notification holds an alarm's name and
// state, no secrets. (Give Props.Alarms.Topic a topic under a customer key of your own to have one.)
func suppressTopic(t awssns.Topic) {
	cdknag.NagSuppressions_AddResourceSuppressions(t, &[]*cdknag.NagPackSuppression{
		{Id: jsii.String("AwsSolutions-SNS2"), Reason: jsii.String("CloudWatch alarms cannot publish to a topic under the AWS managed SNS key; notifications carry alarm names and states, no secrets. Pass Props.Alarms.Topic with a customer-managed key to encrypt.")},
	}, jsii.Bool(true))
}
