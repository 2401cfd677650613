package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/scenario"
)

func TestShippedConfigsLoad(t *testing.T) {
	for _, name := range []string{"baremetal", "inmemory"} {
		c, err := Load(filepath.Join("..", "..", "fixtures", "providers", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if c.Name != name || len(c.Managers) == 0 {
			t.Errorf("%s: %+v", name, c)
		}
	}
	bm, _ := Load("../../fixtures/providers/baremetal.yaml")
	if got := len(bm.ManagersFor(scenario.ScaleIn)); got != 1 {
		t.Errorf("a scale-in run of the reference starts %d managers, want the provider alone", got)
	}
	if got := len(bm.ManagersFor(scenario.InPlace)); got != 2 {
		t.Errorf("an in-place run starts %d managers, want provider and extension", got)
	}
	if got := bm.FixedPorts(); len(got) != 0 {
		t.Errorf("the reference provider binds fixed ports %v; its runs could not overlap", got)
	}
	mem, _ := Load("../../fixtures/providers/inmemory.yaml")
	if got := mem.FixedPorts(); !slices.Equal(got, []int{19000}) {
		t.Errorf("CAPD's fixed ports = %v, want [19000] (its workload clusters' debug server)", got)
	}
	if mem.Lab || mem.Supports(scenario.InPlace) || !mem.Supports(scenario.Rolling) {
		t.Errorf("inmemory: lab %v, strategies %v", mem.Lab, mem.Strategies)
	}
	ext, err := Load("../../fixtures/providers/inmemory-testextension.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if ms := ext.ManagersFor(scenario.InPlace); len(ms) != 2 || !ms[1].RuntimeExtension || ms[1].Settings["extensionConfigName"] != ms[1].Name {
		t.Errorf("inmemory-testextension: in-place managers %+v, want CAPD and CAPI's test extension with its settings", ms)
	}
}

const good = `
name: theirs
managers:
- name: capx
  binary: bin/manager
  config: config
clusterTemplates: templates
strategies: [scale-in]
`

func TestBadConfigsNameTheField(t *testing.T) {
	for _, tc := range []struct{ edit, want string }{
		{"name: theirs\n", "name: \"\" must be"},
		{"strategies: [scale-in]\n", "strategies: required"},
		{"  binary: bin/manager\n", "managers[0]: give exactly one of reference, package"},
		{"clusterTemplates: templates\n", "clusterTemplates: required"},
	} {
		_, err := Parse("providers/theirs.yaml", []byte(strings.Replace(good, tc.edit, "", 1)))
		if err == nil || !strings.Contains(err.Error(), "providers/theirs.yaml: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("without %q: %v, want %q", tc.edit, err, tc.want)
		}
	}
	for _, tc := range []struct{ doc, want string }{
		{good + "colour: red\n", `unknown field "colour"`},
		{strings.Replace(good, "[scale-in]", "[in-place]", 1), "in-place needs a manager with runtimeExtension"},
		{strings.Replace(good, "[scale-in]", "[reset]", 1), "strategies[0]: reset needs the lab"},
		{strings.Replace(good, "[scale-in]", "[sideways]", 1), `strategies[0]: "sideways" is not`},
		{strings.Replace(good, "name: capx", "name: kcp", 1), `managers[0].name: "kcp"`},
		{strings.Replace(good, "binary: bin/manager", "package: cmd/manager", 1), "managers[0].module: required with package"},
		{strings.Replace(good, "binary: bin/manager", "package: cmd/manager\n  module: example.com/capx\n  version: latest", 1), `managers[0].version: "latest" is not a module version`},
		{strings.Replace(good, "binary: bin/manager", "package: cmd/manager\n  checkout: ../capx\n  version: v1.0.0", 1), "managers[0].version: only with module"},
		{strings.Replace(good, "binary: bin/manager", "package: cmd/manager\n  checkout: ../capx\n  module: example.com/capx", 1), "managers[0].checkout: give module (and version) or checkout, not both"},
		{strings.Replace(good, "binary: bin/manager", "module: example.com/capx", 1), "managers[0]: give exactly one of reference, package (with module or checkout) and binary"},
		{strings.Replace(good, "binary: bin/manager", "reference: baremetal", 1), "managers[0].reference: upgradelab's own managers drive the lab"},
		{"lab: true\n" + strings.Replace(good, "  binary: bin/manager\n  config: config\n", "  reference: inventory\n- name: both\n  reference: baremetal\n", 1), "managers[1].reference: inventory and baremetal both keep the lab's BareMetalHosts"},
		{"lab: true\n" + strings.Replace(good, "  binary: bin/manager\n  config: config\n", "  reference: metal3\n- name: both\n  reference: inventory\n", 1), "managers[1].reference: metal3 and inventory both keep the lab's BareMetalHosts"},
		{strings.Replace(good, "binary: bin/manager", "binary: x\n  onlyFor: [rolling]", 1), `managers[0].onlyFor[0]: "rolling" is not one of the provider's strategies`},
		{good + "intervals: {upgrade: soon}\n", "not a duration"},
		{good + "hosts: {spareLabel: example.com/spare}\n", "hosts: only for a provider on the lab"},
		{good + "singleNodeAnnotation: single node\n", `singleNodeAnnotation: "single node" is not a label or annotation key`},
		{good + "lab: true\nhosts: {spareLabel: spare}\n", `hosts.spareLabel: "spare" is not a label or annotation key (prefix/name)`},
		{strings.Replace(good, "[scale-in]", "[reset]", 1) + "lab: true\n", "hosts.poolLabel: required with the reset strategy"},
		{strings.Replace(good, "binary: bin/manager", "binary: x\n  fixedPorts: [70000]", 1), "managers[0].fixedPorts[0]: 70000 is not a port"},
		{strings.Replace(good, "binary: bin/manager", "binary: x\n  settings: {a: b}", 1), "managers[0].settings: only a runtimeExtension has settings"},
		{strings.Replace(good, "binary: bin/manager", "binary: x\n  namespaceLabels: {a: b}", 1), "managers[0].namespaceLabels: only a runtimeExtension has namespaceLabels"},
		{good + "unsupported: {scale-in: because}\n", "unsupported.scale-in: scale-in is in strategies"},
		{good + "unsupported: {sideways: because}\n", `unsupported.sideways: "sideways" is not`},
		{good + "unsupported: {rolling: \" \"}\n", "unsupported.rolling: say why"},
		{"lab: true\n" + strings.Replace(good, "binary: bin/manager", "reference: capm3", 1), "managers: capm3 consumes the lab's BareMetalHosts: add a manager with reference metal3"},
	} {
		_, err := Parse("providers/theirs.yaml", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n=> %v, want %q", tc.doc, err, tc.want)
		}
	}
	if _, err := Parse("providers/theirs.yaml", []byte(good)); err != nil {
		t.Fatal(err)
	}
}

func TestLoadWantsEveryTemplate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "theirs.yaml"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "templates"), 0o755)
	os.WriteFile(filepath.Join(dir, "templates", "cluster.yaml"), nil, 0o644)
	_, err := Load(filepath.Join(dir, "theirs.yaml"))
	if err == nil || !strings.Contains(err.Error(), "lacks machine-templates.yaml, clusterclass.yaml, cluster-topology.yaml") {
		t.Fatalf("got %v", err)
	}
}

func TestProcessFindsTheBinaryAndConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "theirs.yaml"), []byte(good), 0o644)
	c, err := Parse(filepath.Join(dir, "theirs.yaml"), []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	c.path = filepath.Join(dir, "theirs.yaml")
	if _, err := c.Process(t.Context(), c.Managers[0], dir, dir); err == nil || !strings.Contains(err.Error(), "managers capx: binary") {
		t.Fatalf("a missing binary: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "manager"), []byte("#!/bin/sh\n"), 0o755)
	if _, err := c.Process(t.Context(), c.Managers[0], dir, dir); err == nil || !strings.Contains(err.Error(), "has no rbac/") {
		t.Fatalf("a config folder without RBAC: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, "config", "rbac"), 0o755)
	c.Managers[0].Env = map[string]string{"POD_IP": "127.0.0.1"}
	p, err := c.Process(t.Context(), c.Managers[0], dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.Binary != filepath.Join(dir, "bin", "manager") || p.ConfigDir != filepath.Join(dir, "config") || len(p.Env) != 1 || p.Env[0] != "POD_IP=127.0.0.1" {
		t.Errorf("got %+v", p)
	}
}

func FuzzParseProvider(f *testing.F) {
	f.Add([]byte(good))
	for _, name := range []string{"baremetal", "inmemory"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "providers", name+".yaml")); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
				t.Fatalf("error without the file name: %v", err)
			}
			return
		}
		if c.Name == "" || len(c.Managers) == 0 || len(c.Strategies) == 0 || c.Intervals.Upgrade.Duration <= 0 {
			t.Fatalf("accepted an incomplete config: %+v", c)
		}
	})
}

// A strategy the provider says why it does not support is refused with
// that reason (Metal3's provider has no in-place update).
func TestRunsGivesTheProvidersReasonForAStrategy(t *testing.T) {
	m3, err := Load("../../fixtures/providers/metal3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ok, why := m3.Runs(&scenario.Scenario{Strategy: scenario.InPlace})
	if ok || !strings.Contains(why, "does not support strategy in-place") || !strings.Contains(why, "CAPM3 has no in-place update") {
		t.Errorf("in-place on metal3: %v %q; want refused with CAPM3's reason", ok, why)
	}
}

func TestRunsSaysWhyAScenarioDoesNotApply(t *testing.T) {
	mem, err := Load("../../fixtures/providers/inmemory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    scenario.Scenario
		want string
	}{
		{scenario.Scenario{Strategy: scenario.ScaleIn}, ""},
		{scenario.Scenario{Strategy: scenario.ScaleIn, Faults: []scenario.Fault{{Name: "f", Restart: "capd"}}}, ""},
		{scenario.Scenario{Strategy: scenario.ScaleIn, Faults: []scenario.Fault{{Name: "f", Restart: "apiserver"}}}, ""},
		{scenario.Scenario{Strategy: scenario.ScaleIn, Faults: []scenario.Fault{{Name: "f", Restart: "kcp", When: scenario.FaultWhen{LabEvent: "WriteStarted"}}}}, "waits for a lab event"},
		{scenario.Scenario{Strategy: scenario.InPlace}, "does not support strategy in-place"},
		{scenario.Scenario{Strategy: scenario.ScaleIn, Faults: []scenario.Fault{{Name: "f", Restart: "baremetal"}}}, "fault f restarts baremetal, which does not run for provider inmemory"},
		{scenario.Scenario{Strategy: scenario.Rolling, Faults: []scenario.Fault{{Name: "f", BMC: &scenario.BMCFault{}}}}, "fault f acts on BMCs"},
		{scenario.Scenario{Strategy: scenario.Rolling, Workload: scenario.Application{NodeDrainTimeout: scenario.Duration{Duration: time.Second}}}, "needs pods"},
	} {
		ok, why := mem.Runs(&tc.s)
		if ok != (tc.want == "") || !strings.Contains(why, tc.want) {
			t.Errorf("%+v: %v %q, want %q", tc.s, ok, why, tc.want)
		}
	}
}

// Two builders of one binary at once (two suites on one machine) end
// with one good binary,
// and a binary already there is not built again.
func TestBuildOnceTakesTurns(t *testing.T) {
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.test/hello\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "main.go"), []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bin", "hello")
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- buildLocked(t.Context(), buildSpec{dir: mod, pkg: "example.test/hello", out: out}) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(out).CombinedOutput(); err != nil || strings.TrimSpace(string(msg)) != "hello" {
		t.Fatalf("the built binary: %q, %v", msg, err)
	}
	if err := buildLocked(t.Context(), buildSpec{dir: mod, pkg: "example.test/hello", out: out}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(out); !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("a binary already there was built again")
	}
	if left, _ := filepath.Glob(out + ".tmp*"); len(left) > 0 {
		t.Fatalf("temporary builds left: %v", left)
	}
}

// A manager from a local checkout is built there by Build, with the
// checkout's own go.mod (a module this repository does not require), and
// its config is relative to the checkout. Process only finds it.
func TestBuildMakesAManagerFromItsCheckoutAndProcessFindsIt(t *testing.T) {
	dir := t.TempDir()
	checkout := filepath.Join(dir, "capx")
	os.MkdirAll(filepath.Join(checkout, "cmd", "manager"), 0o755)
	os.MkdirAll(filepath.Join(checkout, "config", "rbac"), 0o755)
	os.WriteFile(filepath.Join(checkout, "go.mod"), []byte("module example.test/capx\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(checkout, "cmd", "manager", "main.go"), []byte("package main\n\nfunc main() { println(\"capx\") }\n"), 0o644)
	doc := strings.Replace(good, "  binary: bin/manager\n", "  checkout: capx\n  package: cmd/manager\n", 1)
	c, err := Parse(filepath.Join(dir, "theirs.yaml"), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	c.path = filepath.Join(dir, "theirs.yaml")
	cache := filepath.Join(dir, "cache")
	if _, err := c.Process(t.Context(), c.Managers[0], "/nonexistent", cache); err == nil || !strings.Contains(err.Error(), "is not built yet") {
		t.Fatalf("Process of a manager not built: %v, want it refused (Process never builds)", err)
	}
	var progress strings.Builder
	if err := c.Build(t.Context(), c.Managers[0], "/nonexistent", cache, &progress); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress.String(), "building theirs's manager capx from checkout "+checkout) || !strings.Contains(progress.String(), "built theirs's manager capx in") {
		t.Errorf("progress lines: %q", progress.String())
	}
	p, err := c.Process(t.Context(), c.Managers[0], "/nonexistent", cache)
	if err != nil {
		t.Fatal(err)
	}
	if exe, err := c.Executable(t.Context(), c.Managers[0], "/nonexistent", cache); err != nil || exe != p.Binary {
		t.Errorf("Executable %q, %v; Process runs %q", exe, err, p.Binary)
	}
	out, err := exec.Command(p.Binary).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "capx" {
		t.Fatalf("the built manager %s says %q, %v", p.Binary, out, err)
	}
	if p.ConfigDir != filepath.Join(checkout, "config") {
		t.Errorf("config %s, want the checkout's", p.ConfigDir)
	}
}

// A module at its own version builds with its go.mod's replace
// directives restated: a local one (CAPI's test module replaces
// sigs.k8s.io/cluster-api with ../) becomes that sibling at the same
// version, another is copied; their go version keeps the graph pruned.
func TestWrapperGoModRestatesTheModulesReplaces(t *testing.T) {
	theirs := []byte(`module sigs.k8s.io/cluster-api/test

go 1.26.0

replace (
	sigs.k8s.io/cluster-api => ../
	sigs.k8s.io/cluster-api/api => ../api
	example.com/forked v1.0.0 => example.com/fork v1.0.1
)

require sigs.k8s.io/cluster-api v0.0.0-00010101000000-000000000000
`)
	got, err := wrapperGoMod("test/go.mod", theirs, "sigs.k8s.io/cluster-api/test", "v1.14.2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"module upgradelab.local/wrapper", "go 1.26.0", "sigs.k8s.io/cluster-api/test v1.14.2", "sigs.k8s.io/cluster-api v1.14.2",
		"sigs.k8s.io/cluster-api/api v1.14.2", "replace example.com/forked v1.0.0 => example.com/fork v1.0.1"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("wrapper go.mod lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "=> ../") {
		t.Errorf("a local replace was copied:\n%s", got)
	}
}
