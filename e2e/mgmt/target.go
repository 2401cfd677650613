package mgmt

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// kindName is what kind accepts as a cluster name (a container name's
// prefix and a DNS label).
var kindName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,40}$`)

// TargetKind names where the management plane's API server comes from.
type TargetKind string

const (
	// Embedded starts kube-apiserver and etcd on loopback through envtest:
	// nothing but this machine is needed.
	Embedded TargetKind = "embedded"
	// ExistingCluster uses the API server of a kubeconfig the user names;
	// the harness installs the CRDs and runs the managers out of cluster.
	ExistingCluster TargetKind = "kubeconfig"
	// KindCluster creates (or reuses) a kind cluster through kind's Go
	// library and runs the managers in it as Deployments (incluster.go);
	// the lab stays on the host (e2e/mgmt/kind).
	KindCluster TargetKind = "kind"
)

// DefaultKindCluster names the kind cluster of a plain "kind" target.
const DefaultKindCluster = "upgradelab"

// Target is a parsed --management value.
type Target struct {
	Kind TargetKind
	// Kubeconfig is the file of an ExistingCluster target.
	Kubeconfig string
	// Cluster is a KindCluster target's cluster name.
	Cluster string
}

func (t Target) String() string {
	if t.Kind == ExistingCluster {
		return string(ExistingCluster) + "=" + t.Kubeconfig
	}
	if t.Kind == KindCluster && t.Cluster != DefaultKindCluster {
		return string(KindCluster) + "=" + t.Cluster
	}
	return string(t.Kind)
}

// ParseTarget reads the --management flag: "embedded" (also the empty
// string), "kubeconfig=PATH" with a file that exists, or "kind" /
// "kind=NAME" (cluster upgradelab by default).
func ParseTarget(value string) (Target, error) {
	switch {
	case value == "" || value == string(Embedded):
		return Target{Kind: Embedded}, nil
	case strings.HasPrefix(value, string(ExistingCluster)+"="):
		path := strings.TrimPrefix(value, string(ExistingCluster)+"=")
		if path == "" {
			return Target{}, fmt.Errorf("--management %q: kubeconfig= needs a file path, e.g. kubeconfig=$HOME/.kube/config", value)
		}
		if _, err := os.Stat(path); err != nil {
			return Target{}, fmt.Errorf("--management %q: kubeconfig file: %w", value, err)
		}
		return Target{Kind: ExistingCluster, Kubeconfig: path}, nil
	case value == string(KindCluster):
		return Target{Kind: KindCluster, Cluster: DefaultKindCluster}, nil
	case strings.HasPrefix(value, string(KindCluster)+"="):
		name := strings.TrimPrefix(value, string(KindCluster)+"=")
		if !kindName.MatchString(name) {
			return Target{}, fmt.Errorf("--management %q: kind cluster name %q: use lower-case letters, digits and '-', starting with a letter", value, name)
		}
		return Target{Kind: KindCluster, Cluster: name}, nil
	default:
		return Target{}, fmt.Errorf("--management %q: unknown value; use %q (the default), %q or %q", value, Embedded, "kubeconfig=PATH", "kind[=NAME]")
	}
}
