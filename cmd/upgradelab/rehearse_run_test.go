//go:build integration

// A real plane (kube-apiserver, etcd, CAPI's managers: make tools) runs
// this test; make test-integration runs it, make test does not.

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
