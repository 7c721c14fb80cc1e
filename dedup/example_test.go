package dedup_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
)

// The leak audit, run by hand or on a schedule: each Run reads the next 100 items of the table
// and reports order and shipment records (written only by put effects) that no claim wrote.
// The sweeper runs it after each sweep when AUDIT_PREFIXES is set.
func ExampleAuditor() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	a := &dedup.Auditor{Client: dynamodb.NewFromConfig(cfg), Table: "webhooks", Prefixes: []string{"ORDER#", "SHIPMENT#"}}
	rep, err := a.Run(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range rep.WithoutClaim {
		log.Printf("written outside a claim: %s %s", k.PK, k.SK)
	}
}
