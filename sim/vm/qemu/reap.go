package qemu

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/upgradelab/upgradelab/internal/proc"
)

// A record says which harness process started the daemon of a lab folder.
// The daemon dies with the harness (parent-death signal) but the QEMU
// processes it started do not: libvirt detaches them so that domains
// outlive a daemon restart. The next StartDaemon, from any harness, reads
// the records of harnesses that are gone and ends what their folders' pid
// files name.
type record struct {
	Pid int `json:"pid"`
	// Start is the harness's start time (/proc/PID/stat), so a pid the
	// kernel has since given another process is not taken for it.
	Start string `json:"start"`
	Dir   string `json:"dir"`
}

func recordFile(registry, dir string) string {
	h := sha256.Sum256([]byte(dir))
	return filepath.Join(registry, "libvirt-"+hex.EncodeToString(h[:8])+".json")
}

// recordDaemon notes that this process runs the daemon of dir.
func recordDaemon(registry, dir string) error {
	if err := os.MkdirAll(registry, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(record{Pid: os.Getpid(), Start: proc.StartTime(os.Getpid()), Dir: dir})
	return os.WriteFile(recordFile(registry, dir), b, 0o644)
}

func forgetDaemon(registry, dir string) { _ = os.Remove(recordFile(registry, dir)) }

// ReapOrphans ends the daemons and VMs of harnesses that died without
// stopping them, and answers how many processes it ended.
func ReapOrphans(registry string) int {
	files, _ := filepath.Glob(filepath.Join(registry, "libvirt-*.json"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var r record
		if json.Unmarshal(b, &r) != nil || r.Dir == "" {
			_ = os.Remove(f)
			continue
		}
		if proc.StartTime(r.Pid) == r.Start && r.Start != "" {
			continue // its harness still runs
		}
		n += killQEMU(r.Dir)
		if killPidFile(filepath.Join(r.Dir, "libvirtd.pid"), "libvirtd") {
			n++
		}
		_ = os.Remove(f)
	}
	return n
}

// killQEMU kills the QEMU processes whose pid files are in the lab's
// private /run/libvirt/qemu.
func killQEMU(dir string) int {
	pids, _ := filepath.Glob(filepath.Join(dir, "run", "qemu", "*.pid"))
	n := 0
	for _, p := range pids {
		if killPidFile(p, "qemu-system") {
			n++
		}
	}
	return n
}

// killPidFile kills the process a pid file names if its executable's name
// starts with exe (so a reused pid is spared).
func killPidFile(path, exe string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return false
	}
	target := proc.Exe(pid)
	if target == "" || !strings.HasPrefix(filepath.Base(target), exe) {
		return false
	}
	return syscall.Kill(pid, syscall.SIGKILL) == nil
}
