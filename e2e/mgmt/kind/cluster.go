package kind

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

// config is the cluster every MANAGEMENT=kind run creates: one node,
// kind's own CNI off (the node image built by
// scripts/build-kind-node-image.sh carries a bridge CNI configuration, and
// one node needs no more), the API server published on the host's
// loopback only.
const config = `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  apiServerAddress: 127.0.0.1
  disableDefaultCNI: true
nodes:
- role: control-plane
`

// Cluster is a kind cluster driven through kind's Go library, as
// CAPI's own e2e (test/framework/bootstrap) drives it.
type Cluster struct {
	name     string
	provider *cluster.Provider
	node     nodes.Node
	// network is the lab's address translation, once connected.
	network *network
}

// Start creates the cluster named name from the node image image, or reuses it when
// it exists, and writes its kubeconfig to kubeconfig. kind's own output
// goes to logPath; an error names the step and that log.
func Start(name, image, kubeconfig, logPath string, progress io.Writer) (*Cluster, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	k := &Cluster{name: name, provider: cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(&logger{w: logFile}))}
	fail := func(step string, err error) error {
		return fmt.Errorf("kind cluster %s: step %q failed: %w (log: %s)", k.name, step, err, logPath)
	}
	existing, err := k.provider.List()
	if err != nil {
		return nil, fail("list clusters (is a Docker engine running? scripts/container-runtime.sh starts one)", err)
	}
	if slices.Contains(existing, k.name) {
		fmt.Fprintf(progress, "mgmt: reusing kind cluster %s\n", k.name)
	} else {
		if image == "" {
			return nil, fail("create", errors.New("no node image: give one (KIND_NODE_IMAGE, --kind-node-image; `scripts/build-kind-node-image.sh` builds one offline)"))
		}
		fmt.Fprintf(progress, "mgmt: creating kind cluster %s from %s\n", k.name, image)
		begin := time.Now()
		if err := k.provider.Create(k.name, cluster.CreateWithNodeImage(image), cluster.CreateWithRawConfig([]byte(config)),
			cluster.CreateWithWaitForReady(3*time.Minute), cluster.CreateWithKubeconfigPath(kubeconfig),
			cluster.CreateWithDisplayUsage(false), cluster.CreateWithDisplaySalutation(false)); err != nil {
			return nil, fail("create", err)
		}
		fmt.Fprintf(progress, "mgmt: kind cluster %s created in %s\n", k.name, time.Since(begin).Round(time.Second))
	}
	cfg, err := k.provider.KubeConfig(k.name, false)
	if err != nil {
		return nil, fail("kubeconfig", err)
	}
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	ns, err := k.provider.ListInternalNodes(k.name)
	if err != nil || len(ns) == 0 {
		return nil, fail("list nodes", errors.Join(err, errors.New("no node")))
	}
	k.node = ns[0]
	return k, nil
}

// Of says which kind cluster a kubeconfig's current context is (kind
// names its contexts kind-NAME) when that cluster exists here: a user's
// own kind cluster given as kubeconfig=PATH, whose API server cannot
// reach the host's loopback, gets the managers as Pods too.
func Of(kubeconfig string) (string, bool) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", false
	}
	name, ok := strings.CutPrefix(cfg.CurrentContext, "kind-")
	if !ok {
		return "", false
	}
	existing, err := cluster.NewProvider(cluster.ProviderWithDocker()).List()
	if err != nil || !slices.Contains(existing, name) {
		return "", false
	}
	return name, true
}

// Attach uses an existing kind cluster without touching its
// kubeconfig.
func Attach(name string) (*Cluster, error) {
	k := &Cluster{name: name, provider: cluster.NewProvider(cluster.ProviderWithDocker())}
	ns, err := k.provider.ListInternalNodes(name)
	if err != nil || len(ns) == 0 {
		return nil, fmt.Errorf("kind cluster %s: no node: %s", name, fmt.Sprint(err))
	}
	k.node = ns[0]
	return k, nil
}

// Node names the cluster's node (its container).
func (k *Cluster) Node() string { return k.node.String() }

// Run runs a command on the node and returns its output.
func (k *Cluster) Run(name string, args ...string) (string, error) {
	var out bytes.Buffer
	err := k.node.Command(name, args...).SetStdout(&out).SetStderr(&out).Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s on node %s: %w: %s", name, strings.Join(args, " "), k.node.String(), err, out.String())
	}
	return out.String(), nil
}

// Delete deletes the kind cluster named name (`upgradelab mgmt down`).
func Delete(name string) error {
	return cluster.NewProvider(cluster.ProviderWithDocker()).Delete(name, filepath.Join(os.TempDir(), "upgradelab-kind-delete.kubeconfig"))
}

// logger writes kind's messages to the plane's kind.log.
type logger struct{ w io.Writer }

func (l *logger) Warn(message string)                      { fmt.Fprintln(l.w, "WARN", message) }
func (l *logger) Warnf(format string, args ...interface{}) { l.Warn(fmt.Sprintf(format, args...)) }
func (l *logger) Error(message string)                     { fmt.Fprintln(l.w, "ERROR", message) }
func (l *logger) Errorf(format string, args ...interface{}) {
	l.Error(fmt.Sprintf(format, args...))
}
func (l *logger) V(kindlog.Level) kindlog.InfoLogger       { return l }
func (l *logger) Info(message string)                      { fmt.Fprintln(l.w, message) }
func (l *logger) Infof(format string, args ...interface{}) { l.Info(fmt.Sprintf(format, args...)) }
func (l *logger) Enabled() bool                            { return true }
