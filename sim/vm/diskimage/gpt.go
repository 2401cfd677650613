package diskimage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"unicode/utf16"
)

// Partition is one entry of a disk's GPT, as read back.
type Partition struct {
	Number int
	Name   string
	// Offset and Size are in bytes.
	Offset int64
	Size   int64
}

// ErrNoGPT is returned for a disk without a valid GPT header.
var ErrNoGPT = errors.New("no GPT")

// ReadGPT reads the primary GPT of a disk. It checks the header's
// signature and CRC, so a disk whose table was overwritten is refused
// rather than misread.
func ReadGPT(r io.ReaderAt) ([]Partition, error) {
	hdr := make([]byte, SectorSize)
	if _, err := r.ReadAt(hdr, SectorSize); err != nil {
		return nil, fmt.Errorf("read GPT header: %w", err)
	}
	if !bytes.Equal(hdr[:8], []byte("EFI PART")) {
		return nil, fmt.Errorf("LBA 1: %w (signature %q)", ErrNoGPT, hdr[:8])
	}
	size := binary.LittleEndian.Uint32(hdr[12:])
	if size < 92 || size > SectorSize {
		return nil, fmt.Errorf("GPT header size %d: %w", size, ErrNoGPT)
	}
	want := binary.LittleEndian.Uint32(hdr[16:])
	h := append([]byte(nil), hdr[:size]...)
	clear(h[16:20])
	if got := crc32.ChecksumIEEE(h); got != want {
		return nil, fmt.Errorf("GPT header CRC %08x, want %08x: %w", got, want, ErrNoGPT)
	}
	entriesLBA := binary.LittleEndian.Uint64(hdr[72:])
	count := binary.LittleEndian.Uint32(hdr[80:])
	entrySize := binary.LittleEndian.Uint32(hdr[84:])
	if entrySize < 128 || entrySize > 1024 || count > 1024 {
		return nil, fmt.Errorf("GPT entries %d of %d bytes: %w", count, entrySize, ErrNoGPT)
	}
	table := make([]byte, int(count)*int(entrySize))
	if _, err := r.ReadAt(table, int64(entriesLBA)*SectorSize); err != nil {
		return nil, fmt.Errorf("read GPT entries: %w", err)
	}
	if got, want := crc32.ChecksumIEEE(table), binary.LittleEndian.Uint32(hdr[88:]); got != want {
		return nil, fmt.Errorf("GPT entries CRC %08x, want %08x: %w", got, want, ErrNoGPT)
	}
	var parts []Partition
	for i := 0; i < int(count); i++ {
		e := table[i*int(entrySize):]
		if bytes.Equal(e[:16], make([]byte, 16)) {
			continue
		}
		first, last := binary.LittleEndian.Uint64(e[32:]), binary.LittleEndian.Uint64(e[40:])
		if last < first {
			return nil, fmt.Errorf("GPT entry %d ends (LBA %d) before it starts (%d): %w", i+1, last, first, ErrNoGPT)
		}
		u := make([]uint16, 36)
		for j := range u {
			u[j] = binary.LittleEndian.Uint16(e[56+2*j:])
		}
		name := utf16.Decode(u)
		if k := indexRune(name, 0); k >= 0 {
			name = name[:k]
		}
		parts = append(parts, Partition{
			Number: i + 1, Name: string(name),
			Offset: int64(first) * SectorSize, Size: int64(last-first+1) * SectorSize,
		})
	}
	return parts, nil
}

func indexRune(rs []rune, r rune) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}

// Find picks one partition by name.
func Find(parts []Partition, name string) (Partition, error) {
	for _, p := range parts {
		if p.Name == name {
			return p, nil
		}
	}
	return Partition{}, fmt.Errorf("the disk has no partition labelled %q", name)
}
