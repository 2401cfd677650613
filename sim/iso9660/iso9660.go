// Package iso9660 reads files out of an ISO 9660 image, as a host's
// firmware and boot loader read the virtual CD a BMC presents: the
// primary volume descriptor, the directory tree, and Rock Ridge's
// alternate names (NM), which the mkisofs -r that Ironic builds its boot
// ISOs with writes beside the 8.3 names. Joliet, multi-extent files and
// continuation areas (long Rock Ridge names) are not read; the lab's
// media never need them.
package iso9660

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

const sector = 2048

// ErrNotISO is returned for an image without an ISO 9660 primary volume
// descriptor.
var ErrNotISO = errors.New("not an ISO 9660 image")

// IsISO says whether img starts like an ISO 9660 image (a volume
// descriptor at sector 16).
func IsISO(img []byte) bool {
	return len(img) >= 17*sector && string(img[16*sector+1:16*sector+6]) == "CD001"
}

// ReadFile returns the file at name (slash-separated, from the root;
// compared without regard to case) in the image.
func ReadFile(img []byte, name string) ([]byte, error) {
	rec, err := root(img)
	if err != nil {
		return nil, err
	}
	for _, part := range strings.Split(strings.Trim(path.Clean("/"+name), "/"), "/") {
		if rec, err = lookup(img, rec, part); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if rec.dir {
		return nil, fmt.Errorf("%s: is a directory", name)
	}
	return extent(img, rec)
}

// record is a directory record: where its extent is, how long, what kind.
type record struct {
	name        string
	lba, length uint32
	dir         bool
}

// root is the root directory's record from the primary volume descriptor.
func root(img []byte) (record, error) {
	for i := 16; (i+1)*sector <= len(img); i++ {
		vd := img[i*sector : (i+1)*sector]
		if string(vd[1:6]) != "CD001" {
			return record{}, ErrNotISO
		}
		switch vd[0] {
		case 1:
			r, _, err := parseRecord(vd[156:190])
			return r, err
		case 255:
			return record{}, fmt.Errorf("%w: no primary volume descriptor", ErrNotISO)
		}
	}
	return record{}, ErrNotISO
}

// lookup finds name in the directory dir.
func lookup(img []byte, dir record, name string) (record, error) {
	if !dir.dir {
		return record{}, fmt.Errorf("%s is not a directory", dir.name)
	}
	data, err := extent(img, dir)
	if err != nil {
		return record{}, err
	}
	for off := 0; off < len(data); {
		if data[off] == 0 { // records do not cross sectors: go to the next
			off = (off/sector + 1) * sector
			continue
		}
		r, n, err := parseRecord(data[off:])
		if err != nil {
			return record{}, err
		}
		if strings.EqualFold(r.name, name) {
			return r, nil
		}
		off += n
	}
	return record{}, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
}

// extent is the data a record points at.
func extent(img []byte, r record) ([]byte, error) {
	start, end := uint64(r.lba)*sector, uint64(r.lba)*sector+uint64(r.length)
	if end > uint64(len(img)) {
		return nil, fmt.Errorf("%s: extent %d+%d beyond the image's %d bytes", r.name, start, r.length, len(img))
	}
	return img[start:end], nil
}

// parseRecord reads the directory record at the start of b and its
// length.
func parseRecord(b []byte) (record, int, error) {
	if len(b) < 34 || int(b[0]) < 34 || int(b[0]) > len(b) || 33+int(b[32]) > int(b[0]) {
		return record{}, 0, fmt.Errorf("%w: bad directory record", ErrNotISO)
	}
	n, nameLen := int(b[0]), int(b[32])
	r := record{lba: binary.LittleEndian.Uint32(b[2:6]), length: binary.LittleEndian.Uint32(b[10:14]), dir: b[25]&2 != 0}
	r.name = plainName(b[33 : 33+nameLen])
	su := 33 + nameLen
	if nameLen%2 == 0 {
		su++ // padding keeps the system use area even
	}
	if alt, ok := rockRidgeName(b[min(su, n):n]); ok {
		r.name = alt
	}
	return r, n, nil
}

// plainName is an ISO 9660 file identifier without its version and a
// trailing dot ("VMLINUZ.;1" is "VMLINUZ").
func plainName(id []byte) string {
	s := string(id)
	if len(id) == 1 && id[0] <= 1 {
		return map[byte]string{0: ".", 1: ".."}[id[0]]
	}
	if i := strings.IndexByte(s, ';'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, ".")
}

// rockRidgeName is the name an NM entry of a system use area gives.
func rockRidgeName(su []byte) (string, bool) {
	var name strings.Builder
	found := false
	for len(su) >= 4 {
		l := int(su[2])
		if l < 4 || l > len(su) {
			break
		}
		if string(su[:2]) == "NM" && l >= 5 && su[4]&0x6 == 0 { // not "." or ".."
			name.Write(su[5:l])
			found = true
		}
		su = su[l:]
	}
	return name.String(), found
}
