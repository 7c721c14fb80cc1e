// Command infra is the storefront's CDK app: its own stack, with one oncehook construct built
// from the storefront's own functions. `-c local=true` deploys it to an emulator.
package main

import (
	"os"
	"runtime"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"

	oncehook "github.com/oncehook/oncehook/infra"

	"example.com/storefront/executors"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	local := app.Node().TryGetContext(jsii.String("local")) == "true"
	sourcesFile, crm := "sources.json", "https://crm.example.com/customers"
	if local {
		sourcesFile, crm = "sources.local.json", "http://127.0.0.1:8033/customers"
	}
	stack := awscdk.NewStack(app, jsii.String("Storefront"), nil)
	// The storefront's own table, which checkouts update in the claim's transaction. The
	// sources file lists it as tables.customers, "bound": it names no table, and TableBindings
	// below binds it to this one, so CloudFormation names it (one sources file for every
	// account and stage): the construct grants the receiver what the file's entry lists on it
	// and hands the functions its name. Its balances are business data: point-in-time
	// recovery, and kept when the stack is deleted (destroyed only on the emulator, so a local
	// deploy can be repeated).
	removal := awscdk.RemovalPolicy_RETAIN
	if local {
		removal = awscdk.RemovalPolicy_DESTROY
	}
	customers := awsdynamodb.NewTable(stack, jsii.String("Customers"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("email"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(!local),
		RemovalPolicy:      removal,
	})
	webhooks := oncehook.New(stack, "Webhooks", &oncehook.Props{
		SourcesFile: sourcesFile,
		Environment: map[string]string{"CRM_URL": crm},
		Local:       local,
		X86:         local && runtime.GOARCH == "amd64",
		// The sources file's tables.customers is this table, whatever CloudFormation names it.
		TableBindings: map[string]awsdynamodb.ITable{"customers": customers},
		Receiver:      oncehook.ReceiverProps{Code: oncehook.Code{GoPackage: "./cmd/receiver"}},
		Outbox: oncehook.OutboxProps{
			Code: oncehook.Code{GoPackage: "./cmd/outbox"},
			// What cmd/outbox and cmd/sweeper run: the synth sizes the lease from each one's
			// bound (MaxDuration), and refuses one that declares none.
			Executors: executors.All(),
		},
		Sweeper: oncehook.SweeperProps{
			Code: oncehook.Code{GoPackage: "./cmd/sweeper"},
			// Orders and pushes are written only by put effects: any without claimed_by leaked.
			AuditPrefixes: []string{"ORDER#", "PUSH#"},
		},
		// Whoever is on call (-c alarm-email=...); without it the synth warns that the
		// alarms reach nobody.
		Alarms: oncehook.AlarmProps{Emails: alarmEmails(app)},
	})
	awscdk.NewCfnOutput(stack, jsii.String("WebhookUrl"), &awscdk.CfnOutputProps{Value: webhooks.WebhookUrl})
	awscdk.NewCfnOutput(stack, jsii.String("TableName"), &awscdk.CfnOutputProps{Value: webhooks.Table.TableName()})
	awscdk.NewCfnOutput(stack, jsii.String("ApiId"), &awscdk.CfnOutputProps{Value: webhooks.Api.ApiId()})
	awscdk.NewCfnOutput(stack, jsii.String("CustomersTable"), &awscdk.CfnOutputProps{Value: customers.TableName()})
	app.Synth(nil)
	os.Exit(0)
}

func alarmEmails(app awscdk.App) []string {
	if e, ok := app.Node().TryGetContext(jsii.String("alarm-email")).(string); ok && e != "" {
		return []string{e}
	}
	return nil
}
