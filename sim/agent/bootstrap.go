package agent

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"regexp"
	"strings"

	"golang.org/x/mod/semver"
	"sigs.k8s.io/yaml"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// Action is what the bootstrap data tells kubeadm to do.
type Action string

const (
	Init             Action = "init"
	JoinControlPlane Action = "join-control-plane"
	JoinWorker       Action = "join"
)

// Bootstrap is what the agent takes from CABPK's cloud-config: the kubeadm
// command, the node's identity and, for control-plane nodes, the cluster's
// CAs that CABPK writes under /etc/kubernetes/pki.
type Bootstrap struct {
	Action     Action
	NodeName   string
	ProviderID string
	Labels     map[string]string
	// Endpoint is the API server host:port: controlPlaneEndpoint on init,
	// the discovery endpoint on join.
	Endpoint string
	// ClusterConfiguration is the document kubeadm init stores in the
	// kubeadm-config ConfigMap.
	ClusterConfiguration string
	ClusterCA, EtcdCA    *workload.CA
	// Files are cloud-init's write_files, path to content: what the first
	// boot wrote on the host (the KubeadmConfig's files among them).
	Files map[string]string
}

type cloudConfig struct {
	WriteFiles []struct {
		Path     string `json:"path"`
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
	} `json:"write_files"`
	RunCmd []any `json:"runcmd"`
}

// ParseBootstrap reads CABPK cloud-config user data. meta is the config
// drive's meta data, which cloud-init's jinja templates read; its
// local-hostname is the host's name (kubeadm's node name unless the
// kubeadm configuration names one).
func ParseBootstrap(data []byte, meta map[string]string) (*Bootstrap, error) {
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("## template: jinja\n#cloud-config")) && !bytes.HasPrefix(bytes.TrimSpace(data), []byte("#cloud-config")) {
		return nil, fmt.Errorf("bootstrap data: not a cloud-config (only CABPK's cloud-config format is understood)")
	}
	hostname := metaValue(meta, "local-hostname")
	rendered := renderJinja(string(data), meta)
	var cc cloudConfig
	if err := yaml.Unmarshal([]byte(rendered), &cc); err != nil {
		return nil, fmt.Errorf("bootstrap data: %w", err)
	}
	files := map[string]string{}
	for _, f := range cc.WriteFiles {
		content, err := decodeContent(f.Content, f.Encoding)
		if err != nil {
			return nil, fmt.Errorf("bootstrap data: write_files %s: %w", f.Path, err)
		}
		files[f.Path] = content
	}
	b := &Bootstrap{NodeName: hostname, Labels: map[string]string{}, Files: files}
	var kubeadmFile string
	switch {
	case strings.Contains(commands(cc.RunCmd), "kubeadm init"):
		b.Action, kubeadmFile = Init, "/run/kubeadm/kubeadm.yaml"
	case strings.Contains(commands(cc.RunCmd), "kubeadm join"):
		b.Action, kubeadmFile = JoinWorker, "/run/kubeadm/kubeadm-join-config.yaml"
	default:
		return nil, fmt.Errorf("bootstrap data: runcmd runs neither kubeadm init nor kubeadm join")
	}
	config, ok := files[kubeadmFile]
	if !ok {
		return nil, fmt.Errorf("bootstrap data: %s is not in write_files", kubeadmFile)
	}
	if err := b.readKubeadmConfig(config); err != nil {
		return nil, fmt.Errorf("bootstrap data: %s: %w", kubeadmFile, err)
	}
	if b.Action != JoinWorker {
		var err error
		if b.ClusterCA, err = caFromFiles(files, "/etc/kubernetes/pki/ca"); err != nil {
			return nil, err
		}
		if b.EtcdCA, err = caFromFiles(files, "/etc/kubernetes/pki/etcd/ca"); err != nil {
			return nil, err
		}
	}
	if b.Endpoint == "" {
		return nil, fmt.Errorf("bootstrap data: %s names no API server endpoint", kubeadmFile)
	}
	if b.NodeName == "" {
		return nil, fmt.Errorf("bootstrap data: %s gives no node name (nodeRegistration.name) and the config drive's meta data no local-hostname", kubeadmFile)
	}
	return b, nil
}

// jinjaVariable is one `{{ name }}` of a cloud-init jinja template.
var jinjaVariable = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}`)

// renderJinja renders the variables of cloud-init's instance data that
// bootstrap templates use: ds.meta_data.KEY (the config drive's meta
// data; cloud-init also answers a key's dashes as underscores, so
// local_hostname reads local-hostname), v1.local_hostname and
// v1.instance_id. Like cloud-init, it renders a variable it does not
// have as CI_MISSING_JINJA_VAR/NAME. It is kinder than cloud-init in one
// way: it renders variables only, no jinja statements or filters.
func renderJinja(s string, meta map[string]string) string {
	return jinjaVariable.ReplaceAllStringFunc(s, func(m string) string {
		name := jinjaVariable.FindStringSubmatch(m)[1]
		var v string
		switch {
		case strings.HasPrefix(name, "ds.meta_data."):
			v = metaValue(meta, strings.TrimPrefix(name, "ds.meta_data."))
		case name == "v1.local_hostname":
			v = metaValue(meta, "local-hostname")
		case name == "v1.instance_id":
			v = metaValue(meta, "uuid")
		}
		if v == "" {
			return "CI_MISSING_JINJA_VAR/" + name
		}
		return v
	})
}

// metaValue is meta's key, or the key with underscores read as dashes
// (cloud-init's aliases).
func metaValue(meta map[string]string, key string) string {
	if v, ok := meta[key]; ok {
		return v
	}
	return meta[strings.ReplaceAll(key, "_", "-")]
}

func commands(runcmd []any) string {
	var out []string
	for _, c := range runcmd {
		out = append(out, fmt.Sprint(c))
	}
	return strings.Join(out, "\n")
}

func decodeContent(content, encoding string) (string, error) {
	switch encoding {
	case "", "text/plain":
		return content, nil
	case "b64", "base64":
		data, err := base64.StdEncoding.DecodeString(content)
		return string(data), err
	case "gz+base64", "gzip+base64", "gz+b64", "gzip+b64":
		data, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return "", err
		}
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return "", err
		}
		out, err := io.ReadAll(r)
		return string(out), err
	}
	return "", fmt.Errorf("encoding %q is not supported", encoding)
}

// readKubeadmConfig takes identity and endpoint from the kubeadm documents.
func (b *Bootstrap) readKubeadmConfig(config string) error {
	for _, doc := range strings.Split(config, "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return err
		}
		reg, _ := obj["nodeRegistration"].(map[string]any)
		switch obj["kind"] {
		case "ClusterConfiguration":
			b.ClusterConfiguration = strings.TrimSpace(doc)
			if ep, _ := obj["controlPlaneEndpoint"].(string); ep != "" {
				b.Endpoint = ep
			}
		case "InitConfiguration":
			b.readNodeRegistration(reg)
		case "JoinConfiguration":
			b.readNodeRegistration(reg)
			if cp, ok := obj["controlPlane"]; ok && cp != nil {
				b.Action = JoinControlPlane
			}
			disc, _ := obj["discovery"].(map[string]any)
			token, _ := disc["bootstrapToken"].(map[string]any)
			if ep, _ := token["apiServerEndpoint"].(string); ep != "" {
				b.Endpoint = ep
			}
		}
	}
	return nil
}

func (b *Bootstrap) readNodeRegistration(reg map[string]any) {
	if name, _ := reg["name"].(string); name != "" {
		b.NodeName = name
	}
	// kubeadm v1beta4 lists args as name/value pairs; v1beta3 as a map.
	switch args := reg["kubeletExtraArgs"].(type) {
	case []any:
		for _, a := range args {
			kv, _ := a.(map[string]any)
			b.kubeletArg(fmt.Sprint(kv["name"]), fmt.Sprint(kv["value"]))
		}
	case map[string]any:
		for k, v := range args {
			b.kubeletArg(k, fmt.Sprint(v))
		}
	}
}

// ProviderIDScheme starts the provider ID a kubelet reports when neither
// its bootstrap data nor the config drive's meta data sets one: the
// scheme and the host's name (the Redfish System Id), the identity a
// cloud provider would give it.
const ProviderIDScheme = "upgradelab://"

// Config drive meta data keys the agent reads (cloud-init's names).
const (
	MetaHostname   = "local-hostname"
	MetaProviderID = "provider-id"
)

func (b *Bootstrap) kubeletArg(name, value string) {
	switch name {
	case "provider-id":
		b.ProviderID = value
	case "node-labels":
		for _, kv := range strings.Split(value, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				b.Labels[k] = v
			}
		}
	}
}

func caFromFiles(files map[string]string, base string) (*workload.CA, error) {
	crt, key := files[base+".crt"], files[base+".key"]
	if crt == "" || key == "" {
		return nil, fmt.Errorf("bootstrap data: %s.crt and %s.key are required on a control-plane node", base, base)
	}
	ca, err := workload.CAFromSecretData(map[string][]byte{"tls.crt": []byte(crt), "tls.key": []byte(key)})
	if err != nil {
		return nil, fmt.Errorf("bootstrap data: %s: %w", base, err)
	}
	return &ca, nil
}

// kubeadmRun is what kubeadm last did on a control-plane host (init,
// join, upgrade node): the feature gates it applied at its
// kubernetesVersion, the releases and extraArgs it wrote into the static
// pods' manifests, and the kubelet version it ran under. A reboot's
// kubelet starts the static pods from those manifests, whatever the image
// or the cluster's kubeadm-config says now: they live in /etc/kubernetes,
// kept across A/B image updates and a fallback, as the files are, and
// lost with a wipe.
type kubeadmRun struct {
	gates   map[string]bool
	pods    workload.Release
	args    workload.StaticPodArgs
	kubelet string // "": kubeadm never ran
}

// status is what the host agent reports of it: the gates at the control
// plane's version (nil: kubeadm never ran).
func (k kubeadmRun) status() *agentv1.Kubeadm {
	if k.kubelet == "" {
		return nil
	}
	return &agentv1.Kubeadm{KubernetesVersion: k.pods.Kubernetes, FeatureGates: maps.Clone(k.gates)}
}

// kubeadmRan is what kubeadm, run on a host that booted img, does from a
// ClusterConfiguration document: it applies its feature gates at its
// kubernetesVersion (img's own when it names no valid one, as an offline
// kubeadm defaults to its own version) and writes the static pods at
// that version with its extraArgs. An empty or unreadable document has
// none.
//
// The control plane runs the document's version, whatever the kubelet's:
// `kubeadm upgrade node` writes the manifests at the kubeadm-config's
// kubernetesVersion, which is why KCP moves it before it updates a
// Machine. etcd is img's kubeadm's pick for its own minor; for another
// minor the member keeps what it ran (before), and a member never goes
// down a version (kubeadm skips an etcd older than the one installed).
// Kinder than kubeadm, which picks etcd from its table for any version:
// the lab's images pair one etcd with their own version only.
func kubeadmRan(img imagev1.Manifest, clusterConfiguration string, before workload.Release) kubeadmRun {
	cc, _ := workload.ParseClusterConfiguration(clusterConfiguration)
	version := img.KubernetesVersion
	if semver.IsValid(cc.KubernetesVersion) {
		version = cc.KubernetesVersion
	}
	pods := workload.Release{Kubernetes: version, Etcd: img.Etcd, CoreDNS: img.CoreDNS}
	if before.Etcd != "" && (semver.MajorMinor(version) != semver.MajorMinor(img.KubernetesVersion) || semver.Compare("v"+before.Etcd, "v"+pods.Etcd) > 0) {
		pods.Etcd = before.Etcd
	}
	return kubeadmRun{gates: cc.FeatureGates, pods: pods, args: cc.Args(), kubelet: img.KubernetesVersion}
}
