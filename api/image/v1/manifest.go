package v1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// PayloadBytes is the size of every OS image payload. The modelled size
// sets write times; the bytes stay small. A reader of the manifest needs
// at most this many bytes from the start of the image.
const PayloadBytes = 64 << 10

// Magic opens every OS image payload; the manifest's JSON follows on one
// line.
const Magic = "UPGRADELAB-IMAGE/1\n"

// Role is what a host booted from an image is for.
type Role string

const (
	// RoleOS images are a node's OS: written to a root and booted from disk.
	RoleOS Role = "os"
	// RoleDeploy images are deploy ramdisks (Ironic's IPA), booted from
	// virtual media to provision a host.
	RoleDeploy Role = "deploy"
	// RoleRecovery images are a recovery OS (Elemental's recovery
	// partition).
	RoleRecovery Role = "recovery"
)

// Manifest is what an OS image says about itself.
type Manifest struct {
	Name              string `json:"name"`
	Role              Role   `json:"role"`
	KubernetesVersion string `json:"kubernetesVersion"`
	Containerd        string `json:"containerd"`
	Etcd              string `json:"etcd,omitempty"`
	CoreDNS           string `json:"coreDNS,omitempty"`
	Kernel            string `json:"kernel"`
	OSImage           string `json:"osImage"`
	// I40e is the image's Intel i40e NIC driver.
	I40e struct {
		Version     string `json:"version"`
		APIMajor    int    `json:"apiMajor"`
		APIMinor    int    `json:"apiMinor"`
		MinAPIMinor int    `json:"minApiMinor"`
	} `json:"i40e"`
}

// I40eDriver is the image's NIC driver.
func (m Manifest) I40eDriver() Driver {
	return Driver{Version: m.I40e.Version, API: APIVersion{Major: m.I40e.APIMajor, Minor: m.I40e.APIMinor}, MinAPIMinor: m.I40e.MinAPIMinor}
}

// Header is the start of a payload that carries m: Magic, the manifest,
// a newline.
func Header(m Manifest) []byte {
	js, _ := json.Marshal(m) // a struct of strings and ints always encodes
	return append(append([]byte(Magic), js...), '\n')
}

// ErrNotAnImage is returned for bytes that carry no manifest.
var ErrNotAnImage = errors.New("not an upgradelab image payload")

// ReadManifest reads the manifest at the start of a payload.
func ReadManifest(payload []byte) (Manifest, error) {
	if !bytes.HasPrefix(payload, []byte(Magic)) {
		return Manifest{}, ErrNotAnImage
	}
	rest := payload[len(Magic):]
	end := bytes.IndexByte(rest, '\n')
	if end < 0 {
		return Manifest{}, fmt.Errorf("%w: manifest not terminated", ErrNotAnImage)
	}
	var m Manifest
	if err := json.Unmarshal(rest[:end], &m); err != nil {
		return Manifest{}, fmt.Errorf("%w: manifest: %w", ErrNotAnImage, err)
	}
	return m, nil
}
