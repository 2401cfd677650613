package runner

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
)

// Only a run that cannot tell a kept plane from a fresh one takes it: no
// fault (one may act on the plane or a manager), upgradelab's own
// managers on its lab's modelled hosts, the embedded plane, not a fleet's.
func TestOnlyRunsThatCannotTellTakeTheKeptPlane(t *testing.T) {
	planes := &Planes{}
	for _, c := range []struct {
		what, provider, scenario string
		opts                     Options
		want                     bool
	}{
		{"the reference provider, no fault", "baremetal", "single-node-in-place", Options{Planes: planes}, true},
		{"rolling, no fault", "baremetal", "cold-spare-rolling", Options{Planes: planes}, true},
		{"no Planes given", "baremetal", "single-node-in-place", Options{}, false},
		{"a fault", "baremetal", "faults/capi-restart-mid-rollout", Options{Planes: planes}, false},
		{"Metal3's inventory and Ironic", "baremetal-bmo", "three-node-scale-in", Options{Planes: planes}, false},
		{"managers on fixed ports", "inmemory", "three-node-scale-in", Options{Planes: planes}, false},
		{"a kind plane", "baremetal", "single-node-in-place", Options{Planes: planes, Management: mgmt.Target{Kind: mgmt.KindCluster}}, false},
		{"a fleet's run", "baremetal", "single-node-in-place", Options{Planes: planes, Shared: &Shared{}}, false},
	} {
		root, s, def := repoScenario(t, c.scenario)
		r := &run{provider: repoProvider(t, root, c.provider), scenario: s, lab: def, opts: c.opts}
		if got := r.sharesPlane(); got != c.want {
			t.Errorf("%s: shares the kept plane %v, want %v", c.what, got, c.want)
		}
	}
}

// A run's copy of a kept plane's log starts where the log stood when the
// run began; a log that began after (a restarted manager's) is whole.
func TestARunCopiesItsPartOfTheKeptPlanesLogs(t *testing.T) {
	dir, to := t.TempDir(), t.TempDir()
	write := func(name, text string) {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}
	write("capi.log", "the last run's line\n")
	marks := marksOf(dir)
	write("capi.log", "this run's line\n")
	write("baremetal.log", "a manager started for this run\n")
	if err := copyLogs(dir, to, marks); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"capi.log": "this run's line\n", "baremetal.log": "a manager started for this run\n"} {
		got, err := os.ReadFile(filepath.Join(to, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
}

// Emptying a namespace deletes collections, lists and lifts finalizers:
// only resources that allow all three, and no subresources.
func TestANamespaceIsEmptiedOfWhatCanBeDeletedTogether(t *testing.T) {
	all := []string{"list", "deletecollection", "patch", "get"}
	got := deletable([]*metav1.APIResourceList{{GroupVersion: "cluster.x-k8s.io/v1beta2", APIResources: []metav1.APIResource{
		{Name: "machines", Verbs: all},
		{Name: "machines/status", Verbs: all},
		{Name: "clusters", Verbs: all},
	}}, {GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "bindings", Verbs: []string{"create"}},
		{Name: "secrets", Verbs: all},
	}}})
	want := []schema.GroupVersionResource{
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"},
		{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"},
		{Version: "v1", Resource: "secrets"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("deletable: %v, want %v", got, want)
	}
}
