package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/providers/baremetal/callback"
	"github.com/upgradelab/upgradelab/providers/baremetal/cluster"
	"github.com/upgradelab/upgradelab/providers/baremetal/host"
	"github.com/upgradelab/upgradelab/providers/baremetal/hostagent"
	"github.com/upgradelab/upgradelab/providers/baremetal/machine"
	"github.com/upgradelab/upgradelab/providers/baremetal/netboot"
	"github.com/upgradelab/upgradelab/providers/baremetal/redfish"
	"github.com/upgradelab/upgradelab/providers/baremetal/webhooks"
)

type options struct {
	webhookCertDir, healthAddr, metricsAddr string
	webhookPort                             int
	leaderElect, insecureDiagnostics        bool
	syncPeriod                              time.Duration

	controllers                                                        string
	caFile, certDir, callbackAddr, callbackURL, deployImageURL         string
	poll, deployTimeout, resetTimeout, softPowerOffTimeout, powerCheck time.Duration
	netbootAddr, ipmitool                                              string
	qps                                                                float64
	burst, hostConcurrency, machineConcurrency                         int
	bmcRetries                                                         int
	bmcRetryDelay                                                      time.Duration
}

func main() {
	var o options
	fs := flag.CommandLine
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "webhook server port")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "folder with the webhook's tls.crt and tls.key")
	fs.StringVar(&o.healthAddr, "health-addr", ":9440", "address of /healthz and /readyz")
	fs.StringVar(&o.metricsAddr, "diagnostics-address", ":8443", "address of /metrics (0 turns it off)")
	fs.BoolVar(&o.insecureDiagnostics, "insecure-diagnostics", false, "serve /metrics over plain HTTP")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "use leader election (off: one replica)")
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Minute, "resync of every object")
	fs.StringVar(&o.caFile, "ca-file", "", "CA that signs the BMCs' and host agents' certificates (required)")
	fs.StringVar(&o.certDir, "cert-dir", "", "folder with tls.crt and tls.key: the callback endpoint's serving certificate and the client certificate shown to host agents (required)")
	fs.StringVar(&o.callbackAddr, "callback-addr", "127.0.0.1:0", "where hosts post heartbeats and registrations")
	fs.StringVar(&o.callbackURL, "callback-url", "", "the callback endpoint as hosts reach it (default https://<bound callback address>)")
	fs.StringVar(&o.deployImageURL, "deploy-image-url", "", "media URL of the deploy ramdisk (required)")
	fs.StringVar(&o.netbootAddr, "netboot-addr", "", "where the boot server for ipmi:// hosts listens (plain HTTP; the site's DHCP offers http://ADDR/boot); empty: no boot server, ipmi:// hosts cannot be deployed")
	fs.IntVar(&o.bmcRetries, "bmc-retries", redfish.DefaultRetries, "how often a Redfish read answered with 5xx is sent again (sushy's server_side_retries); actions are sent once")
	fs.DurationVar(&o.bmcRetryDelay, "bmc-retry-delay", redfish.DefaultRetryDelay, "the pause before a Redfish read is sent again (sushy's server_side_retries_delay)")
	fs.StringVar(&o.ipmitool, "ipmitool", "ipmitool", "ipmitool binary for ipmi:// hosts (Debian's package ipmitool)")
	fs.StringVar(&o.controllers, "controllers", partHosts+","+partMachines, "the parts to run: hosts (the BareMetalHost inventory: host controller and callback endpoint), machines (the CAPI infrastructure controllers and webhooks), or both")
	fs.Float64Var(&o.qps, "kube-api-qps", 20, "the client's requests per second to the API server (CAPI providers' flag and default)")
	fs.IntVar(&o.burst, "kube-api-burst", 30, "the client's burst to the API server (CAPI providers' flag and default)")
	fs.IntVar(&o.machineConcurrency, "baremetalmachine-concurrency", machine.DefaultConcurrency, "BareMetalMachines reconciled at once")
	fs.IntVar(&o.hostConcurrency, "host-concurrency", 0, "BareMetalHosts reconciled at once (0: baremetal-operator's default, the CPUs, at least 2, at most 8)")
	fs.DurationVar(&o.poll, "poll", 500*time.Millisecond, "how often a host or machine waiting on hardware is looked at")
	fs.DurationVar(&o.deployTimeout, "deploy-timeout", host.DefaultDeployTimeout, "deploy ramdisk boot timeout before booting it again")
	fs.DurationVar(&o.resetTimeout, "reset-timeout", host.DefaultResetTimeout, "reset timeout before asking again")
	fs.DurationVar(&o.powerCheck, "power-check-interval", host.DefaultPowerCheck, "how often an available or provisioned host's power and BMC are read again (baremetal-operator: 1m)")
	fs.DurationVar(&o.softPowerOffTimeout, "soft-power-off-timeout", host.DefaultSoftPowerOffTimeout, "how long a graceful shutdown may take before the next power-off is hard (Ironic's soft_power_off_timeout)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "upgradelab-baremetal:", err)
		os.Exit(1)
	}
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme, metal3.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

func run(o options) error {
	parts := map[string]bool{}
	for _, c := range strings.Split(o.controllers, ",") {
		switch c = strings.TrimSpace(c); c {
		case partHosts, partMachines:
			parts[c] = true
		default:
			return fmt.Errorf("--controllers: %q is not %s or %s", c, partHosts, partMachines)
		}
	}
	// controller-runtime owns --kubeconfig (then $KUBECONFIG, in-cluster).
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	restConfig.QPS, restConfig.Burst = float32(o.qps), o.burst
	metricsOpts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: !o.insecureDiagnostics}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme(),
		LeaderElection:         o.leaderElect,
		LeaderElectionID:       "upgradelab-baremetal-leader-" + strings.ReplaceAll(o.controllers, ",", "-"),
		HealthProbeBindAddress: o.healthAddr,
		Metrics:                metricsOpts,
		Cache:                  cache.Options{SyncPeriod: &o.syncPeriod},
		WebhookServer:          webhook.NewServer(webhook.Options{Port: o.webhookPort, CertDir: o.webhookCertDir}),
	})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if parts[partHosts] {
		if err := setupInventory(mgr, o); err != nil {
			return err
		}
	}
	if parts[partMachines] {
		if err := setupMachines(ctx, mgr, o); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if parts[partMachines] {
		if err := mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	} else if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// The parts --controllers picks.
const (
	// partHosts is the BareMetalHost inventory: the host controller
	// (what baremetal-operator and Ironic do) and the endpoint hosts call.
	// It alone reaches hardware (BMCs, host agents).
	partHosts = "hosts"
	// partMachines is the CAPI infrastructure provider: the
	// BareMetalMachine and BareMetalCluster controllers and their
	// webhooks. It only consumes BareMetalHosts, as CAPM3 does.
	partMachines = "machines"
)

// setupInventory adds the BareMetalHost controller and the callback
// endpoint.
func setupInventory(mgr ctrl.Manager, o options) error {
	if o.caFile == "" || o.certDir == "" || o.deployImageURL == "" {
		return fmt.Errorf("the hosts controllers need --ca-file, --cert-dir and --deploy-image-url")
	}
	tlsClient, pair, err := hostagent.SiteTLS(o.caFile, o.certDir)
	if err != nil {
		return err
	}
	httpClient := hostagent.HTTPClient(tlsClient, 5*time.Minute)
	heartbeats := &callback.Heartbeats{}
	listener, err := net.Listen("tcp", o.callbackAddr)
	if err != nil {
		return fmt.Errorf("--callback-addr: %w", err)
	}
	if o.callbackURL == "" {
		o.callbackURL = "https://" + listener.Addr().String()
	}
	ctrl.Log.Info("callback endpoint", "url", o.callbackURL)
	if err := mgr.Add(&callback.Server{
		Listener: listener, Client: mgr.GetClient(), Heartbeats: heartbeats,
		TLS: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}); err != nil {
		return err
	}
	var boot *netboot.Server
	if o.netbootAddr != "" {
		l, err := net.Listen("tcp", o.netbootAddr)
		if err != nil {
			return fmt.Errorf("--netboot-addr: %w", err)
		}
		boot = netboot.New()
		ctrl.Log.Info("boot server", "url", "http://"+l.Addr().String()+netboot.Path)
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return boot.Serve(ctx, l) })); err != nil {
			return err
		}
	}
	hosts := &host.Reconciler{
		IPMITool: o.ipmitool, NetBoot: boot,
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), BMCHTTP: redfish.Retrying(httpClient, o.bmcRetries, o.bmcRetryDelay), AgentHTTP: httpClient, Heartbeats: heartbeats, Recorder: mgr.GetEventRecorder("baremetalhost-controller"),
		DeployImageURL: o.deployImageURL, CallbackURL: o.callbackURL,
		Poll: o.poll, DeployTimeout: o.deployTimeout, ResetTimeout: o.resetTimeout, SoftPowerOffTimeout: o.softPowerOffTimeout, PowerCheck: o.powerCheck,
		Concurrency: o.hostConcurrency,
	}
	return hosts.SetupWithManager(mgr)
}

// setupMachines adds the infrastructure controllers and their webhooks.
func setupMachines(ctx context.Context, mgr ctrl.Manager, o options) error {
	if err := (&machine.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Poll: o.poll, Concurrency: o.machineConcurrency}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&cluster.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	return webhooks.Setup(mgr)
}
