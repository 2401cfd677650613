package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `upgradelab rehearse import` on the example export writes the fleet
// file and says what it made of each cluster and what it left out; an
// export folder without hosts is refused by name.
func TestRehearseImportWritesTheSitesFiles(t *testing.T) {
	out := t.TempDir()
	var stdout bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"rehearse", "import", "../../fixtures/rehearsal/northwind", "--out", out})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"site northwind: 4 cluster(s) on 11 host(s), 4 idle host(s)", "core-inventory", "rolling", "left out (",
		"core/payments: left out of the fleet", "failure points found before any run (6, in " + filepath.Join(out, "failure-points.json"),
		"core-payments fails [spares-too-few]", "fleet file: " + filepath.Join(out, "fleet.yaml")} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if _, err := os.Stat(filepath.Join(out, "labs", "core-inventory.yaml")); err != nil {
		t.Error(err)
	}
	for args, want := range map[string]string{
		"--to-image=no-such-image":                                   `--to-image: image "no-such-image"`,
		"--to-image=ubuntu-24.04-k8s-v1.36.3-i40e-2.28 --to=v1.35.3": "--to-image: ubuntu-24.04-k8s-v1.36.3-i40e-2.28 carries Kubernetes v1.36.3, not --to's v1.35.3",
		"--to-image=deploy-ramdisk-2026.10":                          "not an OS image",
	} {
		cmd = newRootCommand()
		cmd.SetOut(&stdout)
		cmd.SetErr(&stdout)
		cmd.SetArgs(append([]string{"rehearse", "import", "../../fixtures/rehearsal/northwind", "--out", t.TempDir()}, strings.Fields(args)...))
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error with %q", args, err, want)
		}
	}
	empty := t.TempDir()
	cmd = newRootCommand()
	cmd.SetOut(&stdout)
	cmd.SetErr(&stdout)
	cmd.SetArgs([]string{"rehearse", "import", empty, "--out", t.TempDir()})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), empty+": no BareMetalHost in the export") {
		t.Errorf("an empty export: %v", err)
	}
}

// `upgradelab rehearse run` refuses a plan it cannot carry out before it
// builds or starts anything, naming the file and the field.
func TestRehearseRunRefusesABadPlanByItsField(t *testing.T) {
	dir := t.TempDir()
	export, err := filepath.Abs("../../fixtures/rehearsal/northwind")
	if err != nil {
		t.Fatal(err)
	}
	head := "apiVersion: upgradelab.dev/v1alpha1\nkind: RehearsalPlan\nexport: " + export + "\n"
	for body, want := range map[string]string{
		"targets: [{clusters: ['*'], image: no-such-image}]":                              `targets[0].image: image "no-such-image"`,
		"targets: [{clusters: ['*'], nicFirmware: '7.00'}]":                               `targets[0].nicFirmware: no NVM image of version "7.00"`,
		"clusters: [nowhere/*]":                                                           `clusters[0]: "nowhere/*" matches no cluster of the export (retail/store-0042, `,
		"targets: [{clusters: ['*'], version: v9.9.9}]":                                   "targets[0].version: no OS image of the lab's catalog carries Kubernetes v9.9.9",
		"targets: [{clusters: ['*'], version: v1.35.3, image: ubuntu-24.04-k8s-v1.36.3}]": "carries Kubernetes v1.36.3, not targets[0].version's v1.35.3",
	} {
		plan := filepath.Join(dir, "plan.yaml")
		if err := os.WriteFile(plan, []byte(head+body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout bytes.Buffer
		cmd := newRootCommand()
		cmd.SetOut(&stdout)
		cmd.SetErr(&stdout)
		cmd.SetArgs([]string{"rehearse", "run", plan, "--artifacts", filepath.Join(dir, "out")})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), plan) {
			t.Errorf("%s: %v; want an error naming %s and %q", body, err, plan, want)
		}
		if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
			t.Errorf("%s: the artifacts folder was made for a plan refused", body)
		}
	}
}
