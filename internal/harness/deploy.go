package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	logtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/oncehook/oncehook/internal/faults"
)

// Roles are the deployment's functions, as the construct tags them (oncehook:function).
var Roles = []string{"receiver", "outbox", "sweeper"}

// FunctionTag is the tag the construct puts on each function (infra.FunctionTag).
const FunctionTag = "oncehook:function"

// Deployment is the functions of one deployed stack, found by their table.
type Deployment struct {
	Lambda *lambda.Client
	// Functions maps a role (receiver, outbox, sweeper) to its function's name.
	Functions map[string]string
}

// FindDeployment lists the functions whose TABLE_NAME is table and tells them apart by the
// tag the construct gives each (oncehook:function), whatever the stack named them. Every role
// must be found, once.
func FindDeployment(ctx context.Context, lc *lambda.Client, table string) (*Deployment, error) {
	d := &Deployment{Lambda: lc, Functions: map[string]string{}}
	p := lambda.NewListFunctionsPaginator(lc, &lambda.ListFunctionsInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing functions: %w", err)
		}
		for _, fn := range page.Functions {
			if fn.Environment == nil || fn.Environment.Variables["TABLE_NAME"] != table {
				continue
			}
			tags, err := lc.ListTags(ctx, &lambda.ListTagsInput{Resource: fn.FunctionArn})
			if err != nil {
				return nil, fmt.Errorf("tags of %s: %w", aws.ToString(fn.FunctionName), err)
			}
			role := tags.Tags[FunctionTag]
			if !slices.Contains(Roles, role) {
				continue
			}
			if other := d.Functions[role]; other != "" {
				return nil, fmt.Errorf("two %s functions use table %s: %s and %s", role, table, other, aws.ToString(fn.FunctionName))
			}
			d.Functions[role] = aws.ToString(fn.FunctionName)
		}
	}
	for _, r := range Roles {
		if d.Functions[r] == "" {
			return nil, fmt.Errorf("no function tagged %s=%s with TABLE_NAME=%s (found %v)", FunctionTag, r, table, d.Functions)
		}
	}
	return d, nil
}

// SetEnv sets (or, with "", removes) environment variables of the named roles' functions, and
// waits until each update is in force; restore puts every changed function's environment back
// as it was. Lambda starts new instances for a changed environment, so the next invocations
// run with it.
func (d *Deployment) SetEnv(ctx context.Context, vars map[string]map[string]string) (restore func(context.Context) error, err error) {
	saved := map[string]map[string]string{}
	restore = func(ctx context.Context) error {
		var errs []string
		for _, role := range slices.Sorted(maps.Keys(saved)) {
			if err := d.putEnv(ctx, d.Functions[role], saved[role]); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("restoring the functions' environment: %s", strings.Join(errs, "; "))
		}
		return nil
	}
	for _, role := range slices.Sorted(maps.Keys(vars)) {
		name, ok := d.Functions[role]
		if !ok {
			return restore, fmt.Errorf("no %s function", role)
		}
		cfg, err := d.Lambda.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(name)})
		if err != nil {
			return restore, err
		}
		old := map[string]string{}
		if cfg.Environment != nil {
			old = cfg.Environment.Variables
		}
		env := maps.Clone(old)
		for k, v := range vars[role] {
			if v == "" {
				delete(env, k)
			} else {
				env[k] = v
			}
		}
		saved[role] = old
		if err := d.putEnv(ctx, name, env); err != nil {
			return restore, err
		}
	}
	return restore, nil
}

func (d *Deployment) putEnv(ctx context.Context, name string, env map[string]string) error {
	_, err := d.Lambda.UpdateFunctionConfiguration(ctx, &lambda.UpdateFunctionConfigurationInput{
		FunctionName: aws.String(name), Environment: &lambdatypes.Environment{Variables: env}})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	w := lambda.NewFunctionUpdatedV2Waiter(d.Lambda, func(o *lambda.FunctionUpdatedV2WaiterOptions) { o.MinDelay = 500 * time.Millisecond })
	if err := w.Wait(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)}, time.Minute); err != nil {
		return fmt.Errorf("%s: waiting for the update: %w", name, err)
	}
	return nil
}

// Sweep invokes the sweeper once, now, instead of waiting for its schedule.
func (d *Deployment) Sweep(ctx context.Context) error {
	out, err := d.Lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(d.Functions["sweeper"]), Payload: []byte(`{}`)})
	if err != nil {
		return err
	}
	if out.FunctionError != nil {
		return fmt.Errorf("sweeper: %s: %s", aws.ToString(out.FunctionError), out.Payload)
	}
	return nil
}

// InjectedFaults counts the faults the deployment's functions injected since a time, by role
// and kind, from the line each function logs per fault (faults.LogLine) in its log group
// (read through CloudWatch Logs, as on AWS). It is how a run checks that the faults it asked
// for were in force.
func (d *Deployment) InjectedFaults(ctx context.Context, logs *cloudwatchlogs.Client, since time.Time) (map[string]map[faults.Kind]int, error) {
	out := map[string]map[faults.Kind]int{}
	for _, role := range Roles {
		out[role] = map[faults.Kind]int{}
		lines, err := d.LogLines(ctx, logs, role, since, `"`+faults.LogLine+`"`)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			var line struct {
				Msg  string `json:"msg"`
				Kind string `json:"kind"`
			}
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == faults.LogLine {
				out[role][faults.Kind(line.Kind)]++
			}
		}
	}
	return out, nil
}

// LogLines returns what a role's function logged since a time that matches a CloudWatch Logs
// filter pattern, read from its log group as on AWS.
func (d *Deployment) LogLines(ctx context.Context, logs *cloudwatchlogs.Client, role string, since time.Time, pattern string) ([]string, error) {
	events, err := d.LogEvents(ctx, logs, role, since, pattern)
	var out []string
	for _, ev := range events {
		out = append(out, aws.ToString(ev.Message))
	}
	return out, err
}

// LogEvents is LogLines with each line's time and id: what a role's function logged since a
// time (to the millisecond) that matches a filter pattern ("" matches every line).
func (d *Deployment) LogEvents(ctx context.Context, logs *cloudwatchlogs.Client, role string, since time.Time, pattern string) ([]logtypes.FilteredLogEvent, error) {
	cfg, err := d.Lambda.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(d.Functions[role])})
	if err != nil {
		return nil, err
	}
	group := "/aws/lambda/" + d.Functions[role]
	if cfg.LoggingConfig != nil && aws.ToString(cfg.LoggingConfig.LogGroup) != "" {
		group = aws.ToString(cfg.LoggingConfig.LogGroup)
	}
	var out []logtypes.FilteredLogEvent
	p := cloudwatchlogs.NewFilterLogEventsPaginator(logs, &cloudwatchlogs.FilterLogEventsInput{
		LogGroupName:  aws.String(group),
		FilterPattern: aws.String(pattern),
		StartTime:     aws.Int64(since.UnixMilli()),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if _, missing := errors.AsType[*logtypes.ResourceNotFoundException](err); missing {
			return nil, nil // a function that has not run yet has no log group
		}
		if err != nil {
			return nil, fmt.Errorf("%s's logs (%s): %w", role, group, err)
		}
		out = append(out, page.Events...)
	}
	return out, nil
}
