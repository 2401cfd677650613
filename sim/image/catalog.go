package image

import (
	"fmt"
	"os"
	"regexp"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/internal/specfile"
)

// Bundle is one OS image: what it contains and how big it is.
type Bundle struct {
	Name string       `yaml:"name" json:"name"`
	Role imagev1.Role `yaml:"role" json:"role"`
	// KubernetesVersion is the kubelet and kubeadm version it ships.
	KubernetesVersion string `yaml:"kubernetesVersion" json:"kubernetesVersion"`
	Containerd        string `yaml:"containerd" json:"containerd"`
	// Etcd and CoreDNS are the versions the image's kubeadm installs when
	// the ClusterConfiguration does not name one (etcd.local.imageTag,
	// dns.imageTag): the etcd a control-plane node runs after a join or a
	// `kubeadm upgrade node`, and the CoreDNS of a cluster it inits.
	Etcd    string         `yaml:"etcd" json:"etcd"`
	CoreDNS string         `yaml:"coreDNS" json:"coreDNS"`
	Kernel  string         `yaml:"kernel" json:"kernel"`
	OSImage string         `yaml:"osImage" json:"osImage"`
	I40e    imagev1.Driver `yaml:"i40e" json:"i40e"`
	// SizeMiB is the modelled size: the write time follows it.
	SizeMiB int `yaml:"sizeMiB" json:"sizeMiB"`
	// SHA256 is the checksum of the payload the image server serves.
	SHA256 string `yaml:"sha256" json:"sha256"`
}

// Catalog is the images the lab knows, by name.
type Catalog struct {
	Images map[string]Bundle
	order  []string
}

// Names lists the catalog's images in file order.
func (c *Catalog) Names() []string { return append([]string(nil), c.order...) }

// Get returns a bundle or an error naming what exists.
func (c *Catalog) Get(name string) (Bundle, error) {
	b, ok := c.Images[name]
	if !ok {
		return Bundle{}, fmt.Errorf("image %q is not in the catalog (known: %v)", name, c.order)
	}
	return b, nil
}

var (
	sha256Hex   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	kubeVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	imageName   = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)
	// etcdTag is kubeadm's etcd image tag: a version and a build suffix.
	etcdTag = regexp.MustCompile(`^\d+\.\d+\.\d+-\d+$`)
)

// ParseCatalog reads and validates catalog content; name is used in errors.
func ParseCatalog(name string, data []byte) (*Catalog, error) {
	var file struct {
		Images []Bundle `yaml:"images"`
	}
	if err := specfile.Decode(name, data, &file); err != nil {
		return nil, err
	}
	c := &Catalog{Images: map[string]Bundle{}}
	for i, b := range file.Images {
		if err := validate(b); err != nil {
			label := ""
			if b.Name != "" {
				label = " (" + b.Name + ")"
			}
			return nil, fmt.Errorf("%s: images[%d]%s.%w", name, i, label, err)
		}
		if _, dup := c.Images[b.Name]; dup {
			return nil, fmt.Errorf("%s: images[%d] (%s).name: duplicate", name, i, b.Name)
		}
		c.Images[b.Name] = b
		c.order = append(c.order, b.Name)
	}
	if len(c.order) == 0 {
		return nil, fmt.Errorf("%s: images: the catalog is empty", name)
	}
	return c, nil
}

// LoadCatalog reads a catalog file.
func LoadCatalog(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseCatalog(path, data)
}

func validate(b Bundle) error {
	switch {
	case !imageName.MatchString(b.Name):
		return fmt.Errorf("name: %q must be lower-case letters, digits, '.' and '-'", b.Name)
	case b.Role != imagev1.RoleOS && b.Role != imagev1.RoleDeploy && b.Role != imagev1.RoleRecovery:
		return fmt.Errorf("role: %q is not os, deploy or recovery", b.Role)
	case !kubeVersion.MatchString(b.KubernetesVersion) && b.Role == imagev1.RoleOS:
		return fmt.Errorf("kubernetesVersion: %q is not a version like v1.35.0", b.KubernetesVersion)
	case b.Role == imagev1.RoleOS && !etcdTag.MatchString(b.Etcd):
		return fmt.Errorf("etcd: %q is not an etcd image tag like 3.6.4-0", b.Etcd)
	case b.Role == imagev1.RoleOS && !kubeVersion.MatchString(b.CoreDNS):
		return fmt.Errorf("coreDNS: %q is not a CoreDNS image tag like v1.12.1", b.CoreDNS)
	case b.I40e.Version == "":
		return fmt.Errorf("i40e.version: required (the driver the image ships)")
	case b.I40e.API.Major < 1:
		return fmt.Errorf("i40e.api: %s is not an admin-queue API version", b.I40e.API)
	case b.I40e.MinAPIMinor > b.I40e.API.Minor:
		return fmt.Errorf("i40e.minApiMinor: %d is above the expected api minor %d", b.I40e.MinAPIMinor, b.I40e.API.Minor)
	case b.SizeMiB <= 0:
		return fmt.Errorf("sizeMiB: must be positive, got %d", b.SizeMiB)
	case !sha256Hex.MatchString(b.SHA256):
		return fmt.Errorf("sha256: %q is not 64 lower-case hex digits", b.SHA256)
	}
	return nil
}
