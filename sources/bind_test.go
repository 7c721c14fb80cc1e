package sources

import (
	"errors"
	"strings"
	"testing"
)

const boundSource = `"sources":{"s":{"scheme":"stripe","secrets":[{"env":"S"}],"redrive_window":"30d"}}`

// boundFile has one bound table and a bound target of every AWS type, and one of each literal.
const boundFile = `{` + boundSource + `,
  "tables":{"orders":{"bound":true,"partition_key":"order_id","actions":["put"],"audit":true},
            "ledger":{"name":"Ledger","partition_key":"account","actions":["update"]}},
  "targets":{"q":{"type":"sqs","bound":true,"group_id":"g"},"n":{"type":"sns","bound":true},"e":{"type":"eventbridge","bound":true},
             "sf":{"type":"stepfunctions","bound":true},"l":{"type":"lambda","bound":true,"invocation":"request-response","delivery":"at-most-once"},
             "lit":{"type":"sqs","arn":"arn:aws:sqs:eu-west-1:222222222222:lit"},"h":{"url":"https://e.example/send"}}}`

func resolvedBindings() Bindings {
	return Bindings{
		Tables: map[string]string{"orders": "Storefront-Orders1A2B3C"},
		Targets: map[string]string{
			"q":  "arn:aws:sqs:us-east-1:111111111111:Storefront-Q1A2B.fifo",
			"n":  "arn:aws:sns:us-east-1:111111111111:Storefront-N1A2B",
			"e":  "arn:aws:events:us-east-1:111111111111:event-bus/storefront",
			"sf": "arn:aws:states:us-east-1:111111111111:stateMachine:Fulfil1A2B",
			"l":  "arn:aws:lambda:us-east-1:111111111111:function:Storefront-Crm1A2B",
		},
	}
}

// TestBoundEntriesTakeTheirNamesFromTheBindings: a bound table and a bound target of every
// AWS type parse without a name or ARN, have none until Bind, and after it have exactly the
// bound names, which the store's tables and the executors' ARNs then use; literal entries keep
// theirs.
func TestBoundEntriesTakeTheirNamesFromTheBindings(t *testing.T) {
	t.Parallel()
	f, err := Parse([]byte(boundFile))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Bound() {
		t.Fatal("Bound() is false for a file with bound entries")
	}
	if got := f.Tables["orders"].PhysicalName("orders"); got != "" {
		t.Fatalf("a bound table before Bind is named %q: it must have no name, never its listed one", got)
	}
	if f.Targets["e"].ARN != "" || f.Targets["q"].QueueURL() != "" {
		t.Fatalf("a bound target before Bind has an ARN: %q", f.Targets["e"].ARN)
	}
	b := resolvedBindings()
	if err := f.CheckBindings(Bindings{Targets: map[string]string{"n": b.Targets["n"]}}); err != nil || f.Targets["n"].ARN != "" {
		t.Fatalf("CheckBindings of one binding: %v, ARN %q: want it accepted and the file unchanged", err, f.Targets["n"].ARN)
	}
	if err := f.Bind(b); err != nil {
		t.Fatal(err)
	}
	if got := f.DedupTables()["orders"]; got.Name != "Storefront-Orders1A2B3C" || got.PartitionKey != "order_id" {
		t.Fatalf("the store's orders table %+v", got)
	}
	if got := f.DedupTables()["ledger"].Name; got != "Ledger" {
		t.Fatalf("the literal table became %q", got)
	}
	for name, arn := range b.Targets {
		if f.Targets[name].ARN != arn {
			t.Errorf("targets.%s: ARN %q, want %q", name, f.Targets[name].ARN, arn)
		}
	}
	if got := f.Targets["q"].QueueURL(); got != "https://sqs.us-east-1.amazonaws.com/111111111111/Storefront-Q1A2B.fifo" {
		t.Fatalf("the bound queue's URL %q", got)
	}
	if f.Targets["lit"].ARN != "arn:aws:sqs:eu-west-1:222222222222:lit" {
		t.Fatal("the literal target changed")
	}
}

// TestAFileEntryThatIsNeitherLiteralNorBoundIsRefused, and one that is both, naming the field.
func TestAFileEntryThatIsNeitherLiteralNorBoundIsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, file, field, reason string
	}{
		{"an sqs target with neither arn nor bound", `"targets":{"q":{"type":"sqs"}}`, "targets.q.arn", `"bound": true`},
		{"a lambda target with neither", `"targets":{"l":{"type":"lambda"}}`, "targets.l.arn", "FunctionBindings"},
		{"a bound target with an arn", `"targets":{"q":{"type":"sqs","bound":true,"arn":"arn:aws:sqs:eu-west-1:222222222222:q"}}`, "targets.q.arn", "set arn or bound, not both"},
		{"a bound eventbridge target with a bus name", `"targets":{"e":{"type":"eventbridge","bound":true,"arn":"default"}}`, "targets.e.arn", "not both"},
		{"a bound http target", `"targets":{"h":{"url":"https://e.example/send","bound":true}}`, "targets.h.bound", "only AWS targets"},
		{"a bound target of no type (http)", `"targets":{"h":{"bound":true}}`, "targets.h.bound", "only AWS targets"},
		{"a bound table with a name", `"tables":{"orders":{"bound":true,"name":"Orders","partition_key":"id","actions":["put"]}}`, "tables.orders.name", "not both"},
		{"a group id on a bound target that is not sqs or sns", `"targets":{"e":{"type":"eventbridge","bound":true,"group_id":"g"}}`, "targets.e.group_id", "FIFO"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(`{` + boundSource + `,` + c.file + `}`))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Reason, c.reason) {
				t.Fatalf("got %v, want %s refused with %q", err, c.field, c.reason)
			}
		})
	}
}

// TestBindRefusesWhatCannotWork: what only the deployment's resolved names show is refused at
// Bind, naming the field, and leaves the file as it was.
func TestBindRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		edit  func(*Bindings)
		field string
		want  string
	}{
		{"a bound table no binding names", func(b *Bindings) { delete(b.Tables, "orders") }, "tables.orders", "no binding names it"},
		{"a bound target no binding names", func(b *Bindings) { delete(b.Targets, "sf") }, "targets.sf", "no binding names it: bind it in the CDK app (infra's Props.StateMachineBindings)"},
		{"a binding for a table the file does not have", func(b *Bindings) { b.Tables["invoices"] = "Invoices" }, "tables.invoices", "no such table"},
		{"a binding for a target the file does not have", func(b *Bindings) { b.Targets["crm"] = "arn:aws:sqs:us-east-1:1:crm" }, "targets.crm", "no such target"},
		{"a binding for a literal table", func(b *Bindings) { b.Tables["ledger"] = "Other" }, "tables.ledger", `names the table itself ("Ledger")`},
		{"a binding for a literal target", func(b *Bindings) { b.Targets["lit"] = "arn:aws:sqs:us-east-1:1:other" }, "targets.lit", "names the target itself"},
		{"an unresolved token for a table", func(b *Bindings) { b.Tables["orders"] = "${Token[TOKEN.123]}" }, "tables.orders", "unresolved CDK token"},
		{"an unresolved token for a target", func(b *Bindings) { b.Targets["n"] = "${Token[TOKEN.9]}" }, "targets.n", "unresolved CDK token"},
		{"a table name DynamoDB refuses", func(b *Bindings) { b.Tables["orders"] = "a b" }, "tables.orders", "not a DynamoDB table name"},
		{"a topic's ARN for a queue target", func(b *Bindings) { b.Targets["q"] = "arn:aws:sns:us-east-1:111111111111:alerts" }, "targets.q.arn", "not the ARN of a sqs resource"},
		{"a queue's ARN for a function target", func(b *Bindings) { b.Targets["l"] = "arn:aws:sqs:us-east-1:111111111111:q" }, "targets.l.arn", "not the ARN of a lambda resource"},
		{"a standard queue for a target with a group id", func(b *Bindings) { b.Targets["q"] = "arn:aws:sqs:us-east-1:111111111111:standard" }, "targets.q.group_id", "FIFO"},
		{"an empty ARN", func(b *Bindings) { b.Targets["n"] = "" }, "targets.n.arn", "is required"},
		{"an empty bus", func(b *Bindings) { b.Targets["e"] = "" }, "targets.e.arn", "is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse([]byte(boundFile))
			if err != nil {
				t.Fatal(err)
			}
			b := resolvedBindings()
			c.edit(&b)
			err = f.Bind(b)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Reason, c.want) {
				t.Fatalf("got %v, want %s refused with %q", err, c.field, c.want)
			}
			if f.Tables["orders"].PhysicalName("orders") != "" || f.Targets["q"].ARN != "" || f.Tables["ledger"].Name != "Ledger" {
				t.Fatal("a refused Bind changed the file")
			}
			// CheckBindings refuses the same, except a bound entry left without a binding.
			err = f.CheckBindings(b)
			if strings.Contains(c.want, "no binding names it") {
				if err != nil {
					t.Fatalf("CheckBindings: %v, want nothing required of the entries it is not given", err)
				}
			} else if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Reason, c.want) {
				t.Fatalf("CheckBindings: got %v, want %s refused with %q", err, c.field, c.want)
			}
		})
	}
}

// TestBindingsParseStrictly: the environment's JSON, with an unknown field refused and empty
// input meaning no bindings (which a file without bound entries binds to).
func TestBindingsParseStrictly(t *testing.T) {
	t.Parallel()
	b, err := ParseBindings([]byte(`{"tables":{"orders":"O"},"targets":{"q":"arn:aws:sqs:us-east-1:1:q"}}`))
	if err != nil || b.Tables["orders"] != "O" || b.Targets["q"] != "arn:aws:sqs:us-east-1:1:q" {
		t.Fatalf("%+v %v", b, err)
	}
	if _, err := ParseBindings([]byte(`{"table":{"orders":"O"}}`)); err == nil || !strings.Contains(err.Error(), `unknown field "table"`) {
		t.Fatalf("a misspelt field: %v", err)
	}
	if b, err := ParseBindings(nil); err != nil || b.Tables != nil || b.Targets != nil {
		t.Fatalf("empty: %+v %v", b, err)
	}
	f, err := Parse([]byte(`{` + boundSource + `}`))
	if err != nil || f.Bound() {
		t.Fatal(err)
	}
	if err := f.Bind(Bindings{}); err != nil {
		t.Fatalf("a file without bound entries, no bindings: %v", err)
	}
}
