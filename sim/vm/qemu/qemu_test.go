package qemu

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "ulq-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestADaemonThatCannotStartNamesItsLog(t *testing.T) {
	old := libvirtd
	libvirtd = "/bin/false"
	t.Cleanup(func() { libvirtd = old })
	dir := shortDir(t)
	_, err := StartDaemon(context.Background(), filepath.Join(dir, "lv"), filepath.Join(dir, "reg"))
	if err == nil || !strings.Contains(err.Error(), "libvirtd exited before its socket answered") || !strings.Contains(err.Error(), "libvirtd.log") {
		t.Fatalf("a daemon that exits at once: %v", err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "reg", "*")); len(files) != 0 {
		t.Errorf("a daemon that never started left records %v", files)
	}
}

func TestALabFolderTooDeepForASocketIsRefused(t *testing.T) {
	dir := filepath.Join(shortDir(t), strings.Repeat("d", 100))
	_, err := StartDaemon(context.Background(), dir, filepath.Join(dir, "reg"))
	if err == nil || !strings.Contains(err.Error(), "too long for a unix socket") {
		t.Fatalf("a 100-byte folder: %v", err)
	}
}

// The helper is a harness that starts a daemon and a VM, says so, and
// waits to be killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("QEMU_TEST_HARNESS"); dir != "" {
		os.Exit(helperHarness(dir))
	}
	os.Exit(m.Run())
}

func helperHarness(dir string) int {
	d, err := StartDaemon(context.Background(), filepath.Join(dir, "lv"), filepath.Join(dir, "reg"))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	h, err := Connect(d.URI)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	disk := filepath.Join(dir, "blank.img")
	os.WriteFile(disk, nil, 0o644)
	os.Truncate(disk, 1<<20)
	spec := VMSpec{Name: "orphan", CPUs: 1, MemoryMiB: 128, Disk: disk, Dir: filepath.Join(dir, "vm"), AgentPort: 1, GuestPort: 8080, MAC: "52:54:00:00:00:99", Accel: TCG}
	if err := h.Define(spec); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	if err := h.Start("orphan"); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
	return 0
}

// A harness killed with its VM running leaves QEMU behind (libvirt
// detaches it on purpose); the next StartDaemon's reaper ends it.
func TestAKilledHarnessLeavesNoVMAfterTheNextStart(t *testing.T) {
	dir := shortDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "QEMU_TEST_HARNESS="+dir)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		cmd.Process.Kill()
		t.Fatalf("the harness said %q", line)
	}
	if _, err := os.Stat("/etc/libvirt/qemu/orphan.xml"); err == nil {
		t.Error("the VM's definition is in the machine's /etc/libvirt/qemu: another lab's daemon would load it")
	}
	b, err := os.ReadFile(filepath.Join(dir, "lv", "run", "qemu", "orphan.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	cmd.Process.Kill()
	cmd.Wait()
	time.Sleep(time.Second)
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("QEMU died with its harness: the reaper is not what ends it, so this test proves nothing")
	}
	if n := ReapOrphans(filepath.Join(dir, "reg")); n < 1 {
		t.Fatalf("the reaper ended %d processes", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("QEMU (pid %d) still runs after the reaper", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
