package awstest_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"net/http"
	"runtime"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// TestASetupWhoseCreateLostItsAnswerGoesOn: for each service whose create refuses a second one
// under the same name, the create's first answer is lost below the SDK, so the SDK sends it
// again and the retry meets the resource the first try made. The service's own call fails on
// that (ResourceAlreadyExists and its kin); the setup through awstest takes the resource as
// made and goes on.
func TestASetupWhoseCreateLostItsAnswerGoesOn(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	plain := &http.Client{Transport: awstest.BaseTransport()} // for reading back and cleaning up
	eb := func(c *http.Client) *eventbridge.Client {
		return eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.HTTPClient = c })
	}
	fn := func(c *http.Client) *lambda.Client {
		return lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.HTTPClient = c })
	}
	sm := func(c *http.Client) *secretsmanager.Client {
		return secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) { o.HTTPClient = c })
	}
	ps := func(c *http.Client) *ssm.Client {
		return ssm.NewFromConfig(cfg, func(o *ssm.Options) { o.HTTPClient = c })
	}
	db := func(c *http.Client) *dynamodb.Client {
		return awstest.Client(t, func(o *dynamodb.Options) { o.HTTPClient = c })
	}
	createBus := func(c *http.Client, name string) func(context.Context) (any, error) {
		t.Cleanup(func() {
			_, _ = eb(plain).DeleteEventBus(context.Background(), &eventbridge.DeleteEventBusInput{Name: aws.String(name)})
		})
		return func(ctx context.Context) (any, error) {
			return eb(c).CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(name)})
		}
	}
	findBus := func(name string) func(context.Context) (any, error) {
		return func(ctx context.Context) (any, error) {
			return eb(plain).DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(name)})
		}
	}
	createFunction := func(c *http.Client, name string) func(context.Context) (any, error) {
		t.Cleanup(func() {
			_, _ = fn(plain).DeleteFunction(context.Background(), &lambda.DeleteFunctionInput{FunctionName: aws.String(name)})
		})
		return func(ctx context.Context) (any, error) {
			return fn(c).CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(name), Runtime: lambdatypes.RuntimeProvidedal2023,
				Handler: aws.String("bootstrap"), Role: aws.String("arn:aws:iam::000000000000:role/oncehook-test"),
				Code: &lambdatypes.FunctionCode{ZipFile: bootstrapZip(t)}})
		}
	}
	findFunction := func(name string) func(context.Context) (any, error) {
		return func(ctx context.Context) (any, error) {
			return fn(plain).GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
		}
	}
	table := func(name string) *dynamodb.CreateTableInput {
		in := dedup.CreateTableInput(name)
		t.Cleanup(func() {
			_, _ = db(plain).DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: in.TableName})
		})
		return in
	}

	for _, c := range []struct {
		name, op string
		// bare makes a resource with the service's own call and returns its error.
		bare func(*http.Client) error
		// exists tells the service's already-exists error.
		exists func(error) bool
		// setup makes one through awstest.
		setup func(*testing.T, *http.Client)
	}{
		{name: "EventBridge CreateEventBus", op: "CreateEventBus",
			bare: func(c *http.Client) error {
				_, err := createBus(c, awstest.Name("oncehook-lost-"))(context.Background())
				return err
			},
			exists: is[*ebtypes.ResourceAlreadyExistsException],
			setup: func(t *testing.T, c *http.Client) {
				name := awstest.Name("oncehook-lost-")
				awstest.Create[*ebtypes.ResourceAlreadyExistsException](t, createBus(c, name), findBus(name))
			}},
		{name: "Lambda CreateFunction", op: "CreateFunction",
			bare: func(c *http.Client) error {
				_, err := createFunction(c, awstest.Name("oncehook-lost-"))(context.Background())
				return err
			},
			exists: is[*lambdatypes.ResourceConflictException],
			setup: func(t *testing.T, c *http.Client) {
				name := awstest.Name("oncehook-lost-")
				awstest.Create[*lambdatypes.ResourceConflictException](t, createFunction(c, name), findFunction(name))
			}},
		{name: "DynamoDB CreateTable", op: "CreateTable",
			bare: func(c *http.Client) error {
				_, err := db(c).CreateTable(context.Background(), table(awstest.Name("oncehook-lost-")))
				return err
			},
			exists: is[*ddbtypes.ResourceInUseException],
			setup: func(t *testing.T, c *http.Client) {
				name := awstest.CreateTable(t, db(c), "oncehook-lost-", dedup.CreateTableInput(""))
				if _, err := db(plain).DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}); err != nil {
					t.Error(err)
				}
			}},
		{name: "Secrets Manager CreateSecret", op: "CreateSecret",
			bare: func(c *http.Client) error {
				name := awstest.Name("oncehook-lost/")
				t.Cleanup(func() {
					_, _ = sm(plain).DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true)})
				})
				_, err := sm(c).CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String("whsec_lost")})
				return err
			},
			exists: is[*smtypes.ResourceExistsException],
			setup:  func(t *testing.T, c *http.Client) { awstest.Secret(t, sm(c), "oncehook-lost/", "whsec_lost") }},
		{name: "SSM PutParameter", op: "PutParameter",
			bare: func(c *http.Client) error {
				name := awstest.Name("/oncehook-lost/")
				t.Cleanup(func() {
					_, _ = ps(plain).DeleteParameter(context.Background(), &ssm.DeleteParameterInput{Name: aws.String(name)})
				})
				_, err := ps(c).PutParameter(context.Background(), &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String("lost"), Type: ssmtypes.ParameterTypeSecureString})
				return err
			},
			exists: is[*ssmtypes.ParameterAlreadyExists],
			setup:  func(t *testing.T, c *http.Client) { awstest.Parameter(t, ps(c), "/oncehook-lost/", "lost") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: c.op, N: 1}
			if err := c.bare(&http.Client{Transport: lose}); lose.Lost() != 1 || !c.exists(err) {
				t.Fatalf("the service's own call, %d answers lost: %v; want its retry to meet the resource its first try made", lose.Lost(), err)
			}
			lose = &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: c.op, N: 1}
			c.setup(t, &http.Client{Transport: lose})
			if lose.Lost() != 1 {
				t.Fatalf("%d answers lost, want 1", lose.Lost())
			}
		})
	}
}

// TestCreateFailsOnAnyOtherError: only the already-exists error the caller names is taken as
// the resource made; another one fails the setup, and find is not asked.
func TestCreateFailsOnAnyOtherError(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	found := false
	done := make(chan struct{})
	go func() { // Fatal ends the goroutine it runs on
		defer close(done)
		awstest.Create[*ebtypes.ResourceAlreadyExistsException](rec,
			func(context.Context) (any, error) {
				return nil, &ebtypes.LimitExceededException{Message: aws.String("too many buses")}
			},
			func(context.Context) (any, error) { found = true; return nil, nil })
	}()
	<-done
	if !rec.failed || found {
		t.Fatalf("failed %v, find asked %v: want the setup failed without asking find", rec.failed, found)
	}
}

// recorder is a testing.TB whose Fatal records the failure and stops the goroutine, as
// testing's does, so a test can hold a helper to failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(...any) {
	r.failed = true
	runtime.Goexit()
}

// is reports whether err is, or wraps, an E.
func is[E error](err error) bool {
	var e E
	return errors.As(err, &e)
}

// bootstrapZip is a deployment package holding an executable bootstrap, enough for
// CreateFunction; the function is never invoked.
func bootstrapZip(t *testing.T) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	f, err := zw.CreateHeader(&zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, ExternalAttrs: 0o755 << 16})
	if err == nil {
		_, err = f.Write([]byte("#!/bin/sh\n"))
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
