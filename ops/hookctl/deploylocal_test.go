package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
	"github.com/oncehook/oncehook/webhook"
)

// copyAssembly copies testdata/assembly (the storefront's cloud assembly, as `cdk synth`
// wrote it, trimmed to the resources deploy-local reads) to a fresh folder, and lets the test
// change its template first.
func copyAssembly(t *testing.T, edit func(resources map[string]map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.Walk("testdata/assembly", func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/assembly", path)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		path := filepath.Join(dir, "Storefront.template.json")
		var tpl struct {
			Resources map[string]map[string]any
		}
		b, _ := os.ReadFile(path)
		if err := json.Unmarshal(b, &tpl); err != nil {
			t.Fatal(err)
		}
		edit(tpl.Resources)
		b, _ = json.Marshal(tpl)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const receiverID = "WebhooksReceiverB422211E"

func TestReadAssemblyFindsTheConstruct(t *testing.T) {
	t.Parallel()
	dir := copyAssembly(t, nil)
	found, err := readAssembly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("%d constructs, want the storefront's one", len(found))
	}
	k := found[0]
	if k.stack != "Storefront" || k.receiver != receiverID || k.table != "WebhooksTable55C3C645" || k.api != "WebhooksApiA28DB082" || k.apiIsID ||
		!slices.Equal(k.routes, []string{"github", "stripe"}) || !strings.HasPrefix(k.sourcesPath, dir) || k.sources.Sources["stripe"] == nil ||
		k.namespace != "oncehook/Storefront/Webhooks" || k.pendingShards != "16" {
		t.Fatalf("%+v", k)
	}
	// The stack file names them, for hookctl parked and console.
	k.tableName, k.urlTemplate = "Storefront-Table", "http://x/hooks/{source}"
	vars := k.stackVars("http://127.0.0.1:4566", "us-east-1")
	if vars["METRICS_NAMESPACE"] != k.namespace || vars["PENDING_SHARDS"] != "16" || vars["TABLE_NAME"] != "Storefront-Table" {
		t.Fatalf("stack file %v, want the functions' METRICS_NAMESPACE and PENDING_SHARDS, and the table", vars)
	}
}

// TestReadAssemblyInEveryShape: a construct in a CDK stage's nested assembly, one whose
// receiver takes its sources inline (infra.Code{Lambda: ...}), and what deploy-local refuses.
func TestReadAssemblyInEveryShape(t *testing.T) {
	t.Parallel()
	t.Run("in a stage's nested assembly", func(t *testing.T) {
		inner := copyAssembly(t, nil)
		outer := t.TempDir()
		if err := os.Rename(inner, filepath.Join(outer, "assembly-Dev")); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(outer, "manifest.json"), []byte(`{"version":"55.0.0","artifacts":{"assembly-Dev":{"type":"cdk:cloud-assembly","properties":{"directoryName":"assembly-Dev"}}}}`), 0o644)
		found, err := readAssembly(outer)
		if err != nil || len(found) != 1 || found[0].stack != "Storefront" {
			t.Fatalf("%v %v", found, err)
		}
	})
	t.Run("with its sources inline", func(t *testing.T) {
		inline := `{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"S"}],"retry_horizon":"1d"}}}`
		dir := copyAssembly(t, func(r map[string]map[string]any) {
			p := r[receiverID]["Properties"].(map[string]any)
			p["Code"] = map[string]any{"ImageUri": "registry/receiver:1"}
			vars := p["Environment"].(map[string]any)["Variables"].(map[string]any)
			delete(vars, "ONCEHOOK_SOURCES_SHA256")
			vars["ONCEHOOK_SOURCES"] = inline
		})
		found, err := readAssembly(dir)
		if err != nil || len(found) != 1 || found[0].sourcesPath != "" || string(found[0].sourcesBytes) != inline || found[0].sources.Sources["shop"] == nil {
			t.Fatalf("%+v %v", found, err)
		}
	})
	for name, c := range map[string]struct {
		edit func(map[string]map[string]any)
		want string
	}{
		"no receiver tag": {func(r map[string]map[string]any) {
			delete(r[receiverID]["Properties"].(map[string]any), "Tags")
		}, ""},
		"no route to it": {func(r map[string]map[string]any) {
			for id, res := range r {
				if res["Type"] == "AWS::ApiGatewayV2::Route" {
					delete(r, id)
				}
			}
		}, "no POST /hooks/<source> route of an HTTP API invokes the receiver " + receiverID},
		"no table": {func(r map[string]map[string]any) {
			delete(r[receiverID]["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any), "TABLE_NAME")
		}, "has no TABLE_NAME"},
		"code not in the assembly": {func(r map[string]map[string]any) {
			r[receiverID]["Properties"].(map[string]any)["Code"] = map[string]any{"S3Bucket": "b", "S3Key": "elsewhere.zip"}
		}, "is not an asset of the assembly"},
	} {
		t.Run(name, func(t *testing.T) {
			found, err := readAssembly(copyAssembly(t, c.edit))
			if c.want == "" {
				if err != nil || len(found) != 0 {
					t.Fatalf("%v %v, want no construct", found, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want %q", err, c.want)
			}
		})
	}
	t.Run("functions this machine's emulator cannot run", func(t *testing.T) {
		dir := copyAssembly(t, func(r map[string]map[string]any) {
			r[receiverID]["Properties"].(map[string]any)["Architectures"] = []any{"arm64"}
		})
		found, err := readAssembly(dir)
		if err != nil || len(found) != 1 {
			t.Fatalf("%v %v", found, err)
		}
		if err := found[0].runs("amd64"); err == nil || !strings.Contains(err.Error(), "built for arm64") || !strings.Contains(err.Error(), "infra.Props.X86") {
			t.Fatalf("arm64 functions on an amd64 emulator: %v, want a refusal naming Props.X86", err)
		}
		if err := found[0].runs("arm64"); err != nil {
			t.Fatalf("arm64 functions on an arm64 emulator: %v", err)
		}
		if found, _ := readAssembly(copyAssembly(t, nil)); found[0].runs("amd64") != nil || found[0].runs("arm64") == nil {
			t.Fatal("x86_64 functions: want them run on amd64 alone")
		}
	})
	t.Run("a sources file that is not the one built", func(t *testing.T) {
		dir := copyAssembly(t, nil)
		found, _ := readAssembly(dir)
		os.WriteFile(found[0].sourcesPath, []byte(`{"sources":{}}`), 0o644)
		if _, err := readAssembly(dir); err == nil || !strings.Contains(err.Error(), "ONCEHOOK_SOURCES_SHA256") {
			t.Fatalf("%v", err)
		}
	})
}

// TestDeployLocalRefusesWhatCannotWork, before any synth: a remote endpoint, an endpoint that
// does not answer, no CDK CLI, no app.
func TestDeployLocalRefusesWhatCannotWork(t *testing.T) {
	live := httptest.NewServer(nil) // answers 404 to the health check: an endpoint is there
	defer live.Close()
	for _, c := range []struct {
		endpoint string
		args     []string
		want     string
	}{
		{"https://dynamodb.eu-west-1.amazonaws.com", nil, "is not a local endpoint: deploy-local deploys to an emulator on this machine"},
		{"http://127.0.0.1:1", nil, "nothing answers on http://127.0.0.1:1: start the emulator first"},
		{live.URL, []string{"-cdk", "no-such-cdklocal"}, "no no-such-cdklocal on PATH: install the CDK CLI and cdklocal"},
		{live.URL, []string{"-cdk", "true"}, "no -app and no cdk.json here: pass -app"},
	} {
		t.Setenv("AWS_ENDPOINT_URL", c.endpoint)
		code, _, errOut := hookctl(t, "", append([]string{"deploy-local", "-dir", t.TempDir()}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s %v: exit %d, %q; want %q", c.endpoint, c.args, code, errOut, c.want)
		}
	}
}

// fileConstruct is a construct with just a sources file, for putSecrets.
func fileConstruct(t *testing.T, raw string) *construct {
	t.Helper()
	f, err := sources.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return &construct{stack: "S", sources: f}
}

// TestPutSecretsGivesEverySecretAValueItsSchemesTake, against the emulator's Secrets Manager and
// SSM: given values where the -secrets file has them (by source or by secret), a kept one
// where the emulator has one, a fresh one each scheme accepts otherwise; nothing for an env
// secret; and a file that names what is not there, or two values for one secret, refused
// before anything is written.
func TestPutSecretsGivesEverySecretAValueItsSchemesTake(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	run := awstest.Name("") // secrets of this test's own: a retried create finds its own
	sm := secretsmanager.NewFromConfig(cfg)
	raw := fmt.Sprintf(`{"sources":{
		"shop":{"scheme":"standard-webhooks","secrets":[{"secretsmanager":"t%[1]s/shop"}],"retry_horizon":"1d"},
		"batch":{"scheme":"hmac-sha256","hmac":{"header":"X-Sig"},"secrets":[{"secretsmanager":"t%[1]s/shop"}],"event_id":{"json":"id"},"event_type":{"json":"type"},"retry_horizon":"1d"},
		"stripe":{"scheme":"stripe","secrets":[{"ssm":"/t%[1]s/stripe"}],"redrive_window":"1d"},
		"github":{"scheme":"github","secrets":[{"secretsmanager":"t%[1]s/github"},{"env":"GITHUB_PREVIOUS"}],"retry_horizon":"1h"}}}`, run)
	k := fileConstruct(t, raw)
	c := &cli{aws: &cfg}
	read := func(ref sources.SecretRef) string {
		v, err := c.currentSecret(ctx, ref)
		if err != nil || v == "" {
			t.Fatalf("%s: %q %v", ref, v, err)
		}
		return v
	}
	values := filepath.Join(t.TempDir(), "secrets.json")
	os.WriteFile(values, []byte(`{"github":"gh-given", "ssm:/t`+run+`/stripe":"whsec_given_stripe"}`), 0o600)
	puts, err := c.putSecrets(ctx, []*construct{k}, values)
	if err != nil {
		t.Fatal(err)
	}
	how := map[string]string{}
	for _, p := range puts {
		how[p.ref.String()] = p.how
	}
	shopRef := sources.SecretRef{SecretsManager: "t" + run + "/shop"}
	want := map[string]string{
		shopRef.String():                     "generated",
		"ssm:/t" + run + "/stripe":           "from " + values,
		"secretsmanager:t" + run + "/github": "from " + values,
		"env:GITHUB_PREVIOUS":                "not put: an environment variable, which the app sets (Environment) and hookctl send reads from its own",
	}
	for ref, w := range want {
		if how[ref] != w {
			t.Errorf("%s: %q, want %q", ref, how[ref], w)
		}
	}
	shop := read(shopRef)
	if !usable(shop, []string{webhook.StandardWebhooks, webhook.HMACSHA256}) || !strings.HasPrefix(shop, "whsec_") {
		t.Errorf("generated %q: not a secret both sharing sources' schemes take", shop)
	}
	if got := read(sources.SecretRef{SSM: "/t" + run + "/stripe"}); got != "whsec_given_stripe" {
		t.Errorf("stripe's: %q", got)
	}
	// Again, without the file: every value kept, none replaced.
	puts, err = c.putSecrets(ctx, []*construct{k}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range puts {
		if p.ref.Env == "" && p.how != "kept" {
			t.Errorf("%s: %s on a second deploy, want kept", p.ref, p.how)
		}
	}
	if read(shopRef) != shop || read(sources.SecretRef{SecretsManager: "t" + run + "/github"}) != "gh-given" {
		t.Error("a second deploy changed a secret")
	}
	for body, wantErr := range map[string]string{
		`{"shopp":"x"}`:                  `"shopp" is neither a source nor a secret of the app's sources files`,
		`{"shop":"whsec_a","batch":"b"}`: "two values (for the sources batch and shop, which share it)",
		`["x"]`:                          "want {\"<source>\": \"<secret>\", ...}",
	} {
		os.WriteFile(values, []byte(body), 0o600)
		if _, err := c.putSecrets(ctx, []*construct{k}, values); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: %v, want %q", body, err, wantErr)
		}
	}
	if read(shopRef) != shop {
		t.Error("a refused -secrets file wrote a secret")
	}
	_, _ = sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(shopRef.SecretsManager), ForceDeleteWithoutRecovery: aws.Bool(true)})
}

// TestTheMinimalExampleOfEverySourceIsAccepted: the delivery deploy-local prints for a source
// it has no example of is one the real receiver accepts, for every scheme a team signs with a
// shared secret, under the id the printed inspect command is given.
func TestTheMinimalExampleOfEverySourceIsAccepted(t *testing.T) {
	for _, scheme := range webhook.Names {
		if sources.PublicKeyScheme(scheme) {
			continue // printed as how to make a key pair, not as a command
		}
		t.Run(scheme, func(t *testing.T) {
			// A source whose scheme signs the URL is configured with the URL the provider calls.
			srv := httptest.NewUnstartedServer(nil)
			defer srv.Close()
			urlJSON := ""
			if sources.URLScheme(scheme) {
				urlJSON = `"url":"http://` + srv.Listener.Addr().String() + `/hooks/src",`
			}
			raw := `{"sources":{"src":{"scheme":"` + scheme + `",` + schemeCases[scheme].source + urlJSON + `"secrets":[{"env":"HOOKCTL_SEND_SECRET"}],"retry_horizon":"1h","redrive_window":"1d"}}}`
			file := filepath.Join(t.TempDir(), "sources.json")
			os.WriteFile(file, []byte(raw), 0o600)
			f, err := sources.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
			t.Setenv("HOOKCTL_SEND_SECRET", secret)
			h, rec, err := receivertest.NewHandler(f, map[string]string{"src": secret}, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv.Config.Handler = h
			srv.Start()
			e := minimalExample("src", f.Sources["src"])
			args := append(append([]string{"send", "-stack", "none", "-sources", file}, e.flags...), "src", srv.URL+"/hooks/src")
			code, out, errOut := hookctl(t, e.body+"\n", args...)
			if code != 0 || !strings.Contains(out, `"duplicate":false`) && !strings.Contains(out, `"duplicates":0`) {
				t.Fatalf("%s | send %v: exit %d\n%s%s", e.body, e.flags, code, out, errOut)
			}
			want := e.id
			if f.Sources["src"].EventID.ScopeHeader != "" {
				want = "1:" + e.id
			}
			if got := rec.Last().Event; got.ID != want || got.Type != "oncehook.test" {
				t.Fatalf("claimed %q of type %q, want %q of type oncehook.test", got.ID, got.Type, want)
			}
			// The next deploy's example, into the same emulator, is a new event: where the body's
			// hash is claimed too (the signature does not cover the id), its body is new as well.
			if next := minimalExample("src", f.Sources["src"]); f.Sources["src"].ReplayGuard == sources.ReplayGuardBody && next.body == e.body {
				t.Fatalf("two deploys print the same body %s for a source whose replay guard claims the body: the second deploy's first send is a duplicate", e.body)
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"bin/hookctl": "bin/hookctl", `{"a":1}`: `'{"a":1}'`, "it's": `'it'\''s'`, "": "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

// TestWhatDeployLocalPrints: a send and an inspect per source, and no other line indented by
// four spaces (how a reader, and make test, tell commands from the rest); a public-key source
// gets how to make its keys instead; a stack file elsewhere is named in each command.
func TestWhatDeployLocalPrints(t *testing.T) {
	t.Parallel()
	f, err := sources.Parse([]byte(`{"sources":{
		"stripe":{"scheme":"stripe","secrets":[{"secretsmanager":"s/stripe"}],"redrive_window":"1d"},
		"github":{"scheme":"github","secrets":[{"secretsmanager":"s/github"}],"retry_horizon":"1h"},
		"bot":{"scheme":"discord","public_keys":["` + strings.Repeat("ab", 32) + `"],"event_id":{"json":"event.data.id"}}},
		"targets":{"ship":{"url":"http://127.0.0.1:8031/ship"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	k := &construct{stack: "App", routes: []string{"bot", "github", "stripe"}, sources: f, sourcesPath: "/x/sources.json",
		tableName: "App-Table", urlTemplate: "http://127.0.0.1:4566/_aws/execute-api/a1b2/hooks/{source}"}
	d := []*construct{k}
	examples, err := readExamples(nil, []*construct{k})
	if err != nil {
		t.Fatal(err)
	}
	puts := []*secretPut{{ref: sources.SecretRef{SecretsManager: "s/stripe"}, sources: []string{"stripe"}, how: "generated"}}
	for _, c := range []struct{ dir, stack, flag string }{
		{".oncehook", ".oncehook/stack.env", ""},
		{"elsewhere", "elsewhere/stack.env", " -stack elsewhere/stack.env"},
	} {
		var b strings.Builder
		printDeployed(&b, "http://127.0.0.1:4566", c.stack, c.dir, d, puts, examples)
		var cmds []string
		for _, line := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(line, "    ") {
				cmds = append(cmds, strings.TrimSpace(line))
			}
		}
		prog := progName()
		want := []string{" send" + c.flag + " -id ", " inspect" + c.flag + " github ", " send" + c.flag + " stripe", " inspect" + c.flag + " stripe "}
		if len(cmds) != len(want) {
			t.Fatalf("%s: commands %q, want a send and an inspect for github and stripe:\n%s", c.dir, cmds, b.String())
		}
		for i, w := range want {
			if !strings.Contains(cmds[i], prog+w) {
				t.Errorf("%s: %q, want %q in it", c.dir, cmds[i], prog+w)
			}
		}
		for _, w := range []string{"webhook  github  http://127.0.0.1:4566/_aws/execute-api/a1b2/hooks/github", "target   ship    http://127.0.0.1:8031/ship",
			"secret   secretsmanager:s/stripe (generated; stripe)", "keygen discord"} {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: no %q in\n%s", c.dir, w, b.String())
			}
		}
	}
}

// TestDeployLocalSaysABoundTargetIsBound: a target the sources file binds to a resource of the
// CDK app has no ARN in the file: the deploy says it is bound, never an empty ARN.
func TestDeployLocalSaysABoundTargetIsBound(t *testing.T) {
	t.Parallel()
	f, err := sources.Parse([]byte(`{"sources":{"stripe":{"scheme":"stripe","secrets":[{"secretsmanager":"s/stripe"}],"redrive_window":"1d"}},
		"targets":{"audit":{"type":"sqs","bound":true},"ship":{"type":"sqs","arn":"arn:aws:sqs:us-east-1:000000000000:ship"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	k := &construct{stack: "App", routes: []string{"stripe"}, sources: f, sourcesPath: "/x/sources.json",
		tableName: "App-Table", urlTemplate: "http://127.0.0.1:4566/_aws/execute-api/a1b2/hooks/{source}"}
	d := []*construct{k}
	var b strings.Builder
	printDeployed(&b, "http://127.0.0.1:4566", ".oncehook/stack.env", ".oncehook", d, nil, nil)
	for _, w := range []string{"target   audit   sqs, bound by the CDK app (ONCEHOOK_BINDINGS)\n", "target   ship    sqs arn:aws:sqs:us-east-1:000000000000:ship\n"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("no %q in\n%s", w, b.String())
		}
	}
}
