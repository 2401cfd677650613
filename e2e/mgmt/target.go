package mgmt

import (
	"fmt"
	"os"
	"strings"
)

// TargetKind names where the management plane's API server comes from.
type TargetKind string

const (
	// Embedded starts kube-apiserver and etcd on loopback through envtest:
	// nothing but this machine is needed.
	Embedded TargetKind = "embedded"
	// ExistingCluster uses the API server of a kubeconfig the user names;
	// the harness installs the CRDs and runs the managers out of cluster.
	ExistingCluster TargetKind = "kubeconfig"
)

// Target is a parsed --management value.
type Target struct {
	Kind TargetKind
	// Kubeconfig is the file of an ExistingCluster target.
	Kubeconfig string
}

func (t Target) String() string {
	if t.Kind == ExistingCluster {
		return string(ExistingCluster) + "=" + t.Kubeconfig
	}
	return string(t.Kind)
}

// ParseTarget reads the --management flag: "embedded" (also the empty
// string) or "kubeconfig=PATH" with a file that exists.
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
	default:
		return Target{}, fmt.Errorf("--management %q: unknown value; use %q (the default) or %q", value, Embedded, "kubeconfig=PATH")
	}
}
