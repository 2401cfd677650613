package boot

import (
	"fmt"
	"io"
	"strings"
)

// cpioWriter writes the "newc" cpio format the kernel unpacks an
// initramfs from (Documentation/driver-api/early-userspace/buffer-format).
type cpioWriter struct {
	w     io.Writer
	n     int64
	inode int
	err   error
}

const (
	modeDir  = 0o040000
	modeFile = 0o100000
)

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	var n int
	n, c.err = c.w.Write(b)
	c.n += int64(n)
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) {
	c.inode++
	name = strings.TrimPrefix(name, "/")
	nlink := 1
	if mode&modeDir != 0 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.inode, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
}

// Dir adds a directory.
func (c *cpioWriter) Dir(name string) { c.entry(name, modeDir|0o755, nil) }

// File adds a regular file.
func (c *cpioWriter) File(name string, perm uint32, data []byte) {
	c.entry(name, modeFile|perm, data)
}

// Close writes the trailer.
func (c *cpioWriter) Close() error {
	c.inode = 0
	c.entry("TRAILER!!!", 0, nil)
	return c.err
}
