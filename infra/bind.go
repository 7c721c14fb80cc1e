package infra

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	cdkenv "github.com/aws/aws-cdk-go/awscdk/v2/interfaces"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/sources"
)

// bindings are the sources file's bound tables and targets with the resources Props binds
// them to: what the grants are on and the functions are told (ONCEHOOK_BINDINGS).
type bindings struct {
	tables  map[string]awsdynamodb.ITable
	targets map[string]*boundTarget
}

// boundTarget is a target's bound resource as the construct uses it.
type boundTarget struct {
	arn  *string
	key  awskms.IKey // the queue's or topic's customer-managed key, which sending uses
	fifo *bool       // a queue's or topic's
	env  *cdkenv.ResourceEnvironment
}

type targetKind struct {
	typ      string
	bindings map[string]*boundTarget // nil for a nil resource, which checkBindings refuses
}

// targetBindings are Props' target bindings by the target type each serves.
func targetBindings(cfg Props) []targetKind {
	return []targetKind{
		{sources.TargetSQS, bind(cfg.QueueBindings, func(q awssqs.IQueue) *boundTarget {
			return &boundTarget{arn: q.QueueArn(), key: q.EncryptionMasterKey(), fifo: q.Fifo(), env: q.Env()}
		})},
		{sources.TargetSNS, bind(cfg.TopicBindings, func(t awssns.ITopic) *boundTarget {
			return &boundTarget{arn: t.TopicArn(), key: t.MasterKey(), fifo: t.Fifo(), env: t.Env()}
		})},
		{sources.TargetEventBridge, bind(cfg.EventBusBindings, func(b awsevents.IEventBus) *boundTarget { return &boundTarget{arn: b.EventBusArn(), env: b.Env()} })},
		{sources.TargetStepFunctions, bind(cfg.StateMachineBindings, func(m awsstepfunctions.IStateMachine) *boundTarget {
			return &boundTarget{arn: m.StateMachineArn(), env: m.Env()}
		})},
		{sources.TargetLambda, bind(cfg.FunctionBindings, func(f awslambda.IFunction) *boundTarget { return &boundTarget{arn: f.FunctionArn(), env: f.Env()} })},
	}
}

// bind is one kind's bindings as boundTargets, a nil resource as nil.
func bind[R any](m map[string]R, target func(R) *boundTarget) map[string]*boundTarget {
	out := map[string]*boundTarget{}
	for name, r := range m {
		if out[name] = nil; any(r) != nil {
			out[name] = target(r)
		}
	}
	return out
}

// checkBindings holds Props' bindings to the sources file: each binds a bound entry, with the
// resource its type calls for; each bound entry has one; what the synth can know of the
// resource is what the runtime needs. The start refuses the rest (sources.File.Bind).
func checkBindings(scope constructs.Construct, stack awscdk.Stack, cfg Props, f *sources.File) (*bindings, error) {
	b := &bindings{tables: map[string]awsdynamodb.ITable{}, targets: map[string]*boundTarget{}}
	for _, name := range sortedKeys(cfg.TableBindings) {
		table, prop := cfg.TableBindings[name], fmt.Sprintf("Props.TableBindings[%q]", name)
		t := f.Tables[name]
		switch {
		case table == nil:
			return nil, fmt.Errorf("%s: is nil", prop)
		case t == nil:
			return nil, fmt.Errorf("%s: the sources file has no table %q (tables.%s)", prop, name, name)
		case !t.Bound:
			return nil, fmt.Errorf(`%s: tables.%s names its table itself (%q): mark it "bound": true without a name, or drop the binding`, prop, name, t.PhysicalName(name))
		case cfg.Table.Existing != nil && (table == cfg.Table.Existing || awscdk.Token_CompareStrings(table.TableName(), cfg.Table.Existing.TableName()) == awscdk.TokenComparison_SAME()):
			return nil, fmt.Errorf("%s: is Props.Table.Existing, oncehook's own table: effects there are the claims table's own, with no Effect.In and no entry in the sources file's tables", prop)
		}
		if pk, sk, known := tableKey(table); known && (pk != t.PartitionKey || sk != t.SortKey) {
			field, want, got, key := "partition_key", t.PartitionKey, pk, "partition key"
			if pk == t.PartitionKey {
				field, want, got, key = "sort_key", t.SortKey, sk, "sort key"
			}
			return nil, fmt.Errorf("%s: tables.%s.%s is %q, and the bound table's %s is %q: effects would be keyed by attributes the table does not have", prop, name, field, want, key, got)
		}
		if err := placed(scope, stack, prop, "effects are written in the claim's transaction, which DynamoDB runs in one account and Region", true, table.Env(), table.TableArn()); err != nil {
			return nil, err
		}
		if physical := table.TableName(); !*awscdk.Token_IsUnresolved(physical) { // imported by name: known at synth
			if err := f.CheckBindings(sources.Bindings{Tables: map[string]string{name: *physical}}); err != nil {
				return nil, fmt.Errorf("%s: %w", prop, err)
			}
		}
		b.tables[name] = table
	}
	for _, k := range targetBindings(cfg) {
		prop := sources.BindingProps[k.typ]
		for _, name := range sortedKeys(k.bindings) {
			bt, at := k.bindings[name], fmt.Sprintf("Props.%s[%q]", prop, name)
			t := f.Targets[name]
			switch {
			case bt == nil:
				return nil, fmt.Errorf("%s: is nil", at)
			case t == nil:
				return nil, fmt.Errorf("%s: the sources file has no target %q (targets.%s)", at, name, name)
			case t.Type == sources.TargetHTTP:
				return nil, fmt.Errorf("%s: targets.%s is an http target, which names its url: only AWS targets are bound", at, name)
			case t.Type != k.typ:
				return nil, fmt.Errorf("%s: targets.%s is a %s target: bind it in Props.%s", at, name, t.Type, sources.BindingProps[t.Type])
			case !t.Bound:
				return nil, fmt.Errorf(`%s: targets.%s names its resource itself (%q): mark it "bound": true without an arn, or drop the binding`, at, name, t.ARN)
			case t.GroupID != "" && bt.fifo != nil && !*bt.fifo:
				return nil, fmt.Errorf("%s: targets.%s.group_id is for a FIFO queue or topic, and the bound one is not (one imported by a token ARN: say Fifo in its attributes)", at, name)
			case b.targets[name] != nil:
				return nil, fmt.Errorf("%s: targets.%s is bound twice", at, name)
			}
			// The executors' clients are in the functions' Region; the account may differ (a
			// resource policy lets this one call).
			if err := placed(scope, stack, at, "the outbox calls its targets in its own Region", false, bt.env, bt.arn); err != nil {
				return nil, err
			}
			if !*awscdk.Token_IsUnresolved(bt.arn) { // imported by ARN: known at synth
				if err := f.CheckBindings(sources.Bindings{Targets: map[string]string{name: *bt.arn}}); err != nil {
					return nil, fmt.Errorf("%s: %w", at, err)
				}
			}
			b.targets[name] = bt
		}
	}
	for _, name := range sortedKeys(f.Tables) {
		if t := f.Tables[name]; t != nil && t.Bound && b.tables[name] == nil {
			return nil, fmt.Errorf(`tables.%s: is "bound", and no Props.TableBindings entry binds it to a table`, name)
		}
	}
	for _, name := range sortedKeys(f.Targets) {
		if t := f.Targets[name]; t != nil && t.Bound && b.targets[name] == nil {
			return nil, fmt.Errorf(`targets.%s: is "bound", and no Props.%s entry binds it to a resource`, name, sources.BindingProps[t.Type])
		}
	}
	return b, nil
}

// placed checks where a resource is against the stack: from its environment, and from its
// ARNs when they are not tokens (an imported resource's). Its Region (and account, with
// account) known to differ from the stack's is an error; known while the stack's is not (a
// stack without an env of its own), a warning on scope, naming prop: the synth cannot tell.
func placed(scope constructs.Construct, stack awscdk.Stack, prop, why string, account bool, env *cdkenv.ResourceEnvironment, arns ...*string) error {
	where := []*cdkenv.ResourceEnvironment{env}
	for _, arn := range arns {
		if arn != nil && !*awscdk.Token_IsUnresolved(arn) && strings.HasPrefix(*arn, "arn:") {
			p := awscdk.Arn_Split(arn, awscdk.ArnFormat_SLASH_RESOURCE_NAME)
			where = append(where, &cdkenv.ResourceEnvironment{Account: p.Account, Region: p.Region})
		}
	}
	unknown := false
	for _, e := range where {
		if e == nil {
			continue
		}
		pairs := [][2]*string{{e.Region, stack.Region()}}
		if account {
			pairs = append(pairs, [2]*string{e.Account, stack.Account()})
		}
		for _, p := range pairs {
			switch awscdk.Token_CompareStrings(p[0], p[1]) {
			case awscdk.TokenComparison_DIFFERENT():
				return fmt.Errorf("%s: is in account %s, Region %s, and the stack in %s, %s: %s", prop, *e.Account, *e.Region, *stack.Account(), *stack.Region(), why)
			case awscdk.TokenComparison_ONE_UNRESOLVED():
				if !*awscdk.Token_IsUnresolved(p[0]) {
					unknown = true
				}
			}
		}
		if unknown {
			awscdk.Annotations_Of(scope).AddWarningV2(jsii.String("oncehook:placement:"+prop), jsii.String(fmt.Sprintf(
				"%s: is in account %s, Region %s, and the stack's are not known at synth (a stack without an env): %s; deploy the stack to that account and Region, or import the resource by name",
				prop, *e.Account, *e.Region, why)), nil)
			return nil
		}
	}
	return nil
}

// env is ONCEHOOK_BINDINGS: the bound tables' names and targets' ARNs, as JSON CloudFormation
// completes at deploy (sources.Bindings); "" without bindings.
func (b *bindings) env(stack awscdk.Stack) string {
	if b == nil || len(b.tables)+len(b.targets) == 0 {
		return ""
	}
	tables, targets, v := map[string]any{}, map[string]any{}, map[string]any{}
	for name, t := range b.tables {
		tables[name] = t.TableName()
	}
	for name, t := range b.targets {
		targets[name] = t.arn
	}
	if len(tables) > 0 {
		v["tables"] = tables
	}
	if len(targets) > 0 {
		v["targets"] = targets
	}
	return *stack.ToJsonString(v, nil)
}

// executionArn is the ARN of a state machine's executions (arn:...:execution:<name>:*), which
// a retry's DescribeExecution reads, for a literal ARN or a token.
func executionArn(stack awscdk.Stack, machine *string) *string {
	p := awscdk.Arn_Split(machine, awscdk.ArnFormat_COLON_RESOURCE_NAME)
	return stack.FormatArn(&awscdk.ArnComponents{
		Partition: p.Partition, Region: p.Region, Account: p.Account, Service: jsii.String("states"),
		Resource: jsii.String("execution"), ResourceName: jsii.String(*p.ResourceName + ":*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}
