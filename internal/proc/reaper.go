package proc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Reaper remembers the processes a plane started, in a file named after the
// harness's pid. Envtest starts kube-apiserver and etcd in their own process
// group without a parent-death signal, so a harness killed with SIGKILL
// would leave them running; the next plane to start finds the file of a
// dead harness and ends what it lists.
type Reaper struct {
	dir  string
	file string
}

type reapEntry struct {
	PID int    `json:"pid"`
	Exe string `json:"exe"`
}

// NewReaper keeps this harness's record in dir, shared by every harness
// on the machine.
func NewReaper(dir string) (*Reaper, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("reaper folder: %w", err)
	}
	return &Reaper{dir: dir, file: filepath.Join(dir, strconv.Itoa(os.Getpid())+".json")}, nil
}

// ReapOrphans ends the processes of harnesses that are no longer running and
// returns how many it ended.
func (r *Reaper) ReapOrphans() int {
	files, _ := filepath.Glob(filepath.Join(r.dir, "*.json"))
	ended := 0
	for _, f := range files {
		owner, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".json"))
		if err != nil || owner == os.Getpid() || Alive(owner) {
			continue
		}
		for _, e := range readEntries(f) {
			if Alive(e.PID) && Exe(e.PID) == e.Exe {
				_ = syscall.Kill(e.PID, syscall.SIGKILL)
				ended++
			}
		}
		_ = os.Remove(f)
	}
	return ended
}

// Record adds pids to this harness's file.
func (r *Reaper) Record(pids ...int) error {
	entries := readEntries(r.file)
	for _, pid := range pids {
		entries = append(entries, reapEntry{PID: pid, Exe: Exe(pid)})
	}
	data, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	tmp := r.file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, r.file)
}

// Forget removes this harness's file once its processes have stopped.
func (r *Reaper) Forget() { _ = os.Remove(r.file) }

func readEntries(path string) []reapEntry {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var entries []reapEntry
	_ = json.Unmarshal(data, &entries)
	return entries
}

// Alive reports whether any thread of pid still runs (see Exited: a
// zombie leader whose other threads run still holds what it held, and a
// Reaper that spared it would leave its ports taken).
func Alive(pid int) bool { return pid > 0 && !Exited(pid) }

// Exe is the executable process pid runs ("" when it is gone).
func Exe(pid int) string {
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return exe
}

// ChildrenOf lists the pids whose parent is ppid.
func ChildrenOf(ppid int) []int {
	dirs, _ := os.ReadDir("/proc")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if fields, ok := Stat(pid); ok && len(fields) > 1 && fields[1] == strconv.Itoa(ppid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
