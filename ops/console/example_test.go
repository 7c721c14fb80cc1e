package console_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/ops/console"
	"github.com/oncehook/oncehook/sources"
)

// A team mounts the console in a server of its own: read-only, behind its own token and
// over TLS, over the deployment's table and sources file.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	file, err := sources.Load("sources.json")
	if err != nil {
		log.Fatal(err)
	}
	c, err := console.New(console.Config{
		DynamoDB: dynamodb.NewFromConfig(cfg),
		Table:    "Oncehook-TableCD117FA1-9A30AD6036C4C",
		Sources:  file,
		ReadOnly: true,
		Token:    "a long random token from your secret store",
	})
	if err != nil {
		log.Fatal(err)
	}
	addr := "0.0.0.0:8030"
	if err := console.CheckAddr(addr, "a long random token from your secret store", true); err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: addr, Handler: c, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServeTLS("console.crt", "console.key"))
}

// Another tool that prints an intent's errors (hookctl inspect) shows them as the console does:
// the sources file's target secrets, and a URL's password, redacted.
func ExampleNewRedactor() {
	f, err := sources.Parse([]byte(`{"sources":{"shop":{"scheme":"stripe","secrets":[{"env":"S"}]}},
	  "targets":{"chat":{"url":"https://hooks.chat.example/services/T0/XoXbSeCrEtT0k3n"}}}`))
	if err != nil {
		log.Fatal(err)
	}
	in := dedup.ClaimIntent{Target: "chat", Payload: []byte(`{"text":"order paid"}`)}
	msg := "permanent: POST https://hooks.chat.example/services/T0/XoXbSeCrEtT0k3n: 404 Not Found"
	fmt.Println(console.NewRedactor(f).IntentError(in, msg))
	// Output: permanent: POST https://hooks.chat.example/… 404 Not Found
}
