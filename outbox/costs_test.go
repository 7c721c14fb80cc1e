package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// matchesFilter applies a Lambda event filter pattern to a record, with the rules of AWS's
// "Lambda event filtering" documentation for the parts our patterns use: every key of the
// pattern must match; a nested object matches the record's object at that key; a list matches
// when any element does, a scalar by equality and {"exists": true|false} by the key's presence.
func matchesFilter(record map[string]any, pattern map[string]any) bool {
	for k, p := range pattern {
		v, present := record[k]
		switch p := p.(type) {
		case map[string]any:
			sub, ok := v.(map[string]any)
			if !ok || !matchesFilter(sub, p) {
				return false
			}
		case []any:
			matched := false
			for _, alt := range p {
				if m, ok := alt.(map[string]any); ok {
					if want, ok := m["exists"].(bool); ok && want == present {
						matched = true
					}
				} else if present && v == alt {
					matched = true
				}
			}
			if !matched {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// passes reports whether the outbox's stream mapping would invoke the worker with rec.
func passes(t testing.TB, rec events.DynamoDBEventRecord) bool {
	t.Helper()
	b, err := json.Marshal(rec) // the JSON Lambda filters is the record as it delivers it
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, p := range outbox.StreamFilterPatterns() {
		pj, _ := json.Marshal(p) // through JSON, as the pattern is deployed
		var pattern map[string]any
		_ = json.Unmarshal(pj, &pattern)
		if matchesFilter(m, pattern) {
			return true
		}
	}
	return false
}

// mapping plays Lambda's stream mapping over the engine's real stream: each round reads the
// records not yet seen, drops those the filter drops, and hands the rest to the worker, until a
// round brings none. It returns how many records the stream held and how many invoked the worker.
func (e *env) mapping(w *outbox.Worker) (records, invoked int) {
	e.t.Helper()
	seen := 0
	for {
		all := e.records()
		fresh := all[seen:]
		seen = len(all)
		var pass []events.DynamoDBEventRecord
		for _, r := range fresh {
			if passes(e.t, r) {
				pass = append(pass, r)
			}
		}
		if len(pass) == 0 {
			return len(all), invoked
		}
		invoked += len(pass)
		if resp, _ := w.HandleStream(context.Background(), batch(pass)); len(resp.BatchItemFailures) != 0 {
			e.t.Fatalf("batch failures %v", resp.BatchItemFailures)
		}
	}
}

func TestStreamRecordsAndClaimWritesPerEvent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		intents          int
		records, invoked int // per event
		updates          int // per event: a lease and a finish per intent
	}{
		{intents: 1, records: 3, invoked: 1, updates: 2},
		{intents: 2, records: 5, invoked: 1, updates: 4},
	} {
		t.Run(fmt.Sprintf("%d intents", c.intents), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			const events = 10
			for i := range events {
				var intents []dedup.Intent
				for j := range c.intents {
					intents = append(intents, dedup.Intent{Name: fmt.Sprintf("i%d", j), Target: "email", Payload: []byte(`{}`)})
				}
				e.commitOne(fmt.Sprintf("evt_cost_%02d", i), intents...)
			}
			counter := &countingAPI{API: e.client, calls: map[string]int{}}
			w, err := outbox.New(counter, outbox.Config{Table: e.table, Now: e.now,
				Executors: map[string]outbox.Executor{"email": &outbox.HTTPExecutor{URL: e.down.URL, Timeout: time.Second}}})
			if err != nil {
				t.Fatal(err)
			}
			records, invoked := e.mapping(w)
			if s := e.statuses(); s[dedup.IntentDone] != events*c.intents {
				t.Fatalf("statuses %v", s)
			}
			for _, cl := range e.claims() {
				if cl.PendingShard != "" {
					t.Fatalf("%s still in the pending index", cl.EventID)
				}
			}
			t.Logf("%d intents per event: %d stream records, %d invoked the worker, %d claim writes (1 commit + %d updates) per event",
				c.intents, records/events, invoked/events, 1+counter.calls["UpdateItem"]/events, counter.calls["UpdateItem"]/events)
			if records != events*c.records || invoked != events || counter.calls["UpdateItem"] != events*c.updates {
				t.Fatalf("per event: %d records, %d invoked the worker, %d updates; want %d, 1, %d",
					records/events, invoked/events, counter.calls["UpdateItem"]/events, c.records, c.updates)
			}
		})
	}
}

// TestClaimsWrittenBeforeTheWakeMarkerAreDrivenToDone writes claims the way the previous
// release left them in flight (no wake marker; parked and finished claims under due shards;
// a running lease; a retry waiting), then lets the new worker, stream mapping and sweeper at them.
func TestClaimsWrittenBeforeTheWakeMarkerAreDrivenToDone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	states := map[string]string{ // event -> how the previous release left its one intent
		"evt_old_new":     "an INSERT not yet consumed",
		"evt_old_running": "running under a lease that expired with its worker",
		"evt_old_retry":   "pending, retried, due",
		"evt_old_parked":  "parked, in a due shard",
		"evt_old_done":    "done, in a due shard (its index removal was lost)",
	}
	for id := range states {
		e.commitOne(id)
	}
	set := func(id, update string, v map[string]any) {
		t.Helper()
		values := map[string]any{}
		for k, x := range v {
			values[k] = x
		}
		kv := []any{}
		for k, x := range values {
			kv = append(kv, k, x)
		}
		in := &dynamodb.UpdateItemInput{TableName: aws.String(e.table), Key: key(dedup.ClaimKey("shop", id)),
			UpdateExpression: aws.String(update)}
		if len(kv) > 0 {
			in.ExpressionAttributeNames = map[string]string{"#n": "email.send"}
			if strings.Contains(update, "#st") {
				in.ExpressionAttributeNames["#st"] = "status"
			}
			in.ExpressionAttributeValues = vals(kv...)
		}
		if _, err := e.client.UpdateItem(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	for id := range states {
		set(id, "REMOVE wake", nil) // the previous release wrote no wake marker
	}
	past := int(e.now().Add(-time.Hour).UnixMilli())
	set("evt_old_running", "SET intents.#n.#st = :s, intents.#n.attempts = :a, intents.#n.lease_until = :u, intents.#n.lease_owner = :o",
		map[string]any{":s": "running", ":a": 1, ":u": past, ":o": "oldowner"})
	set("evt_old_retry", "SET intents.#n.attempts = :a, intents.#n.next_attempt_at = :u, intents.#n.last_error = :e",
		map[string]any{":a": 1, ":u": past, ":e": "POST: 503"})
	set("evt_old_parked", "SET intents.#n.#st = :s, intents.#n.attempts = :a, intents.#n.last_error = :e",
		map[string]any{":s": "parked", ":a": 1, ":e": "POST: 422"})
	set("evt_old_done", "SET intents.#n.#st = :s, intents.#n.attempts = :a", map[string]any{":s": "done", ":a": 1})

	w := e.worker(nil)
	e.mapping(w) // the INSERTs still in the stream pass the filter (they carry pending intents)
	e.advance(5 * time.Minute)
	rep, err := (&outbox.Sweeper{Worker: w}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for id, how := range states {
		c := e.claim(id)
		in := c.Intents["email.send"]
		switch id {
		case "evt_old_parked":
			if in.Status != dedup.IntentParked || c.PendingShard != dedup.ParkedShardFor(dedup.PendingShard(c.PK)) {
				t.Errorf("%s (%s): %+v under %q, want parked under its parked shard", id, how, in, c.PendingShard)
			}
		default:
			if in.Status != dedup.IntentDone || c.PendingShard != "" {
				t.Errorf("%s (%s): %+v under %q, want done and out of the index", id, how, in, c.PendingShard)
			}
		}
	}
	if rep.Parked != 0 || rep.Settled != 2 {
		t.Errorf("sweep %+v: want the parked and the done claims settled", rep)
	}
	calls, applied, _ := e.down.snapshot()
	for id := range states {
		k := "shop:" + id + ":email.send"
		if id != "evt_old_parked" && id != "evt_old_done" && (applied[k] != 1 || calls[k] != 1) {
			t.Errorf("%s: %d calls, %d applied; want one of each", id, calls[k], applied[k])
		}
	}
}
