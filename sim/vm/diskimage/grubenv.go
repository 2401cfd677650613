package diskimage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// GRUB's environment block (grub-editenv's file format): a fixed-size
// file that starts with envHeader, holds NAME=VALUE lines, and is padded
// with '#' to envSize bytes. GRUB's save_env rewrites it in place through
// its block list, so it never moves once written: the guest and the host
// edit it by offset, without a FAT driver.
const (
	envHeader = "# GRUB Environment Block\n"
	envSize   = 1024
)

// Env is the variables of one environment block, in file order.
type Env struct {
	names  []string
	values map[string]string
}

// NewEnv is an empty block.
func NewEnv() *Env { return &Env{values: map[string]string{}} }

// Get answers a variable ("" when unset).
func (e *Env) Get(name string) string { return e.values[name] }

// Set sets a variable, keeping the file order of existing ones.
func (e *Env) Set(name, value string) {
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

// Names are the variables, in file order.
func (e *Env) Names() []string { return slices.Clone(e.names) }

// ErrNotEnvBlock is returned for bytes that are not an environment block.
var ErrNotEnvBlock = errors.New("not a GRUB environment block")

// ParseEnv reads a block. It is as strict as GRUB: the header, whole
// lines, and nothing but '#' after the last one. GRUB's escapes (a
// backslash before a backslash or newline) are refused, since nothing here
// writes them.
func ParseEnv(b []byte) (*Env, error) {
	if len(b) != envSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrNotEnvBlock, len(b), envSize)
	}
	if !bytes.HasPrefix(b, []byte(envHeader)) {
		return nil, fmt.Errorf("%w: no header", ErrNotEnvBlock)
	}
	body := b[len(envHeader):]
	last := bytes.LastIndexByte(body, '\n')
	if strings.Trim(string(body[last+1:]), "#") != "" {
		return nil, fmt.Errorf("%w: padding holds something but '#'", ErrNotEnvBlock)
	}
	e := NewEnv()
	if last < 0 {
		return e, nil
	}
	for i, line := range strings.Split(string(body[:last]), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || name == "" || strings.ContainsAny(line, "\\\x00") {
			return nil, fmt.Errorf("%w: line %d %q", ErrNotEnvBlock, i+2, line)
		}
		e.Set(name, value)
	}
	return e, nil
}

// Encode writes the block, padded to its fixed size.
func (e *Env) Encode() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(envHeader)
	for _, n := range e.names {
		v := e.values[n]
		if strings.ContainsAny(n, "=\n\\#\x00") || n == "" || strings.ContainsAny(v, "\n\\\x00") {
			return nil, fmt.Errorf("grubenv: variable %q=%q cannot be written", n, v)
		}
		fmt.Fprintf(&b, "%s=%s\n", n, v)
	}
	if b.Len() > envSize {
		return nil, fmt.Errorf("grubenv: %d bytes of variables, the block holds %d", b.Len(), envSize)
	}
	b.Write(bytes.Repeat([]byte("#"), envSize-b.Len()))
	return b.Bytes(), nil
}

// FindEnv finds the environment block within [start, start+size) of r:
// the first sector-aligned 1024 bytes that parse as one. (The header text
// also appears inside GRUB's EFI binary, never sector-aligned and followed
// by a valid block.)
func FindEnv(r io.ReaderAt, start, size int64) (int64, *Env, error) {
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) - envSize {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), size-off)], start+off)
		if n == 0 && err != nil {
			return 0, nil, fmt.Errorf("find grubenv: %w", err)
		}
		chunk := buf[:n]
		for i := 0; i+envSize <= len(chunk); i += SectorSize {
			if chunk[i] != '#' || !bytes.HasPrefix(chunk[i:], []byte(envHeader)) {
				continue
			}
			if env, err := ParseEnv(chunk[i : i+envSize]); err == nil {
				return start + off + int64(i), env, nil
			}
		}
		if int64(n) < int64(len(buf)) {
			break
		}
	}
	return 0, nil, fmt.Errorf("no GRUB environment block in bytes %d-%d", start, start+size)
}
