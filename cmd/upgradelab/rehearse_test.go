package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/e2e/rehearsal"
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

// `upgradelab rehearse run` carries out a one-store plan: a repeat in
// which the store's in-place upgrade passes, then a wave in which its
// host does not come back; the prediction has the store's time in the
// site's clock, the fault's stop with the lab's evidence, and `rehearse
// report` writes it again from the folder alone.
func TestRehearseRunPredictsAPlanAndItsFault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	export, err := filepath.Abs("../../fixtures/rehearsal/northwind")
	if err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("apiVersion: upgradelab.dev/v1alpha1\nkind: RehearsalPlan\nexport: "+export+
		"\nclusters: [store-0042]\nwindow: 1h\nfaults: [host-does-not-return]\ntargets: [{clusters: ['*'], version: v1.36.3}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &lockedWriter{w: &bytes.Buffer{}}
	artifacts := filepath.Join(dir, "rehearsal")
	cmd := newRootCommand()
	cmd.SetOut(out)
	cmd.SetErr(out)
	cmd.SetArgs([]string{"rehearse", "run", plan, "--artifacts", artifacts, "--upgrade", "1m"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.w)
	}
	var pred rehearsal.Prediction
	data, err := os.ReadFile(filepath.Join(artifacts, rehearsal.PredictionFile))
	if err == nil {
		err = json.Unmarshal(data, &pred)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(pred.Clusters) != 1 || pred.Repeats != 1 || pred.Fits != "yes" {
		t.Fatalf("prediction %+v: want the store, one repeat, fitting the hour", pred)
	}
	store := pred.Clusters[0]
	// Its reboot alone is POST and boot, over two minutes of lab time.
	if store.Cluster != "retail-store-0042" || store.Passed != 1 || store.Duration.N != 1 || store.Host < 2*time.Minute || store.Duration.P50 < store.Host {
		t.Errorf("the store: %+v", store)
	}
	if f := pred.Faults; len(f) != 1 || f[0].Verdicts["retail-store-0042"] == "PASS" {
		t.Errorf("faults %+v: want the store's run under host-does-not-return not to pass", f)
	}
	if m := pred.Met; len(m) == 0 || m[0].Wave != "fault-host-does-not-return" || !strings.Contains(m[0].Lab, "PowerSupplyFailed") {
		t.Errorf("met %+v: want the fault's wave, with the lab's word that the power supply failed", m)
	}
	if !strings.Contains(out.w.(*bytes.Buffer).String(), "upgradelab artifacts: "+artifacts+" (prediction.html") {
		t.Errorf("the run does not name its artifacts:\n%s", out.w)
	}
	if err := os.Remove(filepath.Join(artifacts, rehearsal.PredictionFile)); err != nil {
		t.Fatal(err)
	}
	cmd = newRootCommand()
	cmd.SetOut(out)
	cmd.SetArgs([]string{"rehearse", "report", artifacts})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if again, err := os.ReadFile(filepath.Join(artifacts, rehearsal.PredictionFile)); err != nil || !bytes.Equal(again, data) {
		t.Errorf("rehearse report wrote another prediction (%v)", err)
	}
}
