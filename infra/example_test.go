package infra_test

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
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
		SourcesFile:   "sources.json",
		Receiver:      infra.Code{GoPackage: "./cmd/receiver"},
		Outbox:        infra.Code{GoPackage: "./cmd/outbox"},
		Sweeper:       infra.Code{GoPackage: "./cmd/sweeper"},
		Domain:        &infra.Domain{Name: "hooks.example.com", Certificate: cert},
		AuditPrefixes: []string{"ORDER#"},
	})
	o.AlarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String("oncall@example.com"), nil))
	awscdk.NewCfnOutput(stack, jsii.String("StripeUrl"), &awscdk.CfnOutputProps{Value: o.WebhookUrls["stripe"]})
	awscdk.NewCfnOutput(stack, jsii.String("DnsTarget"), &awscdk.CfnOutputProps{Value: o.DomainTarget})
	app.Synth(nil)
}
