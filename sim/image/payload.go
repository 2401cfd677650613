package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/upgradelab/upgradelab/sim/nic"
)

// PayloadBytes is the real size of every payload. The modelled size
// (Bundle.SizeMiB) sets write times; the bytes themselves stay small so a
// 100-host lab needs no disk space and nothing large is ever in git.
const PayloadBytes = 64 << 10

const magic = "UPGRADELAB-IMAGE/1\n"

// Manifest is what an image says about itself inside its payload. The boot
// path reads it from the slot's bytes, not from the catalog, so what boots
// is what was written.
type Manifest struct {
	Name              string `json:"name"`
	Role              Role   `json:"role"`
	KubernetesVersion string `json:"kubernetesVersion"`
	Containerd        string `json:"containerd"`
	Etcd              string `json:"etcd,omitempty"`
	CoreDNS           string `json:"coreDNS,omitempty"`
	Kernel            string `json:"kernel"`
	OSImage           string `json:"osImage"`
	I40e              struct {
		Version     string `json:"version"`
		APIMajor    int    `json:"apiMajor"`
		APIMinor    int    `json:"apiMinor"`
		MinAPIMinor int    `json:"minApiMinor"`
	} `json:"i40e"`
}

// Manifest is what the image's header says about it.
func (b Bundle) Manifest() Manifest {
	m := Manifest{Name: b.Name, Role: b.Role, KubernetesVersion: b.KubernetesVersion,
		Containerd: b.Containerd, Etcd: b.Etcd, CoreDNS: b.CoreDNS, Kernel: b.Kernel, OSImage: b.OSImage}
	m.I40e.Version = b.I40e.Version
	m.I40e.APIMajor, m.I40e.APIMinor, m.I40e.MinAPIMinor = b.I40e.API.Major, b.I40e.API.Minor, b.I40e.MinAPIMinor
	return m
}

// Payload is the image's bytes: a header with its manifest, then filler
// that depends only on the image's name. The same bundle always gives the
// same bytes, so the catalog can carry their checksum.
func Payload(b Bundle) []byte {
	header, _ := json.Marshal(b.Manifest())
	buf := bytes.NewBuffer(make([]byte, 0, PayloadBytes))
	buf.WriteString(magic)
	buf.Write(header)
	buf.WriteByte('\n')
	seed := sha256.Sum256([]byte(b.Name))
	var counter [8]byte
	for block := uint64(0); buf.Len() < PayloadBytes; block++ {
		binary.BigEndian.PutUint64(counter[:], block)
		sum := sha256.Sum256(append(seed[:], counter[:]...))
		buf.Write(sum[:])
	}
	return buf.Bytes()[:PayloadBytes]
}

// Checksum is the hex sha256 of data.
func Checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ErrNotAnImage is returned for bytes that carry no manifest.
var ErrNotAnImage = errors.New("not an upgradelab image payload")

// ReadManifest reads the manifest at the start of a payload.
func ReadManifest(payload []byte) (Manifest, error) {
	if !bytes.HasPrefix(payload, []byte(magic)) {
		return Manifest{}, ErrNotAnImage
	}
	rest := payload[len(magic):]
	end := bytes.IndexByte(rest, '\n')
	if end < 0 {
		return Manifest{}, fmt.Errorf("%w: manifest not terminated", ErrNotAnImage)
	}
	var m Manifest
	if err := json.Unmarshal(rest[:end], &m); err != nil {
		return Manifest{}, fmt.Errorf("%w: manifest: %v", ErrNotAnImage, err)
	}
	return m, nil
}

// I40eDriver is the driver the image ships, as the NIC rules take it.
func (m Manifest) I40eDriver() nic.Driver {
	return nic.Driver{Version: m.I40e.Version, API: nic.APIVersion{Major: m.I40e.APIMajor, Minor: m.I40e.APIMinor}, MinAPIMinor: m.I40e.MinAPIMinor}
}
