package infra_test

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/infra"
)

// A production deployment: the application's own functions, alarms paging the on-call
// address, the webhook URLs on a domain that outlives the API, and the leak audit on.
func ExampleNew() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Webhooks"), nil)
	cert := awscertificatemanager.Certificate_FromCertificateArn(stack, jsii.String("Cert"),
		jsii.String("arn:aws:acm:eu-west-1:111111111111:certificate/0c8e2f6c-4a0e-4d2b-9d8e-2f1f1c7e6a11"))
	o := infra.New(stack, "Webhooks", &infra.Props{
		SourcesFile: "sources.json",
		Receiver: infra.ReceiverProps{
			Code:   infra.Code{GoPackage: "./cmd/receiver"},
			Domain: &infra.Domain{Name: "hooks.example.com", Certificate: cert},
		},
		Outbox: infra.OutboxProps{Code: infra.Code{GoPackage: "./cmd/outbox"}},
		Sweeper: infra.SweeperProps{
			Code:          infra.Code{GoPackage: "./cmd/sweeper"},
			AuditPrefixes: []string{"ORDER#"},
		},
	})
	o.AlarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String("oncall@example.com"), nil))
	awscdk.NewCfnOutput(stack, jsii.String("StripeUrl"), &awscdk.CfnOutputProps{Value: o.WebhookUrls["stripe"]})
	awscdk.NewCfnOutput(stack, jsii.String("DnsTarget"), &awscdk.CfnOutputProps{Value: o.DomainTarget})
	app.Synth(nil)
}

// A platform team's settings: a busier stream, the receiver with more memory and capped, the
// outbox on x86 (its code built for it), traces, logs kept a year and beyond the stack, and
// the table kept across a rename of the construct (from "Webhooks" to "Hooks").
func ExampleFunctionOptions() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Webhooks"), nil)
	infra.New(stack, "Hooks", &infra.Props{
		SourcesFile: "sources.json",
		Table:       infra.TableProps{LogicalID: "WebhooksTable897AE32D"},
		Receiver: infra.ReceiverProps{
			Function: infra.FunctionOptions{MemorySize: 512, ReservedConcurrency: 200},
		},
		Outbox: infra.OutboxProps{
			Function:              infra.FunctionOptions{Architecture: awslambda.Architecture_X86_64()},
			StreamParallelization: 4,
			StreamBatchSize:       50,
		},
		Telemetry: infra.TelemetryProps{
			Tracing:      awslambda.Tracing_ACTIVE,
			LogRetention: awslogs.RetentionDays_ONE_YEAR,
			LogRemoval:   awscdk.RemovalPolicy_RETAIN,
		},
	})
	app.Synth(nil)
}

// A table that outlives the webhook stack: a stateful stack holds it (retained, protected,
// with what oncehook needs), and the construct adopts it. Renaming or moving the construct, or
// replacing the whole webhook stack, leaves the table and its dedup history where they are.
func ExampleProps_existingTable() {
	app := awscdk.NewApp(nil)
	state := awscdk.NewStack(app, jsii.String("WebhooksState"), nil)
	claims := awsdynamodb.NewTable(state, jsii.String("Claims"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String("expires_at"),
		Stream:              awsdynamodb.StreamViewType_NEW_IMAGE,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	})
	claims.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String("pending"),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String("pending_shard"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String("pending_since"), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})
	stack := awscdk.NewStack(app, jsii.String("Webhooks"), nil)
	infra.New(stack, "Webhooks", &infra.Props{
		SourcesFile: "sources.json",
		Receiver:    infra.ReceiverProps{Code: infra.Code{GoPackage: "./cmd/receiver"}},
		Table:       infra.TableProps{Existing: claims}, // a cross-stack reference: the stream mapping, grants and alarms are on it
	})
	app.Synth(nil)
}

// A sources file that names none of the app's resources: its customers table and its audit
// queue are "bound" ({"bound": true} in place of a name or an ARN), and the app binds them to
// what it defines. The grants are on these resources, and the functions are handed the names
// CloudFormation gives them (ONCEHOOK_BINDINGS), so one file serves every account and stage.
func ExampleProps_tableBindings() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Shop"), nil)
	customers := awsdynamodb.NewTable(stack, jsii.String("Customers"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("email"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
	})
	audit := awssqs.NewQueue(stack, jsii.String("Audit"), &awssqs.QueueProps{EnforceSSL: jsii.Bool(true)})
	infra.New(stack, "Webhooks", &infra.Props{
		SourcesFile:   "sources.json", // "tables": {"customers": {"bound": true, ...}}, "targets": {"audit": {"type": "sqs", "bound": true}}
		Receiver:      infra.ReceiverProps{Code: infra.Code{GoPackage: "./cmd/receiver"}},
		TableBindings: map[string]awsdynamodb.ITable{"customers": customers},
		QueueBindings: map[string]awssqs.IQueue{"audit": audit},
	})
	app.Synth(nil)
}
