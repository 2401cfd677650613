package vm

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/upgradelab/upgradelab/internal/cachedir"
	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/sim/vm/diskimage"
	"github.com/upgradelab/upgradelab/sim/vm/qemu"
)

// testLab is one libvirt daemon, a builder and an image server for a test.
type testLab struct {
	dir     string
	daemon  *qemu.Daemon
	builder *Builder
	hv      *qemu.Hypervisor
	images  *imageServer
}

// vmDir is a short folder for the lab: libvirt's socket path must fit a
// unix socket address, which t.TempDir's long names can overflow.
func vmDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "ulvm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("VM lab folder kept: %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

func newTestLab(t testing.TB) *testLab {
	t.Helper()
	ctx := context.Background()
	dir := vmDir(t)
	b, err := NewBuilder(ctx, filepath.Join(dir, "build"), filepath.Join(cachedir.Dir(), "vm", "kernel"), "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := qemu.StartDaemon(ctx, filepath.Join(dir, "libvirt"), filepath.Join(cachedir.Dir(), "run"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	hv, err := qemu.Connect(d.URI)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hv.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	images := &imageServer{port: l.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: images}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &testLab{dir: dir, daemon: d, builder: b, hv: hv, images: images}
}

// machine builds a factory disk and defines a VM on it, removed at the
// end of the test.
func (l *testLab) machine(t testing.TB, name string, slotA *diskimage.Payload, recovery diskimage.Payload) *Machine {
	t.Helper()
	disk, err := l.builder.Disk(context.Background(), name, slotA, recovery)
	if err != nil {
		t.Fatal(err)
	}
	accel, err := qemu.AccelFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ports, err := loopback.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	spec := qemu.VMSpec{Name: name, CPUs: 1, MemoryMiB: 256, Disk: disk.Path, Dir: filepath.Join(l.dir, "vms", name),
		AgentPort: ports[0], GuestPort: 8080, MAC: fmt.Sprintf("52:54:00:00:00:%02x", len(name)), Accel: accel}
	m, err := NewMachine(l.hv, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Remove(); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
	})
	return m
}

// imageServer serves payloads as the lab's image server does, to the
// guest at the host's address on QEMU's user network. Under /slow/ it
// sends at 4 MiB/s, so a write lasts long enough to cut.
type imageServer struct {
	port     int
	payloads map[string]diskimage.Payload
}

func (s *imageServer) guestURL(image string, slow bool) string {
	prefix := ""
	if slow {
		prefix = "/slow"
	}
	return fmt.Sprintf("http://10.0.2.2:%d%s/%s.img", s.port, prefix, image)
}

func (s *imageServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	slow := strings.HasPrefix(r.URL.Path, "/slow/")
	name := strings.TrimSuffix(filepath.Base(r.URL.Path), ".img")
	p, ok := s.payloads[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(p.Path)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Length", strconv.FormatInt(p.Size, 10))
	if !slow {
		io.Copy(w, f)
		return
	}
	buf := make([]byte, 256<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			time.Sleep(time.Second / 16)
		}
		if err != nil {
			return
		}
	}
}
