package awstest

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// StreamRecords reads every record of table's stream from TRIM_HORIZON through the engine's
// DynamoDB Streams API and shapes them as Lambda delivers them (events.DynamoDBEventRecord), so
// the outbox worker is tested on records a real engine produced.
func StreamRecords(t testing.TB, client *dynamodb.Client, table string) []events.DynamoDBEventRecord {
	t.Helper()
	ctx := context.Background()
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(desc.Table.LatestStreamArn)
	if arn == "" {
		t.Fatalf("table %s has no stream", table)
	}
	streams := dynamodbstreams.NewFromConfig(Config(t))
	var shards []st.Shard
	var last *string
	for {
		out, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: last})
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if last = out.StreamDescription.LastEvaluatedShardId; last == nil {
			break
		}
	}
	var recs []events.DynamoDBEventRecord
	for _, sh := range shards {
		it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: st.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			out, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range out.Records {
				recs = append(recs, lambdaRecord(r, arn))
			}
			if len(out.Records) == 0 {
				break // an open shard: caught up
			}
			iter = out.NextShardIterator
		}
	}
	return recs
}

func lambdaRecord(r st.Record, arn string) events.DynamoDBEventRecord {
	rec := events.DynamoDBEventRecord{
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventVersion:   aws.ToString(r.EventVersion),
		EventSource:    "aws:dynamodb",
		AWSRegion:      aws.ToString(r.AwsRegion),
		EventSourceArn: arn,
	}
	if r.UserIdentity != nil {
		rec.UserIdentity = &events.DynamoDBUserIdentity{Type: aws.ToString(r.UserIdentity.Type), PrincipalID: aws.ToString(r.UserIdentity.PrincipalId)}
	}
	if d := r.Dynamodb; d != nil {
		rec.Change = events.DynamoDBStreamRecord{
			Keys:           image(d.Keys),
			NewImage:       image(d.NewImage),
			OldImage:       image(d.OldImage),
			SequenceNumber: aws.ToString(d.SequenceNumber),
			SizeBytes:      aws.ToInt64(d.SizeBytes),
			StreamViewType: string(d.StreamViewType),
		}
		if d.ApproximateCreationDateTime != nil {
			rec.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
		}
	}
	return rec
}

func image(m map[string]st.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = attr(v)
	}
	return out
}

func attr(v st.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *st.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *st.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *st.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *st.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *st.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *st.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *st.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *st.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *st.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = attr(e)
		}
		return events.NewListAttribute(l)
	case *st.AttributeValueMemberM:
		return events.NewMapAttribute(image(v.Value))
	}
	return events.NewNullAttribute()
}
