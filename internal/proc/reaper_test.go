package proc

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestReaperEndsWhatADeadHarnessLeft(t *testing.T) {
	dir := t.TempDir()
	// A harness that has exited: its pid is free.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := exec.Command("sleep", "300")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { orphan.Wait(); close(waited) }()
	t.Cleanup(func() { orphan.Process.Kill() })
	// A live process recorded under a live owner must be left alone.
	bystander := exec.Command("sleep", "300")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })

	write := func(owner int, pids ...int) {
		var entries []reapEntry
		for _, pid := range pids {
			entries = append(entries, reapEntry{PID: pid, Exe: Exe(pid)})
		}
		data, _ := json.Marshal(entries)
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(owner)+".json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(gone.Process.Pid, orphan.Process.Pid)
	write(1, bystander.Process.Pid) // pid 1 never exits

	r, err := NewReaper(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.ReapOrphans(); n != 1 {
		t.Fatalf("reapOrphans() = %d, want 1 (the dead harness's orphan)", n)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the orphan is still running")
	}
	if !Alive(bystander.Process.Pid) {
		t.Fatal("a process of a live harness was ended")
	}
	if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(gone.Process.Pid)+".json")); !os.IsNotExist(err) {
		t.Fatalf("the dead harness's file is still there: %v", err)
	}
}

func TestReaperSparesAReusedPid(t *testing.T) {
	dir := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "300")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	// The file names the pid with another executable: the pid was reused.
	data, _ := json.Marshal([]reapEntry{{PID: other.Process.Pid, Exe: "/somewhere/kube-apiserver"}})
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(gone.Process.Pid)+".json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ := NewReaper(dir)
	if n := r.ReapOrphans(); n != 0 || !Alive(other.Process.Pid) {
		t.Fatalf("reapOrphans() = %d and the unrelated process alive=%v; want 0 and alive", n, Alive(other.Process.Pid))
	}
}
