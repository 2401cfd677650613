package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
)

// PayloadBytes is the real size of every payload (imagev1.PayloadBytes).
// The modelled size (Bundle.SizeMiB) sets write times; the bytes stay
// small so a 100-host lab needs no disk space and nothing large is ever
// in git.
const PayloadBytes = imagev1.PayloadBytes

// Manifest is what the image's header says about it.
func (b Bundle) Manifest() imagev1.Manifest {
	m := imagev1.Manifest{Name: b.Name, Role: b.Role, KubernetesVersion: b.KubernetesVersion,
		Containerd: b.Containerd, Etcd: b.Etcd, CoreDNS: b.CoreDNS, Kernel: b.Kernel, OSImage: b.OSImage}
	m.I40e.Version = b.I40e.Version
	m.I40e.APIMajor, m.I40e.APIMinor, m.I40e.MinAPIMinor = b.I40e.API.Major, b.I40e.API.Minor, b.I40e.MinAPIMinor
	return m
}

// Payload is the image's bytes: a header with its manifest, then filler
// that depends only on the image's name. The same bundle always gives the
// same bytes, so the catalog can carry their checksum.
func Payload(b Bundle) []byte {
	buf := bytes.NewBuffer(make([]byte, 0, PayloadBytes))
	buf.Write(imagev1.Header(b.Manifest()))
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
