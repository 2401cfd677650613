package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/providers/baremetal/hostagent"
	"github.com/upgradelab/upgradelab/providers/baremetal/redfish"
	"github.com/upgradelab/upgradelab/providers/inplace"
	"github.com/upgradelab/upgradelab/providers/inplace/singlenode"
)

type options struct {
	webhookPort                         int
	webhookCertDir, healthAddr, metrics string
	leaderElectionNamespace             string
	leaderElect, insecureDiagnostics    bool
	syncPeriod, healthGrace, retry      time.Duration
	flashTimeout, drainTimeout          time.Duration
	deadline                            time.Duration
	rebootRetry, shutdownTimeout        time.Duration
	caFile, certDir                     string
	singleNodeConcurrency, bmcRetries   int
	bmcRetryDelay                       time.Duration
	powerThroughHost                    bool
}

// leaderElectionID names the lease the replicas compete for. Only the
// single-node controller needs a leader: the hooks' state lives on the
// BareMetalMachine and the host (its agent reports a write under way), so
// any replica can answer any call.
const leaderElectionID = "upgradelab-inplace-singlenode"

func main() {
	var o options
	fs := flag.CommandLine
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the runtime extension server")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "folder with the server's tls.crt and tls.key")
	fs.StringVar(&o.healthAddr, "health-addr", ":9440", "address of /healthz and /readyz")
	fs.StringVar(&o.metrics, "diagnostics-address", ":8443", "address of /metrics (0 turns it off)")
	fs.BoolVar(&o.insecureDiagnostics, "insecure-diagnostics", false, "serve /metrics over plain HTTP")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect one replica to run the single-node controller (every replica serves the hooks and the webhook); needed with more than one replica")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the Pod's own; required outside a cluster)")
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Minute, "accepted for symmetry with CAPI's managers")
	fs.DurationVar(&o.healthGrace, "health-grace", inplace.DefaultHealthGrace, "how long a freshly booted slot may fail its health check before the update fails")
	fs.DurationVar(&o.flashTimeout, "flash-timeout", inplace.DefaultFlashTimeout, "how long a staged NIC flash may take to show on the NIC before the update fails")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", inplace.DefaultDrainTimeout, "how long a node's drain may wait for PodDisruptionBudgets to allow its pods' eviction before the update fails (0: forever)")
	fs.DurationVar(&o.deadline, "update-deadline", inplace.DefaultDeadline, "how long a whole in-place update may take, from its first step, before it fails (0: no deadline)")
	fs.DurationVar(&o.rebootRetry, "reboot-retry", inplace.DefaultRebootRetry, "how long the old OS may go on running, not shutting down, after a reboot was asked for before the host is reset hard")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", inplace.DefaultShutdownTimeout, "how long a host whose agent reports it shutting down is left to finish before it is reset hard")
	fs.DurationVar(&o.retry, "retry", time.Second, "RetryAfterSeconds of an update in progress (at least 1s)")
	fs.IntVar(&o.singleNodeConcurrency, "singlenode-concurrency", singlenode.DefaultConcurrency, "how many single-node KubeadmControlPlanes are reconciled at once")
	fs.IntVar(&o.bmcRetries, "bmc-retries", redfish.DefaultRetries, "how often a Redfish read answered with 5xx is sent again (sushy's server_side_retries); actions are sent once")
	fs.DurationVar(&o.bmcRetryDelay, "bmc-retry-delay", redfish.DefaultRetryDelay, "the pause before a Redfish read is sent again (sushy's server_side_retries_delay)")
	fs.BoolVar(&o.powerThroughHost, "power-through-host", false, "reboot hosts through their BareMetalHost (baremetal-operator's reboot annotation), not their BMC: for hosts baremetal-operator and Ironic keep")
	fs.StringVar(&o.caFile, "ca-file", "", "CA of the BMCs' and host agents' certificates (required)")
	fs.StringVar(&o.certDir, "cert-dir", "", "folder with tls.crt and tls.key, the client certificate shown to host agents (required)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	flag.Parse()
	// The process ID tells replicas apart where their logs are merged.
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)).WithValues("pid", os.Getpid()))
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "upgradelab-inplace:", err)
		os.Exit(1)
	}
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, bootstrapv1.AddToScheme, controlplanev1.AddToScheme, infrav1.AddToScheme, metal3.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

func run(o options) error {
	if o.caFile == "" || o.certDir == "" {
		return fmt.Errorf("--ca-file and --cert-dir are required")
	}
	tlsClient, _, err := hostagent.SiteTLS(o.caFile, o.certDir)
	if err != nil {
		return err
	}
	httpClient := hostagent.HTTPClient(tlsClient, 30*time.Minute)

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	s := scheme()
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: s, HealthProbeBindAddress: o.healthAddr,
		Metrics:          metricsserver.Options{BindAddress: o.metrics, SecureServing: !o.insecureDiagnostics},
		LeaderElection:   o.leaderElect,
		LeaderElectionID: leaderElectionID, LeaderElectionNamespace: o.leaderElectionNamespace,
		// A replica that stops leading ends, so a new leader never runs
		// beside a former one that still thinks it leads.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return err
	}
	direct, err := client.New(restConfig, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return err
	}
	srv, err := server.New(server.Options{Port: o.webhookPort, CertDir: o.webhookCertDir, Catalog: catalog})
	if err != nil {
		return err
	}
	workloads := &inplace.Workloads{Management: direct, Scheme: s}
	updater := &inplace.Updater{
		Client: direct, AgentHTTP: httpClient, BMCHTTP: redfish.Retrying(httpClient, o.bmcRetries, o.bmcRetryDelay),
		ReadManifest: manifestReader(httpClient), ReadFirmware: firmwareReader(httpClient),
		Workloads:   workloads,
		HealthGrace: o.healthGrace, FlashTimeout: o.flashTimeout, DrainTimeout: o.drainTimeout, Retry: o.retry, Deadline: o.deadline,
		RebootRetry: o.rebootRetry, ShutdownTimeout: o.shutdownTimeout,
		PowerThroughHost: o.powerThroughHost,
	}
	handlers := inplace.NewHandlers(serializer.NewCodecFactory(s).UniversalDecoder(infrav1.GroupVersion, bootstrapv1.GroupVersion), updater)
	if err := (&inplace.RevertWatcher{Client: mgr.GetClient(), Updater: updater}).SetupWithManager(mgr); err != nil {
		return err
	}
	for _, h := range []server.ExtensionHandler{
		{Hook: runtimehooksv1.CanUpdateMachine, Name: "can-update-machine", HandlerFunc: handlers.DoCanUpdateMachine},
		{Hook: runtimehooksv1.CanUpdateMachineSet, Name: "can-update-machineset", HandlerFunc: handlers.DoCanUpdateMachineSet},
		{Hook: runtimehooksv1.UpdateMachine, Name: "update-machine", HandlerFunc: handlers.DoUpdateMachine},
	} {
		if err := srv.AddExtensionHandler(h); err != nil {
			return err
		}
	}
	if err := mgr.Add(srv); err != nil {
		return err
	}
	srv.Register(singlenode.WebhookPath, &admission.Webhook{Handler: &singlenode.PauseOnChange{Decoder: admission.NewDecoder(s)}})
	if err := (&singlenode.Reconciler{
		Client: mgr.GetClient(), Workloads: workloads,
		CanUpdate: handlers.DoCanUpdateMachine, Matches: inplace.MatchesAfterPatches,
		Recorder: mgr.GetEventRecorder("upgradelab-singlenode"), Concurrency: o.singleNodeConcurrency,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// manifestReader reads an image bundle's manifest from the head of the
// image (imagev1.PayloadBytes at most).
func manifestReader(c *http.Client) inplace.ManifestReader {
	return func(ctx context.Context, url string) (imagev1.Manifest, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return imagev1.Manifest{}, err
		}
		req.Header.Set("Range", fmt.Sprintf("bytes=0-%d", imagev1.PayloadBytes-1))
		resp, err := c.Do(req)
		if err != nil {
			return imagev1.Manifest{}, err
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return imagev1.Manifest{}, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		head, err := io.ReadAll(io.LimitReader(resp.Body, imagev1.PayloadBytes))
		if err != nil {
			return imagev1.Manifest{}, err
		}
		return imagev1.ReadManifest(head)
	}
}

// firmwareReader reads a firmware package's descriptor (JSON).
func firmwareReader(c *http.Client) inplace.FirmwareReader {
	return func(ctx context.Context, url string) (imagev1.NVMImage, error) {
		var img imagev1.NVMImage
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return img, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return img, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return img, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&img); err != nil {
			return img, fmt.Errorf("GET %s: not a firmware package descriptor: %w", url, err)
		}
		if img.Firmware == "" {
			return img, fmt.Errorf("GET %s: the package names no firmware version", url)
		}
		return img, nil
	}
}
