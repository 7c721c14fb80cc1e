package sources

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Bindings are the names a deployment resolved for the sources file's bound entries (a table
// or target marked "bound": true): each bound table's name and each bound target's ARN, by
// the name the file lists it under. The construct (infra) builds them from its
// Props.TableBindings and target bindings and hands them to the functions as JSON in
// ONCEHOOK_BINDINGS, with the names and ARNs CloudFormation resolved:
//
//	{"tables": {"customers": "Storefront-Customers1A2B3C"}, "targets": {"audit": "arn:aws:sqs:us-east-1:111111111111:audit"}}
type Bindings struct {
	Tables  map[string]string `json:"tables,omitempty"`
	Targets map[string]string `json:"targets,omitempty"`
}

// ParseBindings reads Bindings from their JSON; unknown fields are errors, and empty input is
// no bindings.
func ParseBindings(b []byte) (Bindings, error) {
	var out Bindings
	if len(bytes.TrimSpace(b)) == 0 {
		return out, nil
	}
	if err := decodeStrict(b, &out); err != nil {
		return out, fmt.Errorf("want {\"tables\": {\"<name>\": \"<table name>\"}, \"targets\": {\"<name>\": \"<arn>\"}}: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return out, nil
}

// Bound reports whether the file has bound entries (tables or targets marked "bound": true):
// such a file works only once File.Bind has given each its name or ARN.
func (f *File) Bound() bool {
	for _, t := range f.Tables {
		if t != nil && t.Bound {
			return true
		}
	}
	for _, t := range f.Targets {
		if t != nil && t.Bound {
			return true
		}
	}
	return false
}

// Bind gives the file's bound tables their names and its bound targets their ARNs, and
// checks each as the file's literal names and ARNs are checked (a DynamoDB table name or ARN;
// the ARN of the target type's kind of resource; a FIFO queue or topic for a group_id). It
// refuses, naming the field, a binding for a name the file does not have or names literally,
// a value that is not a resolved name (an unresolved CDK token), and a bound entry that no
// binding names. On an error the file is left as it was.
func (f *File) Bind(b Bindings) error { return f.bind(b, true) }

// CheckBindings checks the bindings it is given as Bind does, without changing the file and
// without requiring one for every bound entry: what a CDK app can check at synth of the names
// it already knows (an imported resource's), before CloudFormation resolves the others.
func (f *File) CheckBindings(b Bindings) error { return f.bind(b, false) }

func (f *File) bind(b Bindings, apply bool) error {
	tables := map[string]*Table{}
	for _, name := range slices.Sorted(maps.Keys(b.Tables)) {
		at, v := "tables."+name, b.Tables[name]
		t := f.Tables[name]
		switch {
		case t == nil:
			return &FieldError{Field: at, Reason: "is bound, and the sources file has no such table"}
		case !t.Bound:
			return &FieldError{Field: at, Reason: fmt.Sprintf("is bound, and the sources file names the table itself (%q): mark it \"bound\": true without a name, or drop the binding", t.PhysicalName(name))}
		case unresolved(v):
			return &FieldError{Field: at, Reason: fmt.Sprintf("is bound to %q, an unresolved CDK token: pass the name CloudFormation resolved", v)}
		case !validTableName(v):
			return &FieldError{Field: at, Reason: fmt.Sprintf("is bound to %q, which is not a DynamoDB table name or ARN", v)}
		}
		c := *t
		c.Name, c.resolved = v, true
		tables[name] = &c
	}
	targets := map[string]*Target{}
	for _, name := range slices.Sorted(maps.Keys(b.Targets)) {
		at, v := "targets."+name, b.Targets[name]
		t := f.Targets[name]
		switch {
		case t == nil:
			return &FieldError{Field: at, Reason: "is bound, and the sources file has no such target"}
		case !t.Bound:
			return &FieldError{Field: at, Reason: "is bound, and the sources file names the target itself: mark it \"bound\": true without an arn, or drop the binding"}
		case unresolved(v):
			return &FieldError{Field: at, Reason: fmt.Sprintf("is bound to %q, an unresolved CDK token: pass the ARN CloudFormation resolved", v)}
		}
		c := *t
		c.ARN, c.resolved = v, true
		if err := c.validateAWS(at); err != nil {
			return err
		}
		targets[name] = &c
	}
	if !apply {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(f.Tables)) {
		if t := f.Tables[name]; t != nil && t.Bound && !t.resolved && tables[name] == nil {
			return &FieldError{Field: "tables." + name, Reason: "is bound, and no binding names it: bind it in the CDK app (infra's Props.TableBindings), which hands the functions its name"}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Targets)) {
		if t := f.Targets[name]; t != nil && t.Bound && !t.resolved && targets[name] == nil {
			return &FieldError{Field: "targets." + name, Reason: fmt.Sprintf("is bound, and no binding names it: bind it in the CDK app (infra's Props.%s), which hands the functions its ARN", BindingProps[t.Type])}
		}
	}
	maps.Copy(f.Tables, tables)
	maps.Copy(f.Targets, targets)
	return nil
}

// unresolved reports whether s holds a CDK token's text: a value read at synth, before
// CloudFormation resolved it.
func unresolved(s string) bool {
	return strings.Contains(s, "${Token[") || strings.Contains(s, "#{Token[")
}
