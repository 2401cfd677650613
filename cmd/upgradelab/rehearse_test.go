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
