package reference

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/timescale"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/providers/baremetal/host"
	"github.com/upgradelab/upgradelab/providers/baremetal/ipmi"
	"github.com/upgradelab/upgradelab/providers/baremetal/netboot"
	"github.com/upgradelab/upgradelab/providers/baremetal/redfish"
	"github.com/upgradelab/upgradelab/providers/inplace"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/site"
)

// DeployImage is the deploy ramdisk of the shipped image catalog.
const DeployImage = "deploy-ramdisk-2026.10"

// Scheme knows the management plane's kinds and the provider's.
func Scheme() *runtime.Scheme {
	s := mgmt.Scheme()
	for _, add := range []func(*runtime.Scheme) error{infrav1.AddToScheme, metal3.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// RepoRoot finds the module's root from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Commands of this module the harness runs as processes.
const (
	ProviderCommand  = "upgradelab-baremetal"
	ExtensionCommand = "upgradelab-inplace"
)

// Build compiles ./cmd/NAME into dir and returns its path (the Go build
// cache makes a rebuild of unchanged code a link step).
func Build(ctx context.Context, dir, name string) (string, error) {
	if err := build(ctx, dir, name); err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// Binaries are the provider's and the extension's executables.
type Binaries struct{ Provider, Extension string }

// BuildAll builds the provider and the extension into dir (a suite does
// once, and hands the paths to its parallel processes), in one go build
// that compiles what they share once.
func BuildAll(ctx context.Context, dir string) (Binaries, error) {
	if err := build(ctx, dir, ProviderCommand, ExtensionCommand); err != nil {
		return Binaries{}, err
	}
	return Binaries{Provider: filepath.Join(dir, ProviderCommand), Extension: filepath.Join(dir, ExtensionCommand)}, nil
}

// build compiles the commands ./cmd/NAME into dir. Static
// (CGO_ENABLED=0, which internal/layering requires the providers to
// build with): on kind each runs alone in a one-file image
// (e2e/mgmt/kind). With -trimpath, as scripts/build-capi-managers.sh
// builds CAPI's managers from this module: the packages they share
// (client-go, controller-runtime, CAPI's API) come from the build cache
// those left, not compiled a second time.
func build(ctx context.Context, dir string, names ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-o", dir + string(filepath.Separator)}
	for _, name := range names {
		args = append(args, "./cmd/"+name)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", strings.Join(names, " and "), err, msg)
	}
	return nil
}

// ExtensionNamespaceLabel marks a namespace whose clusters the in-place
// extension updates: its ExtensionConfig's namespaceSelector, so CAPI
// asks it only about those (and never about another provider's).
const ExtensionNamespaceLabel = "inplace.upgradelab.dev/enabled"

// Extension describes the in-place update extension to the plane: a
// runtime extension (the plane registers its ExtensionConfig) that
// reaches hosts with the same kind of certificate as the provider, with
// the single-node pause as its one admission webhook
// (providers/inplace/config).
func Extension(s *site.Site, binary, certDir string, args ...string) (mgmt.Provider, error) {
	if err := s.WriteProviderCertificate(certDir); err != nil {
		return mgmt.Provider{}, err
	}
	root, err := RepoRoot()
	if err != nil {
		return mgmt.Provider{}, err
	}
	return mgmt.Provider{
		Name: "inplace", Binary: binary, RuntimeExtension: true,
		ExtensionNamespaceLabels: map[string]string{ExtensionNamespaceLabel: "true"},
		ConfigDir:                filepath.Join(root, "providers", "inplace", "config"),
		Args:                     append([]string{"--ca-file=" + s.CAFile, "--cert-dir=" + certDir}, args...),
	}, nil
}

// Options say how the provider reaches the site.
type Options struct {
	Binary string
	// StateDir receives the provider's certificate (certs/).
	StateDir string
	// Extra flags (e.g. --poll, --reset-timeout).
	Args []string
	// ConfigDir replaces providers/baremetal/config (a test's edited copy
	// of its RBAC, say); its metal3/bases are still the repository's.
	ConfigDir string
	// Inventory runs the BareMetalHost inventory alone (--controllers=hosts,
	// with providers/baremetal/inventory-config): the lab's hosts for a
	// provider of its own that consumes BareMetalHosts, as CAPM3 does
	// baremetal-operator's.
	Inventory bool
	// Name is the manager's (default baremetal, or inventory).
	Name string
}

// Provider describes the reference provider to the plane, and returns the
// URL of its callback endpoint (where hosts heartbeat and register).
func Provider(s *site.Site, o Options) (mgmt.Provider, string, error) {
	root, err := RepoRoot()
	if err != nil {
		return mgmt.Provider{}, "", err
	}
	callback, err := callbackAddr()
	if err != nil {
		return mgmt.Provider{}, "", err
	}
	// The boot server ipmi:// hosts PXE-boot the deploy ramdisk through:
	// the site's DHCP offers it on every network, as a provisioning
	// network's dnsmasq offers Ironic's.
	netbootAddr, err := loopback.Addr()
	if err != nil {
		return mgmt.Provider{}, "", fmt.Errorf("the provider's boot server: %w", err)
	}
	for _, n := range s.Lab.Definition().Spec.Networks {
		if err := s.Lab.SetNetworkBoot(n.Name, "http://"+netbootAddr+netboot.Path); err != nil {
			return mgmt.Provider{}, "", err
		}
	}
	certDir := filepath.Join(o.StateDir, "certs")
	if err := s.WriteProviderCertificate(certDir); err != nil {
		return mgmt.Provider{}, "", err
	}
	config := filepath.Join(root, "providers", "baremetal", "config")
	configDir := cmp.Or(o.ConfigDir, config)
	name := cmp.Or(o.Name, "baremetal")
	args := []string{
		"--ca-file=" + s.CAFile,
		"--cert-dir=" + certDir,
		"--callback-addr=" + callback,
		"--netboot-addr=" + netbootAddr,
		"--deploy-image-url=" + s.Lab.ImageServer().ImageURL(DeployImage),
	}
	if o.Inventory {
		configDir = cmp.Or(o.ConfigDir, filepath.Join(root, "providers", "baremetal", "inventory-config"))
		name = cmp.Or(o.Name, "inventory")
		args = append(args, "--controllers=hosts")
	}
	var labPorts []int
	for _, addr := range []string{callback, netbootAddr} {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return mgmt.Provider{}, "", err
		}
		n, err := strconv.Atoi(port)
		if err != nil {
			return mgmt.Provider{}, "", err
		}
		labPorts = append(labPorts, n)
	}
	return mgmt.Provider{
		Name:         name,
		Binary:       o.Binary,
		ConfigDir:    configDir,
		ExtraCRDDirs: []string{filepath.Join(config, "metal3", "bases")},
		Args:         append(args, o.Args...),
		LabPorts:     labPorts,
	}, "https://" + callback, nil
}

// callbackAddr is the provider's callback endpoint: a port picked once,
// so a restarted provider gets the same address (hosts keep the URL they
// were told).
func callbackAddr() (string, error) {
	addr, err := loopback.Addr()
	if err != nil {
		return "", fmt.Errorf("the provider's callback endpoint: %w", err)
	}
	return addr, nil
}

// RegistrationURL is where hosts of pool register into namespace.
func RegistrationURL(callbackURL, namespace, pool string) string {
	return callbackURL + "/v1/registration/" + namespace + "/" + pool
}

// Enroll creates a BareMetalHost and its BMC credentials secret for every
// host of the site with a BMC, except those keep selects out, copying the
// lab's host labels.
func Enroll(ctx context.Context, c client.Client, s *site.Site, namespace string, keep func(lab.HostInfo) bool) ([]*metal3.BareMetalHost, error) {
	var hosts []*metal3.BareMetalHost
	for _, h := range s.Lab.Info().Hosts {
		if h.BMC == nil || (keep != nil && !keep(h)) {
			continue
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: h.Name + "-bmc"},
			Data:       map[string][]byte{"username": []byte(h.BMC.Username), "password": []byte(h.BMC.Password)},
		}
		if err := c.Create(ctx, secret); err != nil {
			return nil, fmt.Errorf("enrolling %s: %w", h.Name, err)
		}
		bmh := &metal3.BareMetalHost{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: h.Name, Labels: h.Labels},
			Spec: metal3.BareMetalHostSpec{
				BMC:            metal3.BMCDetails{Address: bmcAddress(h.BMC), CredentialsName: secret.Name},
				BootMACAddress: strings.ToLower(h.MACs[0]),
				BootMode:       metal3.UEFI,
			},
		}
		if err := c.Create(ctx, bmh); err != nil {
			return nil, fmt.Errorf("enrolling %s: %w", h.Name, err)
		}
		hosts = append(hosts, bmh)
	}
	return hosts, nil
}

// bmcAddress is a BareMetalHost's bmc.address for a lab BMC: Redfish
// with virtual media where the BMC serves it, IPMI otherwise (Metal3's
// schemes for Ironic's redfish-virtualmedia and ipmi hardware types).
func bmcAddress(b *lab.BMCInfo) string {
	if b.Address != "" {
		return redfish.AddressScheme + b.Address
	}
	return ipmi.AddressScheme + b.IPMI
}

// ExtensionTimeFlags are the in-place extension's waits, each its
// default in lab time converted once to wall time at s: the extension
// runs on the wall clock, the lab's hardware on its own.
//
// The extension looks at an update once per CAPI hook retry
// (RetryAfterSeconds: whole seconds of wall time), so a wait that spans
// several of its steps (a drain's evictions, a flash, the whole update)
// is kept to at least minStepsWait. With wallReboots the reboot is
// carried in wall time (baremetal-operator and Ironic act on it; a real
// VM reboots in real time, its agent reporting no shutdown phase) and
// the reboot retry keeps its default in wall time.
func ExtensionTimeFlags(s timescale.Scale, wallReboots bool) []string {
	steps := func(d time.Duration) string { return max(s.Real(d), minStepsWait).String() }
	retry := s.Real(inplace.DefaultRebootRetry)
	if wallReboots {
		retry = max(retry, inplace.DefaultRebootRetry)
	}
	return []string{
		"--health-grace=" + s.Real(inplace.DefaultHealthGrace).String(),
		"--reboot-retry=" + retry.String(),
		"--flash-timeout=" + steps(inplace.DefaultFlashTimeout),
		"--drain-timeout=" + steps(inplace.DefaultDrainTimeout),
		"--update-deadline=" + steps(inplace.DefaultDeadline),
		"--shutdown-timeout=" + steps(inplace.DefaultShutdownTimeout),
	}
}

// minStepsWait is the least wall time a wait spanning several of the
// extension's steps is given: ten of CAPI's shortest hook retries.
const minStepsWait = 10 * time.Second

// minPowerCheck is the shortest wall time between two looks at a steady
// host: each look reads the BMC (on a kept connection) and may write the
// host's status.
const minPowerCheck = 2 * time.Second

// ProviderTimeFlags are the inventory's waits, each in lab time (the
// power check baremetal-operator's minute) converted once to wall time
// at s. The timeouts cover wall-time work too (BMC sessions, the deploy
// ramdisk's heartbeats over HTTPS, the provider's polls), so they keep
// at least minStepsWait; the power check keeps minPowerCheck: it only
// bounds how soon a change made behind the provider's back shows.
func ProviderTimeFlags(s timescale.Scale) []string {
	steps := func(d time.Duration) string { return max(s.Real(d), minStepsWait).String() }
	return []string{
		BMCRetryDelayFlag(s),
		"--deploy-timeout=" + steps(host.DefaultDeployTimeout),
		"--reset-timeout=" + steps(host.DefaultResetTimeout),
		"--soft-power-off-timeout=" + steps(host.DefaultSoftPowerOffTimeout),
		"--power-check-interval=" + max(s.Real(host.MetalPowerCheck), minPowerCheck).String(),
	}
}

// BMCRetryDelayFlag is sushy's pause before a busy BMC is asked again, 3
// modelled seconds scaled to s, as the flag both of upgradelab's managers
// take.
func BMCRetryDelayFlag(s timescale.Scale) string {
	return "--bmc-retry-delay=" + s.Real(redfish.DefaultRetryDelay).String()
}
