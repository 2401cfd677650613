package rehearsal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Export is a site's inventory as kubectl wrote it (docs/REHEARSAL.md):
// the management cluster's objects in the folder's files, and each
// workload cluster's applications under workload/NAMESPACE/CLUSTER.yaml.
// Secrets are never read: one in the export is listed in Skipped, its
// data untouched.
type Export struct {
	Hosts         []metal3.BareMetalHost
	Firmware      []metal3.HostFirmwareComponents
	Clusters      []clusterv1.Cluster
	ControlPlanes []controlplanev1.KubeadmControlPlane
	Deployments   []clusterv1.MachineDeployment
	Machines      []clusterv1.Machine
	Classes       []clusterv1.ClusterClass
	// Apps are each workload cluster's Deployments and budgets, by
	// "NAMESPACE/CLUSTER".
	Apps map[string]*WorkloadApps
	// Skipped are the objects the export holds that a rehearsal does not
	// read, each with the reason.
	Skipped []Unmapped
}

// WorkloadApps are one workload cluster's applications.
type WorkloadApps struct {
	Deployments []appsv1.Deployment
	Budgets     []policyv1.PodDisruptionBudget
}

// Unmapped is something of the site the rehearsal leaves out, and why.
type Unmapped struct {
	// Object is "Kind NAMESPACE/NAME" (or a file); Field the field.
	Object string `json:"object"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

func (u Unmapped) String() string {
	if u.Field != "" {
		return fmt.Sprintf("%s: %s: %s", u.Object, u.Field, u.Reason)
	}
	return fmt.Sprintf("%s: %s", u.Object, u.Reason)
}

// Supported are the API versions an export's objects may have, by kind:
// those of the Metal3 and CAPI releases the lab runs (CAPI v1.14 serves
// v1beta2), and Kubernetes' own.
var Supported = map[string][]string{
	"BareMetalHost":          {"metal3.io/v1alpha1"},
	"HostFirmwareComponents": {"metal3.io/v1alpha1"},
	"Cluster":                {"cluster.x-k8s.io/v1beta2"},
	"MachineDeployment":      {"cluster.x-k8s.io/v1beta2"},
	"Machine":                {"cluster.x-k8s.io/v1beta2"},
	"ClusterClass":           {"cluster.x-k8s.io/v1beta2"},
	"KubeadmControlPlane":    {"controlplane.cluster.x-k8s.io/v1beta2"},
	"Deployment":             {"apps/v1"},
	"PodDisruptionBudget":    {"policy/v1"},
}

// workloadKinds are read from a workload cluster's files only.
var workloadKinds = []string{"Deployment", "PodDisruptionBudget"}

// Read reads an export folder. An object of a kind the rehearsal reads
// in an API version it does not is an error naming the file, the object
// and the versions supported; a file that does not parse is an error
// naming the file.
func Read(dir string) (*Export, error) {
	x := &Export{Apps: map[string]*WorkloadApps{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isManifest(path) {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		cluster := workloadOf(rel)
		return readFile(path, rel, func(where string, raw []byte, kind, apiVersion string) error {
			return x.add(where, raw, kind, apiVersion, cluster)
		})
	})
	if err != nil {
		return nil, err
	}
	if len(x.Hosts) == 0 {
		return nil, fmt.Errorf("%s: no BareMetalHost in the export (docs/REHEARSAL.md gives the kubectl command)", dir)
	}
	return x, nil
}

func isManifest(path string) bool {
	ext := filepath.Ext(path)
	return ext == ".yaml" || ext == ".yml" || ext == ".json"
}

// workloadOf is "NAMESPACE/CLUSTER" for a file under
// workload/NAMESPACE/CLUSTER(.yaml or /...), "" for the management
// cluster's files.
func workloadOf(rel string) string {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) < 3 || parts[0] != "workload" {
		return ""
	}
	return parts[1] + "/" + strings.TrimSuffix(parts[2], filepath.Ext(parts[2]))
}

// typeMeta is what Read looks at before it decodes an object.
type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// readFile calls each with every object of a file: the documents of a
// YAML stream, and the items of a List. Messages name the file as name.
func readFile(path, name string, each func(where string, raw []byte, kind, apiVersion string) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return readObjects(data, name, each)
}

// readObjects is readFile of a file's bytes, path its name.
func readObjects(data []byte, path string, each func(where string, raw []byte, kind, apiVersion string) error) error {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 0; ; doc++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc+1, err)
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var tm typeMeta
		if err := json.Unmarshal(raw, &tm); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc+1, err)
		}
		if strings.HasSuffix(tm.Kind, "List") {
			for i, item := range tm.Items {
				var it typeMeta
				if err := json.Unmarshal(item, &it); err != nil {
					return fmt.Errorf("%s: items[%d]: %w", path, i, err)
				}
				if err := each(fmt.Sprintf("%s: items[%d] (%s)", path, i, objectName(it)), item, it.Kind, it.APIVersion); err != nil {
					return err
				}
			}
			continue
		}
		if err := each(fmt.Sprintf("%s: document %d (%s)", path, doc+1, objectName(tm)), raw, tm.Kind, tm.APIVersion); err != nil {
			return err
		}
	}
}

func objectName(tm typeMeta) string {
	if tm.Metadata.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", tm.Kind, tm.Metadata.Namespace, tm.Metadata.Name)
	}
	return tm.Kind + " " + tm.Metadata.Name
}

// add decodes one object into the export.
func (x *Export) add(where string, raw []byte, kind, apiVersion, cluster string) error {
	if kind == "Secret" {
		x.Skipped = append(x.Skipped, Unmapped{Object: where, Reason: "Secrets are never read; the lab generates its BMC credentials"})
		return nil
	}
	versions, known := Supported[kind]
	if !known || slices.Contains(workloadKinds, kind) != (cluster != "") {
		x.Skipped = append(x.Skipped, Unmapped{Object: where, Reason: skipReason(kind, cluster)})
		return nil
	}
	if !slices.Contains(versions, apiVersion) {
		return fmt.Errorf("%s: apiVersion %q of %s is not supported; supported: %s", where, apiVersion, kind, strings.Join(versions, ", "))
	}
	into := x.target(kind, cluster)
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

func skipReason(kind, cluster string) string {
	switch {
	case slices.Contains(workloadKinds, kind) && cluster == "":
		return "a workload cluster's object belongs under workload/NAMESPACE/CLUSTER.yaml"
	case cluster != "" && Supported[kind] != nil:
		return "a management cluster's object belongs outside workload/"
	default:
		kinds := slices.Sorted(maps.Keys(Supported))
		return "not read by a rehearsal (it reads " + strings.Join(kinds, ", ") + ")"
	}
}

// target appends a zero object of kind to its list and returns it, to
// decode into.
func (x *Export) target(kind, cluster string) any {
	switch kind {
	case "BareMetalHost":
		return grow(&x.Hosts)
	case "HostFirmwareComponents":
		return grow(&x.Firmware)
	case "Cluster":
		return grow(&x.Clusters)
	case "MachineDeployment":
		return grow(&x.Deployments)
	case "Machine":
		return grow(&x.Machines)
	case "ClusterClass":
		return grow(&x.Classes)
	case "KubeadmControlPlane":
		return grow(&x.ControlPlanes)
	}
	apps := x.Apps[cluster]
	if apps == nil {
		apps = &WorkloadApps{}
		x.Apps[cluster] = apps
	}
	if kind == "Deployment" {
		return grow(&apps.Deployments)
	}
	return grow(&apps.Budgets)
}

// grow appends a zero element and returns a pointer to it.
func grow[T any](s *[]T) *T {
	var zero T
	*s = append(*s, zero)
	return &(*s)[len(*s)-1]
}
