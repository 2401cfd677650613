package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The Debian packages the backend runs, by the file that shows each is there.
var daemonNeeds = map[string]string{
	"/usr/sbin/libvirtd":              "libvirt-daemon-system",
	"/usr/bin/qemu-system-x86_64":     "qemu-system-x86",
	"/usr/share/OVMF/OVMF_CODE_4M.fd": "ovmf",
	"/usr/bin/unshare":                "util-linux",
}

// libvirtd is the daemon binary (a test gives one that cannot start).
var libvirtd = "/usr/sbin/libvirtd"

// Firmware files: OVMF's code (read-only) and the template of a VM's own
// UEFI variable store.
const (
	ovmfCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// Daemon is one lab's libvirtd.
type Daemon struct {
	// Dir is the lab's libvirt folder: config, socket, state and logs.
	Dir string
	// URI connects to it.
	URI      string
	cmd      *exec.Cmd
	registry string
	// exited is closed when the daemon process ends.
	exited chan struct{}
	err    error
}

// CheckInstalled names what the backend needs and the machine lacks.
func CheckInstalled() error {
	var missing []string
	for path, pkg := range daemonNeeds {
		if _, err := os.Stat(path); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", path, pkg))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the qemu backend needs %s; scripts/install-deps.sh installs them", strings.Join(missing, ", "))
	}
	return nil
}

// daemonStartTimeout bounds libvirtd's start: the first probes QEMU's
// capabilities (seconds); later ones read them from the cache folder.
const daemonStartTimeout = 60 * time.Second

// StartDaemon starts libvirtd for the lab whose libvirt folder is dir and
// waits until its socket answers. registry is where the harness records
// daemons for the reaper (UPGRADELAB_CACHE/run); orphans a dead harness
// left there are ended first.
func StartDaemon(ctx context.Context, dir, registry string) (*Daemon, error) {
	if err := CheckInstalled(); err != nil {
		return nil, err
	}
	ReapOrphans(registry)
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	// A unix socket path is limited to 108 bytes.
	sock := filepath.Join(dir, "run", "libvirt-sock")
	if len(sock) > 100 {
		return nil, fmt.Errorf("libvirt folder %s: its socket path %s is too long for a unix socket (108 bytes); use a shorter lab folder", dir, sock)
	}
	if err := writeDaemonFiles(dir); err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(dir, "libvirtd.out"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", daemonScript(dir))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start libvirtd: %w", err)
	}
	d := &Daemon{Dir: dir, URI: "qemu:///system?socket=" + sock, cmd: cmd, registry: registry, exited: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.exited) }()
	if err := recordDaemon(registry, dir); err != nil {
		d.Stop()
		return nil, err
	}
	if err := d.waitSocket(ctx, sock); err != nil {
		return nil, err
	}
	return d, nil
}

// writeDaemonFiles makes the daemon's private folders and writes its
// configuration: libvirtd's socket and log in dir, and QEMU running as
// root, outside any security driver or cgroup, writing its console to a
// file itself (there is no systemd, no virtlogd and no libvirt-qemu
// user's rights to manage here).
func writeDaemonFiles(dir string) error {
	for _, sub := range []string{"run", "lib", "log", "cache", "etc-qemu", "lib/qemu/nvram", "log/qemu"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "libvirtd.conf"), []byte(fmt.Sprintf(`# written by upgradelab (sim/vm/qemu): a private daemon for one lab
unix_sock_dir = %q
unix_sock_rw_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "3:file:%s"
`, filepath.Join(dir, "run"), filepath.Join(dir, "libvirtd.log"))), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "qemu.conf"), []byte(`# written by upgradelab (sim/vm/qemu)
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
stdio_handler = "file"
cgroup_controllers = [ ]
namespaces = [ ]
`), 0o644); err != nil {
		return err
	}
	for _, d := range []string{"/run/libvirt", "/var/lib/libvirt", "/var/log/libvirt", "/var/cache/libvirt", "/etc/libvirt/qemu"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("libvirt needs %s to bind its private folder over: %w", d, err)
		}
	}
	return nil
}

// daemonScript runs libvirtd in a mount namespace of its own, its
// folders bound over the system's, so each lab has a private daemon.
func daemonScript(dir string) string {
	return fmt.Sprintf(`set -e
mount --make-rprivate /
mount --bind %[1]s/run /run/libvirt
mount --bind %[1]s/lib /var/lib/libvirt
mount --bind %[1]s/log /var/log/libvirt
mount --bind %[1]s/cache /var/cache/libvirt
mount --bind %[1]s/qemu.conf /etc/libvirt/qemu.conf
mount --bind %[1]s/etc-qemu /etc/libvirt/qemu
exec %[2]s -f %[1]s/libvirtd.conf -p %[1]s/libvirtd.pid
`, dir, libvirtd)
}

// waitSocket waits until the daemon's socket answers; the daemon is
// stopped (or forgotten, when it exited) when it does not.
func (d *Daemon) waitSocket(ctx context.Context, sock string) error {
	logFile := filepath.Join(d.Dir, "libvirtd.log")
	deadline := time.NewTimer(daemonStartTimeout)
	defer deadline.Stop()
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-d.exited:
			forgetDaemon(d.registry, d.Dir)
			b, _ := os.ReadFile(filepath.Join(d.Dir, "libvirtd.out"))
			return fmt.Errorf("libvirtd exited before its socket answered (%s): %s; its log: %s", fmt.Sprint(d.err), strings.TrimSpace(string(b)), logFile)
		case <-deadline.C:
			d.Stop()
			return fmt.Errorf("libvirtd's socket %s did not answer within %s; its log: %s", sock, daemonStartTimeout, logFile)
		case <-ctx.Done():
			d.Stop()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends the daemon and every QEMU process it started. Domains are the
// lab's to destroy first (Domains.Close); what is left is killed.
func (d *Daemon) Stop() error {
	killQEMU(d.Dir)
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
	}
	forgetDaemon(d.registry, d.Dir)
	var exit *exec.ExitError
	if d.err != nil && !errors.As(d.err, &exit) {
		return d.err
	}
	return nil
}

// QEMUPid is the pid of a running VM's QEMU process, from the pid file
// libvirt keeps in the lab's private /run/libvirt/qemu.
func (d *Daemon) QEMUPid(vm string) (int, error) {
	b, err := os.ReadFile(filepath.Join(d.Dir, "run", "qemu", vm+".pid"))
	if err != nil {
		return 0, fmt.Errorf("vm %s: %w", vm, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
