package guest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Boot is what init learned at boot.
type Boot struct {
	// Params are the kernel command line's upgradelab.* parameters.
	Params map[string]string
	// Modules are the kernel modules it loaded.
	Modules []string
}

// MountKernelFilesystems mounts /dev, /proc and /sys, as any init does
// first (the cloud kernel does not mount devtmpfs itself).
func MountKernelFilesystems() error {
	for _, m := range []struct{ src, dst, fstype string }{
		{"devtmpfs", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"tmpfs", "/run", "tmpfs"},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, 0, ""); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dst, err)
		}
	}
	return nil
}

// LoadModules loads each module listed in orderFile (file names beside it),
// in order.
func LoadModules(orderFile string) ([]string, error) {
	b, err := os.ReadFile(orderFile)
	if err != nil {
		return nil, err
	}
	var loaded []string
	for _, name := range strings.Fields(string(b)) {
		f, err := os.Open(filepath.Join(filepath.Dir(orderFile), name))
		if err != nil {
			return loaded, err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return loaded, fmt.Errorf("load module %s: %w", name, err)
		}
		loaded = append(loaded, strings.TrimSuffix(name, ".ko"))
	}
	return loaded, nil
}

// WaitFor waits until path exists (a device the kernel is still probing).
func WaitFor(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %s", path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// KernelParams reads the upgradelab.* parameters of /proc/cmdline.
func KernelParams(cmdline string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(cmdline) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.HasPrefix(k, "upgradelab.") {
			out[k] = v
		}
	}
	return out
}

// ConfigureNetwork brings lo and ifname up, with addr on ifname: QEMU's
// user network gives a guest 10.0.2.15/24 and the host's loopback as
// 10.0.2.2, so no DHCP client is needed.
func ConfigureNetwork(ifname string, addr *net.IPNet) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	up := func(name string) error {
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
			return fmt.Errorf("%s flags: %w", name, err)
		}
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
			return fmt.Errorf("%s up: %w", name, err)
		}
		return nil
	}
	if err := up("lo"); err != nil {
		return err
	}
	for _, op := range []struct {
		req uint
		ip  net.IP
	}{{unix.SIOCSIFADDR, addr.IP.To4()}, {unix.SIOCSIFNETMASK, net.IP(addr.Mask).To4()}} {
		ifr, err := unix.NewIfreq(ifname)
		if err != nil {
			return err
		}
		if err := ifr.SetInet4Addr(op.ip); err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, op.req, ifr); err != nil {
			return fmt.Errorf("%s address %s: %w", ifname, op.ip, err)
		}
	}
	return up(ifname)
}

// Restart syncs every filesystem and block device and restarts the
// machine, as `reboot -f` does once the OS has shut down.
func Restart() error {
	unix.Sync()
	return unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
}

// PowerOff syncs and powers the machine off, as `poweroff -f` does once
// the OS has shut down.
func PowerOff() error {
	unix.Sync()
	return unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}
