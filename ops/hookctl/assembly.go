package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/internal/harness"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// construct is one oncehook construct of a synthesized app (a cloud assembly), as deploy-local
// needs it: where its sources file is, and the logical ids of its table and API; once deployed,
// their physical names.
type construct struct {
	stack         string // the CloudFormation stack's name
	receiver      string // the receiver function's logical id
	table         string // the table's logical id
	api           string // the HTTP API's logical id, or its id when the API is not the stack's
	apiIsID       bool
	routes        []string // the sources with a POST /hooks/<name> route to the receiver
	sourcesPath   string   // the sources file the receiver was deployed with ("" when inline)
	sourcesBytes  []byte
	sources       *sources.File
	arch          string // the receiver's Lambda architecture: x86_64 or arm64
	namespace     string // the functions' METRICS_NAMESPACE
	pendingShards string // and PENDING_SHARDS

	tableName   string // the deployed table's name
	urlTemplate string // the deployed webhook URL, {source} for the source
}

// runs refuses a construct whose functions this machine's emulator cannot run: it runs a
// function's bootstrap as a local process, so an arm64 binary on an amd64 machine (and the
// reverse) deploys, and then answers every delivery 502 "Exec format error".
func (c *construct) runs(goarch string) error {
	want := map[string]string{"amd64": "x86_64", "arm64": "arm64"}[goarch]
	if want == "" || c.arch == want {
		return nil
	}
	fix := "set infra.Props.X86 for the local stack (X86: local && runtime.GOARCH == \"amd64\", as examples/storefront/infra/main.go does)"
	if want == "arm64" {
		fix = "leave infra.Props.X86 unset for the local stack"
	}
	return fmt.Errorf("stack %s: the functions are built for %s, and this machine's emulator runs %s binaries: %s", c.stack, c.arch, want, fix)
}

// readAssembly finds every oncehook construct in the cloud assembly in dir (cdk.out), nested
// assemblies (CDK stages) included.
func readAssembly(dir string) ([]*construct, error) {
	var manifest struct {
		Artifacts map[string]struct {
			Type       string `json:"type"`
			Properties struct {
				TemplateFile  string `json:"templateFile"`
				StackName     string `json:"stackName"`
				File          string `json:"file"`
				DirectoryName string `json:"directoryName"`
			} `json:"properties"`
		} `json:"artifacts"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("the cloud assembly: %w", err)
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "manifest.json"), err)
	}
	// Assets by their S3 object key (the function's Code.S3Key), across the asset manifests.
	assets := map[string]string{}
	for _, a := range manifest.Artifacts {
		if a.Type != "cdk:asset-manifest" {
			continue
		}
		var m struct {
			Files map[string]struct {
				Source struct {
					Path string `json:"path"`
				} `json:"source"`
				Destinations map[string]struct {
					ObjectKey string `json:"objectKey"`
				} `json:"destinations"`
			} `json:"files"`
		}
		b, err := os.ReadFile(filepath.Join(dir, a.Properties.File))
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", a.Properties.File, err)
		}
		for _, f := range m.Files {
			for _, d := range f.Destinations {
				assets[d.ObjectKey] = filepath.Join(dir, f.Source.Path)
			}
		}
	}
	var all []*construct
	for _, name := range slices.Sorted(maps.Keys(manifest.Artifacts)) {
		a := manifest.Artifacts[name]
		switch a.Type {
		case "cdk:cloud-assembly":
			nested, err := readAssembly(filepath.Join(dir, a.Properties.DirectoryName))
			if err != nil {
				return nil, err
			}
			all = append(all, nested...)
		case "aws:cloudformation:stack":
			stackName := cmp.Or(a.Properties.StackName, name)
			found, err := readTemplate(filepath.Join(dir, a.Properties.TemplateFile), stackName, assets)
			if err != nil {
				return nil, err
			}
			all = append(all, found...)
		}
	}
	return all, nil
}

type cfnResource struct {
	Type       string                     `json:"Type"`
	Properties map[string]json.RawMessage `json:"Properties"`
}

// readTemplate finds the constructs of one stack's template: each receiver function (by its
// tag), its table (its TABLE_NAME's Ref), its sources file (the staged sources.json of its code
// asset, or its inline ONCEHOOK_SOURCES), and its routes and API (the routes whose integration
// invokes it).
func readTemplate(path, stackName string, assets map[string]string) ([]*construct, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t struct {
		Resources map[string]cfnResource `json:"Resources"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ids := slices.Sorted(maps.Keys(t.Resources))
	var found []*construct
	for _, id := range ids {
		r := t.Resources[id]
		if r.Type != "AWS::Lambda::Function" || tag(r, harness.FunctionTag) != "receiver" {
			continue
		}
		c := &construct{stack: stackName, receiver: id, arch: "x86_64"} // Lambda's default
		var archs []string
		if json.Unmarshal(r.Properties["Architectures"], &archs) == nil && len(archs) == 1 {
			c.arch = archs[0]
		}
		var env struct {
			Variables map[string]json.RawMessage `json:"Variables"`
		}
		_ = json.Unmarshal(r.Properties["Environment"], &env)
		c.table = ref(env.Variables["TABLE_NAME"])
		_ = json.Unmarshal(env.Variables["METRICS_NAMESPACE"], &c.namespace)
		_ = json.Unmarshal(env.Variables["PENDING_SHARDS"], &c.pendingShards)
		if c.table == "" {
			return nil, fmt.Errorf("stack %s: the receiver %s has no TABLE_NAME referring to a table of the stack", stackName, id)
		}
		var inline string
		if json.Unmarshal(env.Variables["ONCEHOOK_SOURCES"], &inline) == nil && inline != "" {
			c.sourcesBytes = []byte(inline) // no file: deploy-local writes one for hookctl
		} else {
			var code struct {
				S3Key string `json:"S3Key"`
			}
			_ = json.Unmarshal(r.Properties["Code"], &code)
			asset, ok := assets[code.S3Key]
			if !ok {
				return nil, fmt.Errorf("stack %s: the receiver %s's code is not an asset of the assembly and has no inline ONCEHOOK_SOURCES", stackName, id)
			}
			c.sourcesPath = filepath.Join(asset, deployment.BundledSources)
			if c.sourcesBytes, err = os.ReadFile(c.sourcesPath); err != nil {
				return nil, fmt.Errorf("stack %s: the receiver's sources file: %w", stackName, err)
			}
			var want string
			if json.Unmarshal(env.Variables["ONCEHOOK_SOURCES_SHA256"], &want) == nil && want != "" {
				if deployment.SourcesSum(c.sourcesBytes) != want {
					return nil, fmt.Errorf("stack %s: %s is not the file the receiver was built with (ONCEHOOK_SOURCES_SHA256)", stackName, c.sourcesPath)
				}
			}
		}
		if c.sources, err = sources.Parse(c.sourcesBytes); err != nil {
			return nil, fmt.Errorf("stack %s: the receiver's sources file: %w", stackName, err)
		}
		// The routes whose integration invokes this receiver, and their API.
		integrations := map[string]bool{}
		for _, iid := range ids {
			ir := t.Resources[iid]
			if ir.Type == "AWS::ApiGatewayV2::Integration" && getAtt(ir.Properties["IntegrationUri"]) == id {
				integrations[iid] = true
			}
		}
		for _, rid := range ids {
			rr := t.Resources[rid]
			if rr.Type != "AWS::ApiGatewayV2::Route" || !integrations[routeIntegration(rr.Properties["Target"])] {
				continue
			}
			var key string
			_ = json.Unmarshal(rr.Properties["RouteKey"], &key)
			name, ok := strings.CutPrefix(key, "POST "+receiver.Path(""))
			if !ok {
				continue
			}
			c.routes = append(c.routes, name)
			if api := ref(rr.Properties["ApiId"]); api != "" {
				c.api = api
			} else if json.Unmarshal(rr.Properties["ApiId"], &c.api) == nil && c.api != "" {
				c.apiIsID = true
			}
		}
		if c.api == "" {
			return nil, fmt.Errorf("stack %s: no POST /hooks/<source> route of an HTTP API invokes the receiver %s", stackName, id)
		}
		slices.Sort(c.routes)
		found = append(found, c)
	}
	return found, nil
}

func tag(r cfnResource, key string) string {
	var tags []struct{ Key, Value string }
	_ = json.Unmarshal(r.Properties["Tags"], &tags)
	for _, t := range tags {
		if t.Key == key {
			return t.Value
		}
	}
	return ""
}

// ref is the logical id of {"Ref": id}, "" for anything else.
func ref(v json.RawMessage) string {
	var r struct {
		Ref string `json:"Ref"`
	}
	_ = json.Unmarshal(v, &r)
	return r.Ref
}

// getAtt is the logical id of {"Fn::GetAtt": [id, attribute]}.
func getAtt(v json.RawMessage) string {
	var g struct {
		GetAtt []string `json:"Fn::GetAtt"`
	}
	if json.Unmarshal(v, &g) != nil || len(g.GetAtt) == 0 {
		return ""
	}
	return g.GetAtt[0]
}

// routeIntegration is the integration's logical id in a route's Target, "integrations/<id>"
// as {"Fn::Join": ["", ["integrations/", {"Ref": id}]]}.
func routeIntegration(v json.RawMessage) string {
	var j struct {
		Join []json.RawMessage `json:"Fn::Join"`
	}
	if json.Unmarshal(v, &j) != nil || len(j.Join) != 2 {
		return ""
	}
	var parts []json.RawMessage
	if json.Unmarshal(j.Join[1], &parts) != nil {
		return ""
	}
	for _, p := range parts {
		if id := ref(p); id != "" {
			return id
		}
	}
	return ""
}

var errNoConstruct = errors.New("no oncehook construct in the app: no stack has a function tagged " + harness.FunctionTag + "=receiver (infra.New adds it)")
