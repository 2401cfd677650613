package layering

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/upgradelab/upgradelab/"

// pkg is one package of `go list -deps`.
type pkg struct {
	path     string
	standard bool
	cgo      bool
	err      string
}

// deps lists every package patterns need to build, with env added to the
// go command's environment.
func deps(t *testing.T, env []string, patterns ...string) []pkg {
	t.Helper()
	args := append([]string{"list", "-e", "-deps", "-f", "{{.ImportPath}}\t{{.Standard}}\t{{len .CgoFiles}}\t{{with .Error}}{{.Err}}{{end}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	var pkgs []pkg
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := append(strings.SplitN(line, "\t", 4), "", "", "")
		pkgs = append(pkgs, pkg{path: f[0], standard: f[1] == "true", cgo: f[2] != "0", err: f[3]})
	}
	return pkgs
}

// imports lists the packages that patterns import themselves.
func imports(t *testing.T, patterns ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-f", "{{join .Imports \"\\n\"}}"}, patterns...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for _, path := range strings.Fields(string(out)) {
		pkgs = append(pkgs, pkg{path: path})
	}
	return pkgs
}

// forbidden lists the packages that patterns depend on and isForbidden
// refuses.
func forbidden(t *testing.T, patterns []string, direct bool, isForbidden func(pkg) bool) []string {
	t.Helper()
	list := deps(t, nil, patterns...)
	if direct {
		list = imports(t, patterns...)
	}
	var bad []string
	for _, p := range list {
		if isForbidden(p) {
			bad = append(bad, p.path)
		}
	}
	return bad
}

// The layers, as data: these packages must not depend on those.
var layers = []struct {
	name     string
	packages []string
	// direct: only their own imports count, not what those import.
	direct bool
	// not reports a package they must not depend on.
	not func(p pkg) bool
}{
	{
		name:     "the wire APIs import only the standard library and each other",
		packages: []string{"./api/..."},
		not:      func(p pkg) bool { return !p.standard && !strings.HasPrefix(p.path, module+"api/") },
	},
	{
		name:     "the providers under test never import the simulator or the harness",
		packages: []string{"./providers/...", "./cmd/upgradelab-baremetal", "./cmd/upgradelab-inplace"},
		not: func(p pkg) bool {
			return strings.HasPrefix(p.path, module+"sim/") || strings.HasPrefix(p.path, module+"e2e/")
		},
	},
	{
		name:     "the simulator never imports a provider or the harness",
		packages: []string{"./sim/...", "./cmd/upgradelab-agent"},
		not: func(p pkg) bool {
			return strings.HasPrefix(p.path, module+"providers/") || strings.HasPrefix(p.path, module+"e2e/")
		},
	},
	{
		name:     "the harness reaches real VMs only through the lab's backend",
		packages: []string{"./e2e/...", "./cmd/upgradelab"},
		direct:   true,
		not:      func(p pkg) bool { return strings.HasPrefix(p.path, module+"sim/vm") },
	},
	{
		name:     "the rules, the timeline and the scenario files never build the simulator or the recorder that watches it",
		packages: []string{"./e2e/check", "./e2e/timeline", "./e2e/scenario"},
		not: func(p pkg) bool {
			return strings.HasPrefix(p.path, module+"sim/") || p.path == module+"e2e/monitor"
		},
	},
	{
		name:     "the report reads results; it does not run scenarios",
		packages: []string{"./e2e/report"},
		not:      func(p pkg) bool { return p.path == module+"e2e/runner" },
	},
	{
		name:     "the monitors and checks judge any provider: none of them imports one",
		packages: []string{"./e2e/monitor", "./e2e/check", "./e2e/timeline"},
		not:      func(p pkg) bool { return strings.HasPrefix(p.path, module+"providers/") },
	},
	{
		// e2e/reference is the one adapter that knows upgradelab's own
		// provider (how to build, start and enroll it).
		name:     "the runner drives providers through their configs, not their packages",
		packages: []string{"./e2e/runner"},
		direct:   true,
		not:      func(p pkg) bool { return strings.HasPrefix(p.path, module+"providers/") },
	},
}

// tiers rank the module's top-level folders: a package imports only
// from its own tier or a lower one. The simulator and the providers
// share a tier and stay apart through the rules above.
var tiers = map[string]int{"api": 0, "internal": 1, "sim": 2, "providers": 2, "e2e": 3, "cmd": 4}

// tierOf is the tier of a package of the module, and false for one
// outside it or in an unranked folder.
func tierOf(path string) (int, bool) {
	rest, ok := strings.CutPrefix(path, module)
	if !ok {
		return 0, false
	}
	top, _, _ := strings.Cut(rest, "/")
	n, ok := tiers[top]
	return n, ok
}

// below lists the imports of the module's packages that reach into a
// higher tier, as "importer -> imported".
func below(list map[string][]string) []string {
	var bad []string
	for from, imports := range list {
		own, ok := tierOf(from)
		if !ok {
			bad = append(bad, from+" is in no tier")
			continue
		}
		for _, to := range imports {
			if n, ok := tierOf(to); ok && n > own {
				bad = append(bad, from+" -> "+to)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// moduleImports maps each of the module's packages to its own imports.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	list := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		list[f[0]] = f[1:]
	}
	return list
}

func TestNoPackageImportsOneAboveIt(t *testing.T) {
	if bad := below(moduleImports(t)); len(bad) > 0 {
		t.Errorf("imports above their tier:\n  %s", strings.Join(bad, "\n  "))
	}
	// The check itself: a simulator package importing the harness is
	// seen.
	if bad := below(map[string][]string{module + "sim/lab": {module + "e2e/runner"}}); len(bad) != 1 {
		t.Errorf("a sim package importing e2e/runner went unseen: %v", bad)
	}
}

func TestLayers(t *testing.T) {
	for _, l := range layers {
		t.Run(l.name, func(t *testing.T) {
			if bad := forbidden(t, l.packages, l.direct, l.not); len(bad) > 0 {
				t.Errorf("%s depend on:\n  %s", strings.Join(l.packages, " "), strings.Join(bad, "\n  "))
			}
		})
	}
}

// needsCgo lists the packages outside the standard library that patterns
// depend on and that have cgo files. The standard library's (net,
// os/user, runtime/cgo) have pure-Go fallbacks; another package's usually
// has none: with CGO_ENABLED=0, libvirt's Go binding keeps one stub file
// and fails only when the code using it compiles, so a list taken with
// cgo off would not show it.
func needsCgo(t *testing.T, patterns ...string) []string {
	t.Helper()
	var out []string
	for _, p := range deps(t, []string{"CGO_ENABLED=1"}, patterns...) {
		if p.cgo && !p.standard {
			out = append(out, p.path)
		}
		if p.err != "" {
			t.Errorf("%s: %s", p.path, p.err)
		}
	}
	return out
}

// The provider's and the extension's binaries build without cgo (no
// libvirt, no C toolchain), and so does the VM guest's init, which is
// linked statically into an initramfs (sim/vm/boot). The host agent,
// which drives libvirt, is the check's control: it must be seen to need
// cgo.
func TestProviderBinariesNeedNoCgo(t *testing.T) {
	if got := needsCgo(t, "./cmd/upgradelab-baremetal", "./cmd/upgradelab-inplace"); len(got) > 0 {
		t.Errorf("the provider's binaries need cgo through %v", got)
	}
	if got := needsCgo(t, "./cmd/upgradelab-guest"); len(got) > 0 {
		t.Errorf("the VM guest's init needs cgo through %v: it could not be linked statically", got)
	}
	if got := needsCgo(t, "./cmd/upgradelab-agent"); !slices.Contains(got, "libvirt.org/go/libvirt") {
		t.Errorf("the check does not see the host agent's libvirt binding (got %v): it would not see a provider's either", got)
	}
}
