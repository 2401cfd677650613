package mgmt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/internal/proc"
)

// FeatureGates are the CAPI gates every manager runs with: ClusterClass
// clusters need ClusterTopology, in-place updates need RuntimeSDK and
// InPlaceUpdates, and ReconcilerRateLimiting as Options say (see
// Options.RateLimitedReconciles). The managers read gates only from
// --feature-gates.
func FeatureGates(rateLimited bool) []string {
	return []string{"ClusterTopology=true", "RuntimeSDK=true", "InPlaceUpdates=true",
		"ReconcilerRateLimiting=" + strconv.FormatBool(rateLimited)}
}

// Provider is a manager beside CAPI's: the infrastructure provider (or
// extension) under test. It takes the flags CAPI's managers take except
// --feature-gates, and ships its manifests the way they do.
type Provider struct {
	// Name prefixes its webhook configurations and names its log.
	Name string
	// Binary is the manager's executable.
	Binary string
	// ConfigDir holds crd/bases (with crd/kustomization.yaml's labels;
	// no crd/ for a manager without CRDs) and webhook/manifests.yaml;
	// empty for a manager without manifests.
	ConfigDir string
	// ExtraCRDDirs hold CRDs installed as they are (no contract labels, no
	// conversion), such as the BareMetalHost inventory's.
	ExtraCRDDirs []string
	// Args are its own flags.
	Args []string
	// RuntimeExtension: it serves Runtime SDK hooks on its webhook port,
	// so the plane registers an ExtensionConfig for it (named Name) and
	// waits until CAPI has discovered its handlers. ExtensionSettings are
	// the ExtensionConfig's spec.settings.
	RuntimeExtension  bool
	ExtensionSettings map[string]string
	// ExtensionNamespaceLabels become the ExtensionConfig's
	// namespaceSelector (matchLabels): CAPI calls the extension only
	// about objects in namespaces with these labels (nil: every
	// namespace).
	ExtensionNamespaceLabels map[string]string
	// FeatureGates: it is built on CAPI's manager scaffolding and takes
	// CAPI's --feature-gates (CAPD does; ours take none).
	FeatureGates bool
	// Env is added to the harness's environment (KEY=VALUE), e.g. CAPD's
	// POD_IP, where its in-memory backend listens.
	Env []string
	// PlaneFlags, when set, are the only flags of the plane's own it takes
	// (by name, e.g. kubeconfig and health-addr for baremetal-operator,
	// which is not built on CAPI's manager scaffolding); its Args give
	// the rest.
	PlaneFlags []string
	// CertsUnderTMPDIR: it reads its webhook serving certificate from
	// controller-runtime's default folder, $TMPDIR/k8s-webhook-server/
	// serving-certs, and no flag names another (baremetal-operator
	// v0.11): run here, it gets a TMPDIR whose folder is the plane's
	// certificates; in a Pod the folder is where the plane mounts them.
	CertsUnderTMPDIR bool
	// LabPorts are the loopback ports it listens on for the lab (a
	// callback endpoint hosts post to, a boot server): on kind, where it
	// runs in the node, the host's loopback forwards them to it
	// (e2e/mgmt/kind).
	LabPorts []int
}

// managerSpec is one manager the plane runs: a real CAPI manager (its
// manifests in its folder of the CAPI module) or a Provider.
type managerSpec struct {
	name      string // short name, prefix of its webhook configurations
	binary    string // path of the executable
	configDir string // folder holding crd/ and webhook/
	extraCRDs []string
	gates     []string // its --feature-gates, for a manager that takes them
	extraArgs []string
	// planeFlags: the plane's flags it takes (nil: all of them).
	planeFlags []string
	extension  bool
	settings   map[string]string // the ExtensionConfig's, for an extension
	nsLabels   map[string]string // the ExtensionConfig's namespaceSelector
	env        []string
	// certsUnderTMPDIR: see Provider.CertsUnderTMPDIR.
	certsUnderTMPDIR bool
	// id is the manager's ServiceAccount, namespace and RBAC from its
	// config/rbac and config/default, read once at Start (loadIdentity).
	id *managerIdentity
	// kubeconfig acts as the manager's ServiceAccount, whose user and
	// groups these are (installIdentities).
	kubeconfig string
	user       string
	groups     []string
}

// capiManagers are CAPI's core, KubeadmControlPlane and kubeadm bootstrap
// managers.
func capiManagers(a Assets, gates []string) []managerSpec {
	var out []managerSpec
	for _, m := range []struct{ name, binary, srcDir string }{
		{"capi", "capi-manager", "core"},
		{"kcp", "kcp-manager", "controlplane/kubeadm"},
		{"cabpk", "cabpk-manager", "bootstrap/kubeadm"},
	} {
		out = append(out, managerSpec{name: m.name, binary: filepath.Join(a.ManagersDir, m.binary),
			configDir: filepath.Join(a.CAPIDir, m.srcDir, "config"), gates: gates})
	}
	return out
}

func (p Provider) spec(gates []string) managerSpec {
	s := managerSpec{name: p.Name, binary: p.Binary, configDir: p.ConfigDir, extraCRDs: p.ExtraCRDDirs, extraArgs: p.Args, planeFlags: p.PlaneFlags,
		extension: p.RuntimeExtension, settings: p.ExtensionSettings, nsLabels: p.ExtensionNamespaceLabels, env: p.Env,
		certsUnderTMPDIR: p.CertsUnderTMPDIR}
	if p.FeatureGates {
		s.gates = gates
	}
	return s
}

// managerPorts are the loopback ports of one manager. Every CAPI manager
// defaults to the same health and diagnostics ports, so each gets its own.
type managerPorts struct {
	webhook, health, diagnostics int
}

func (p managerPorts) healthURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(p.health) + "/readyz"
}

func (m managerSpec) args(certDir string, ports managerPorts) []string {
	args := []string{"--kubeconfig=" + m.kubeconfig}
	if len(m.gates) > 0 {
		args = append(args, "--feature-gates="+strings.Join(m.gates, ","))
	}
	args = append(args,
		"--webhook-port="+strconv.Itoa(ports.webhook),
		"--webhook-cert-dir="+certDir,
		"--health-addr=127.0.0.1:"+strconv.Itoa(ports.health),
		"--diagnostics-address=127.0.0.1:"+strconv.Itoa(ports.diagnostics),
		"--insecure-diagnostics",
		"--leader-elect=false",
		// Short resyncs keep a simulated rollout moving in seconds.
		"--sync-period=1m",
	)
	if m.planeFlags != nil {
		args = slices.DeleteFunc(args, func(a string) bool {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			return !slices.Contains(m.planeFlags, name)
		})
	}
	return append(args, m.extraArgs...)
}

// localEnv is the manager's environment run here: its own, and for a
// manager with its certificates under TMPDIR a TMPDIR in dir whose
// k8s-webhook-server/serving-certs is certDir.
func (m managerSpec) localEnv(certDir, dir string) ([]string, error) {
	if !m.certsUnderTMPDIR {
		return m.env, nil
	}
	tmp := filepath.Join(dir, m.name+"-tmp")
	link := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return nil, err
	}
	if err := os.Symlink(certDir, link); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	return append(slices.Clone(m.env), "TMPDIR="+tmp), nil
}

// startManagers starts every manager and waits until each answers /readyz,
// which in CAPI's managers includes its webhook server having started.
func startManagers(ctx context.Context, managers []managerSpec, certs *webhookCerts, logDir string, ports map[string]managerPorts, timeout time.Duration) ([]*proc.Process, error) {
	var procs []*proc.Process
	for _, m := range managers {
		env, err := m.localEnv(certs.dir, logDir)
		if err != nil {
			return procs, err
		}
		p, err := proc.Start(m.name, m.binary, m.args(certs.dir, ports[m.name]), env, logDir)
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for i, m := range managers {
		if err := procs[i].WaitHealthy(ctx, ports[m.name].healthURL()); err != nil {
			return procs, err
		}
		if m.certsUnderTMPDIR { // its readiness check does not cover its webhooks
			if err := procs[i].WaitListening(ctx, webhookAddr(ports[m.name])); err != nil {
				return procs, err
			}
		}
	}
	return procs, nil
}

// webhookAddr is where a manager's webhook server listens.
func webhookAddr(p managerPorts) string { return "127.0.0.1:" + strconv.Itoa(p.webhook) }
