package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/harness"
	"github.com/oncehook/oncehook/outbox"
)

// TestTheDeployedSweeperFindsARecordWrittenOutsideAClaim: with AUDIT_PREFIXES set, the
// deployed sweeper's audit walks the table a sample per run and logs, with its key, a record
// under the prefix that no claim wrote. It takes at most one pass over the table (its item
// count over the sample, plus runs skipped while the scheduled sweep held the lock).
func TestTheDeployedSweeperFindsARecordWrittenOutsideAClaim(t *testing.T) {
	s := deployed(t)
	ctx := context.Background()
	cfg := awstest.Config(t)
	dep, err := harness.FindDeployment(ctx, lambda.NewFromConfig(cfg), s.table)
	if err != nil {
		t.Fatal(err)
	}
	const sample = 1000
	restore, err := dep.SetEnv(ctx, map[string]map[string]string{"sweeper": {"AUDIT_PREFIXES": "LEAK#", "AUDIT_SAMPLE": "1000"}})
	t.Cleanup(func() {
		if err := restore(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	rogue := "LEAK#" + runID(6)
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: rogue}, "sk": &types.AttributeValueMemberS{Value: "X"}}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: key}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = s.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key})
	})
	// Every page of the count: a Scan answers at most 1 MB a page, and an emulator reused by
	// earlier runs holds more than that.
	items := 0
	pages := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{TableName: aws.String(s.table), Select: types.SelectCount})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		items += int(page.Count)
	}
	// A scheduled sweep the emulator killed mid-run (another test's change of the functions'
	// configuration restarts them) holds the sweep lock for its whole deadline, and every run
	// here would be skipped: the lock is cleared first, as that deadline would.
	lock := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: outbox.SweepLockPK}, "sk": &types.AttributeValueMemberS{Value: outbox.SweepLockSK}}
	if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: lock}); err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Second)
	logs := cloudwatchlogs.NewFromConfig(cfg)
	runs := 2*(items/sample+1) + 2
	for i := range runs {
		if err := dep.Sweep(ctx); err != nil {
			t.Fatalf("sweep %d: %v", i, err)
		}
		lines, err := dep.LogLines(ctx, logs, "sweeper", started, `"effect record without a claim"`)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if strings.Contains(l, `"pk":"`+rogue+`"`) {
				t.Logf("found after %d sweeps over %d items", i+1, items)
				return
			}
		}
	}
	t.Fatalf("%d sweeps over a table of %d items, %d a run, did not log %s", runs, items, sample, rogue)
}
