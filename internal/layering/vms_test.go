package layering

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// vmImporters are the packages outside sim/vm that may import it: the
// lab's qemu backend (its one adapter), the A/B table that runs on both
// the model and real VMs, and the guest's init binary.
var vmImporters = []string{"sim/lab", "sim/abcases", "cmd/upgradelab-guest"}

// vmPackage matches a package path that names real-VM work.
var vmPackage = regexp.MustCompile(`/(vm|qemu|guest)[^/]*(/|$)`)

// vmTreeProblems lists the packages (path to direct imports) that break
// "the real VMs are one tree": a VM package outside sim/vm, or an
// importer of sim/vm that is not one of vmImporters.
func vmTreeProblems(list map[string][]string) []string {
	var bad []string
	for from, imports := range list {
		rel := strings.TrimPrefix(from, module)
		inTree := strings.HasPrefix(rel, "sim/vm/") || rel == "sim/vm"
		if !inTree && vmPackage.MatchString("/"+rel) && !slices.Contains(vmImporters, rel) {
			bad = append(bad, rel+" is real-VM code outside sim/vm")
		}
		for _, to := range imports {
			if !inTree && strings.HasPrefix(to, module+"sim/vm") && !slices.Contains(vmImporters, rel) {
				bad = append(bad, rel+" imports "+strings.TrimPrefix(to, module))
			}
		}
	}
	slices.Sort(bad)
	return bad
}

func TestRealVMsAreOneTree(t *testing.T) {
	if bad := vmTreeProblems(moduleImports(t)); len(bad) > 0 {
		t.Errorf("the real VMs are not one tree:\n  %s", strings.Join(bad, "\n  "))
	}
	// The check itself: a VM package beside the tree, and the harness
	// importing the tree, are seen.
	seen := vmTreeProblems(map[string][]string{
		module + "sim/vmdisk": nil,
		module + "e2e/runner": {module + "sim/vm/qemu"},
	})
	if len(seen) != 2 {
		t.Errorf("a VM package outside sim/vm and an importer of it went unseen: %v", seen)
	}
}

// backendBranch matches code that asks which backend a host is on instead
// of going through its machine.
var backendBranch = regexp.MustCompile(`\bvm\s*[!=]=\s*nil|\.\(\*qemuBackend\)|\.\(\*LibvirtBackend\)`)

// backendBranches lists file:line of each backend branch in src.
func backendBranches(name, src string) []string {
	var out []string
	for i, line := range strings.Split(src, "\n") {
		if backendBranch.MatchString(line) {
			out = append(out, name+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
		}
	}
	return out
}

// A lab host reaches the test driver's model and a real VM only through
// the machine its backend gives it (sim/lab/machine.go): no host
// operation branches on the backend.
func TestLabHostsDoNotBranchOnTheBackend(t *testing.T) {
	files, err := filepath.Glob("../../sim/lab/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("sim/lab's files: %v (%d)", err, len(files))
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range backendBranches(filepath.Base(f), string(src)) {
			t.Errorf("a backend branch: %s", b)
		}
	}
	if got := backendBranches("host.go", "func (h *Host) X() {\n\tif h.vm != nil {\n"); len(got) != 1 {
		t.Errorf("a vm != nil branch went unseen: %v", got)
	}
}
