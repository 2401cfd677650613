package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/upgradelab/upgradelab/e2e/bmo"
	"github.com/upgradelab/upgradelab/e2e/capm3"
	"github.com/upgradelab/upgradelab/e2e/ironic"
	"github.com/upgradelab/upgradelab/e2e/metal3src"
	"github.com/upgradelab/upgradelab/e2e/mgmt"
	"github.com/upgradelab/upgradelab/e2e/monitor"
	"github.com/upgradelab/upgradelab/e2e/provider"
	"github.com/upgradelab/upgradelab/e2e/reference"
	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/site"
)

// EnvOptions choose the lab and what runs beside CAPI's managers.
type EnvOptions struct {
	// Provider says what runs beside CAPI's managers; nil is the reference
	// provider (plus the extension when Extension is set), as the
	// integration tests use it. A provider without the lab gets no site.
	Provider *provider.Config
	// Strategy picks the Provider's managers (their onlyFor); Strategies,
	// when set, picks those of every strategy named (a fleet's plane).
	Strategy   scenario.Strategy
	Strategies []scenario.Strategy
	// RepoRoot finds go.mod (to build a Provider's managers from modules).
	RepoRoot string
	Lab      *lab.Definition
	// Dir holds the site's state, the binaries and the plane's logs.
	Dir string
	// PlaneDir, when set, holds the plane's logs instead (a kept plane's,
	// Planes).
	PlaneDir string
	Scale    timescale.Scale
	// Binaries built before (reference.Build); built into Dir when empty.
	ProviderBinary, ExtensionBinary string
	ProviderArgs                    []string
	// ProviderConfigDir replaces the reference provider's config folder.
	ProviderConfigDir string
	// Extension adds the in-place extension with ExtensionArgs.
	Extension     bool
	ExtensionArgs []string
	// RateLimitedReconciles, ExtraFeatureGates, ControllerManager: see
	// mgmt.Options.
	RateLimitedReconciles bool
	ExtraFeatureGates     []string
	// ManagerArgs: mgmt.Options.ManagerArgs.
	ManagerArgs       map[string][]string
	ControllerManager bool
	// Management and KindNodeImage: mgmt.Options' Target and KindNodeImage.
	Management    mgmt.Target
	KindNodeImage string
	// PlaneProgress receives the plane's own progress lines (mgmt.Options'
	// Progress): the run gives it for a kind plane, whose cluster and Pods
	// take tens of seconds.
	PlaneProgress io.Writer
}

// Env is a site, a management plane running CAPI's managers and the
// provider, and a namespace to work in.
type Env struct {
	// Site is nil for a provider that brings its own machines.
	Site      *site.Site
	Plane     *mgmt.Plane
	Client    client.Client
	Namespace string
	// Callback is the provider's callback URL (registration pools).
	Callback string
	// Ironic is the lab's Ironic when Metal3's inventory keeps the hosts
	// (a manager with reference metal3), nil otherwise.
	Ironic *ironic.Ironic
	// stops stop the site (and Ironic), planeStops the plane and the
	// shared cache: a run on a kept plane (Planes) stops only its own.
	stops, planeStops []func()
	// nsLabels are the labels of the Env's own namespace: those of every
	// extension it runs. labelsOf are each manager's (by name), and cfg
	// says which managers serve a strategy, for InNamespace.
	nsLabels map[string]string
	labelsOf map[string]map[string]string
	cfg      *provider.Config
	// watched is the cache of every namespace the runs sharing the Env
	// read their own from (InNamespace's copies point at the same one).
	watched *sharedCache
}

// sharedCache is one monitor.WatchedReader of every namespace, started
// by the first run that asks and stopped with the Env.
type sharedCache struct {
	once   sync.Once
	reader client.Reader
	err    error
	stop   context.CancelFunc
}

// Watched is the cache of every namespace of the plane, shared by the
// runs of the Env (Shared runs: a fleet's recorders read their
// namespace from one cache, not one each).
func (e *Env) Watched() (client.Reader, error) {
	w := e.watched
	w.once.Do(func() {
		var ctx context.Context
		ctx, w.stop = context.WithCancel(context.Background())
		w.reader, w.err = monitor.WatchedReader(ctx, e.Plane.RESTConfig, reference.Scheme(), "")
	})
	return w.reader, w.err
}

// StartEnv starts it all; Stop ends it.
func StartEnv(ctx context.Context, o EnvOptions) (_ *Env, err error) {
	e := &Env{watched: &sharedCache{}}
	e.planeStops = append(e.planeStops, func() {
		e.watched.once.Do(func() { e.watched.err = errors.New("the environment has stopped") })
		if e.watched.stop != nil {
			e.watched.stop()
		}
	})
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	progress := io.Discard
	if o.PlaneProgress != nil {
		progress = o.PlaneProgress
	}
	if err := o.Build(ctx, progress); err != nil {
		return nil, err
	}
	providers, err := e.managers(ctx, o)
	if err != nil {
		return nil, err
	}
	if e.Plane, err = mgmt.Start(ctx, mgmt.Options{ArtifactsDir: cmp.Or(o.PlaneDir, filepath.Join(o.Dir, "mgmt")), Providers: providers,
		RateLimitedReconciles: o.RateLimitedReconciles, ExtraFeatureGates: o.ExtraFeatureGates, ControllerManager: o.ControllerManager,
		ManagerArgs: o.ManagerArgs, Target: o.Management, KindNodeImage: o.KindNodeImage, Progress: o.PlaneProgress}); err != nil {
		return nil, err
	}
	e.planeStops = append(e.planeStops, e.Plane.Stop)
	if e.Ironic != nil {
		if err := e.ironicReady(); err != nil {
			return nil, err
		}
	}
	c, err := client.New(e.Plane.RESTConfig, client.Options{Scheme: reference.Scheme()})
	if err != nil {
		return nil, err
	}
	e.Client = patient(c)
	// The run's namespace carries the labels the extensions select their
	// namespaces by, as a user labels the namespaces an extension serves.
	e.nsLabels, e.labelsOf = map[string]string{}, map[string]map[string]string{}
	for _, p := range providers {
		e.labelsOf[p.Name] = p.ExtensionNamespaceLabels
		maps.Copy(e.nsLabels, p.ExtensionNamespaceLabels)
	}
	if len(o.Strategies) > 0 && o.Strategy != "" { // a kept plane's first run
		e.nsLabels = e.labelsFor(o.Strategy)
	}
	if e.Namespace, err = e.newNamespace(ctx, e.nsLabels); err != nil {
		return nil, err
	}
	return e, nil
}

// labelsFor are the namespace labels of the extensions that serve a
// strategy: on a plane that runs the managers of several, the in-place
// extension must not serve a scale-in cluster's namespace (CAPI would
// update its Machines in place, which persistent-data would report).
func (e *Env) labelsFor(strategy scenario.Strategy) map[string]string {
	labels := map[string]string{}
	if e.cfg != nil {
		for _, m := range e.cfg.ManagersFor(strategy) {
			maps.Copy(labels, e.labelsOf[m.Name])
		}
	}
	return labels
}

// newNamespace creates a namespace for a run.
func (e *Env) newNamespace(ctx context.Context, labels map[string]string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "scenario-", Labels: labels}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("a namespace for a run: %w", err)
	}
	return ns.Name, nil
}

// InNamespace is the Env seen from a new namespace of its own, for one
// of the runs that share it (Shared): same site, plane and provider;
// stopping it stops nothing. The namespace carries the labels of the
// extensions that serve the strategy only (labelsFor).
func (e *Env) InNamespace(ctx context.Context, strategy scenario.Strategy) (*Env, error) {
	labels := e.labelsFor(strategy)
	ns, err := e.newNamespace(ctx, labels)
	if err != nil {
		return nil, err
	}
	return &Env{Site: e.Site, Plane: e.Plane, Client: e.Client, Namespace: ns, Callback: e.Callback, Ironic: e.Ironic,
		nsLabels: labels, labelsOf: e.labelsOf, cfg: e.cfg, watched: e.watched}, nil
}

// Build makes every executable o's managers need that is not built yet,
// before any clock starts: the reference provider and extension (into
// Dir, unless a binary was given) and each of the provider config's
// managers built from a module or a checkout (provider.Config.Build, once
// per module version). Each build says so on progress. A suite or
// upgradelab run builds the managers before its first run; a run calls
// Build before its scenario's timeout starts, and StartEnv builds what is
// still missing.
func (o *EnvOptions) Build(ctx context.Context, progress io.Writer) error {
	cfg := o.config()
	for _, m := range managersFor(cfg, *o) {
		var err error
		switch m.Reference {
		case "baremetal", "inventory":
			o.ProviderBinary, err = builtOr(ctx, o.ProviderBinary, o.Dir, reference.ProviderCommand, progress)
		case "inplace":
			o.ExtensionBinary, err = builtOr(ctx, o.ExtensionBinary, o.Dir, reference.ExtensionCommand, progress)
		case "metal3":
			err = buildMetal3(ctx, o.RepoRoot, metal3src.BMO, progress)
		case "capm3":
			err = buildMetal3(ctx, o.RepoRoot, metal3src.CAPM3, progress)
		default:
			if !built(ctx, cfg, m, o.RepoRoot) {
				err = cfg.Build(ctx, m, o.RepoRoot, mgmt.CacheDir(), progress)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// buildMetal3 builds c unless its release is built already. A checkout
// goes to the build every time, which links it again only when its
// sources changed.
func buildMetal3(ctx context.Context, repoRoot string, c metal3src.Component, progress io.Writer) error {
	if c.Checkout() == "" {
		if _, err := metal3src.Built(ctx, repoRoot, c); err == nil {
			return nil
		}
	}
	fmt.Fprintf(progress, "building %s\n", c.Source())
	_, err := metal3src.Build(ctx, repoRoot, c)
	return err
}

// built says whether m's executable is there already.
func built(ctx context.Context, cfg *provider.Config, m provider.Manager, repoRoot string) bool {
	exe, err := cfg.Executable(ctx, m, repoRoot, mgmt.CacheDir())
	if err != nil || exe == "" {
		return false
	}
	_, err = os.Stat(exe)
	return err == nil
}

// config is the Provider config, or the reference provider's (with the
// extension when Extension is set), as the integration tests use it.
func (o *EnvOptions) config() *provider.Config {
	if o.Provider != nil {
		return o.Provider
	}
	cfg := &provider.Config{Lab: true, Managers: []provider.Manager{{Name: "baremetal", Reference: "baremetal"}}}
	if o.Extension {
		cfg.Managers = append(cfg.Managers, provider.Manager{Name: "inplace", Reference: "inplace"})
	}
	return cfg
}

// managers starts the site when the provider drives the lab, and
// describes the provider's managers (built by Build) to the plane.
func (e *Env) managers(ctx context.Context, o EnvOptions) (_ []mgmt.Provider, err error) {
	cfg := o.config()
	e.cfg = cfg
	if cfg.Lab {
		if e.Site, err = site.Start(ctx, site.Options{Lab: o.Lab, StateDir: filepath.Join(o.Dir, "site"), Scale: o.Scale}); err != nil {
			return nil, err
		}
		e.stops = append(e.stops, e.Site.Stop)
	}
	var out []mgmt.Provider
	for _, m := range managersFor(cfg, o) {
		var p mgmt.Provider
		switch m.Reference {
		case "baremetal", "inventory":
			p, err = e.referenceProvider(o, m.Name, m.Reference == "inventory")
		case "inplace":
			p, err = e.referenceExtension(o, m.Args)
		case "metal3":
			p, err = e.metal3Inventory(ctx, o, m.Name)
		case "capm3":
			p, err = metal3Provider(ctx, o, m)
		default:
			p, err = cfg.Process(ctx, m, o.RepoRoot, mgmt.CacheDir())
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// managersFor are the provider's managers for the strategy, or (a
// fleet) for every strategy named, each once.
func managersFor(cfg *provider.Config, o EnvOptions) []provider.Manager {
	if len(o.Strategies) == 0 {
		return cfg.ManagersFor(o.Strategy)
	}
	var out []provider.Manager
	for _, s := range o.Strategies {
		for _, m := range cfg.ManagersFor(s) {
			if !slices.ContainsFunc(out, func(have provider.Manager) bool { return have.Name == m.Name }) {
				out = append(out, m)
			}
		}
	}
	return out
}

// metal3Inventory launches the lab's Ironic (it starts beside the plane;
// StartEnv waits for it after), trusting the site's BMC CA as
// a site's trust store would, makes the lab's DHCP offer Ironic's iPXE
// entry script (ipmi:// hosts network-boot the deploy ramdisk, as a
// Metal3 site's dnsmasq points them at Ironic's boot.ipxe), and
// describes baremetal-operator, pointed at it with the lab's deploy
// ramdisk, to the plane.
func (e *Env) metal3Inventory(ctx context.Context, o EnvOptions, name string) (mgmt.Provider, error) {
	dir, err := metal3src.Built(ctx, o.RepoRoot, metal3src.BMO)
	if err != nil {
		return mgmt.Provider{}, err
	}
	if e.Ironic, err = ironic.Launch(ctx, ironic.Options{Dir: filepath.Join(o.Dir, "ironic"), TrustedCA: e.Site.CAFile}); err != nil {
		return mgmt.Provider{}, err
	}
	e.stops = append(e.stops, e.Ironic.Stop)
	for _, n := range e.Site.Lab.Definition().Spec.Networks {
		if err := e.Site.Lab.SetNetworkBoot(n.Name, e.Ironic.BootScriptURL()); err != nil {
			return mgmt.Provider{}, err
		}
	}
	return bmo.Provider(dir, name, e.Ironic.BMOURL, e.Site.Lab.ImageServer().ImageURL(reference.DeployImage)), nil
}

// ironicReady waits for the Ironic metal3Inventory launched and checks
// that baremetal-operator can drive its release.
func (e *Env) ironicReady() error {
	if err := e.Ironic.Wait(); err != nil {
		return err
	}
	return bmo.CheckIronic(e.Ironic.Version, e.Ironic.APIVersion)
}

// metal3Provider describes CAPM3, built by Build before the run's clock,
// to the plane.
func metal3Provider(ctx context.Context, o EnvOptions, m provider.Manager) (mgmt.Provider, error) {
	dir, err := metal3src.Built(ctx, o.RepoRoot, metal3src.CAPM3)
	if err != nil {
		return mgmt.Provider{}, err
	}
	return capm3.Provider(dir, m.Name, m.Args), nil
}

// referenceProvider is upgradelab's provider, whole or (inventory) its
// BareMetalHost inventory alone.
func (e *Env) referenceProvider(o EnvOptions, name string, inventory bool) (mgmt.Provider, error) {
	prov, callback, err := reference.Provider(e.Site, reference.Options{Binary: o.ProviderBinary, StateDir: o.Dir, Name: name, Inventory: inventory,
		Args: append(append([]string{"--poll=200ms"}, reference.ProviderTimeFlags(o.Scale)...), o.ProviderArgs...), ConfigDir: o.ProviderConfigDir})
	e.Callback = callback
	return prov, err
}

func (e *Env) referenceExtension(o EnvOptions, args []string) (mgmt.Provider, error) {
	// BMO and Ironic, or a real VM, carry the reboot in wall time.
	wallReboots := o.Provider != nil && o.Provider.Metal3Inventory() || o.Lab != nil && o.Lab.Backend() != lab.BackendTest
	flags := append([]string{reference.BMCRetryDelayFlag(o.Scale)}, reference.ExtensionTimeFlags(o.Scale, wallReboots)...)
	args = append(append(flags, args...), o.ExtensionArgs...)
	return reference.Extension(e.Site, o.ExtensionBinary, filepath.Join(o.Dir, "extension-certs"), args...)
}

// builtOr is binary when the suite built it already, or command built
// into dir.
func builtOr(ctx context.Context, binary, dir, command string, progress io.Writer) (string, error) {
	if binary != "" {
		return binary, nil
	}
	fmt.Fprintf(progress, "building %s into %s\n", command, dir)
	return reference.Build(ctx, dir, command)
}

// Stop ends the plane and the site (on a kept plane, the site only).
func (e *Env) Stop() {
	for _, stops := range [][]func(){e.planeStops, e.stops} {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	e.stops, e.planeStops = nil, nil
}

// Workload is a client of a workload cluster through the kubeconfig CAPI
// wrote for it, read through from (nil: straight from the API server).
// A run asks every poll until the kubeconfig is there, so it reads it
// from its watched cache: a fleet's wait loops and recorders asking the
// API server would be tens of GETs a second answered 404 while the
// clusters provision.
func (e *Env) Workload(ctx context.Context, from client.Reader, cluster string) (client.Client, error) {
	if from == nil {
		from = e.Client
	}
	secret := &corev1.Secret{}
	if err := from.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: cluster + "-kubeconfig"}, secret); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig of %s: %w", cluster, err)
	}
	// With watches: the recorder watches what it reads (monitor/wake.go).
	return client.NewWithWatch(cfg, client.Options{})
}
