package guest

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/upgradelab/upgradelab/internal/jsonhttp"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/vm/diskimage"
)

// Port is where the guest serves the agent API; QEMU forwards a host
// loopback port to it.
const Port = 8080

// PathPowerOff (POST) shuts the guest down and powers the VM off. It is
// not part of the agent's wire API: it is how the lab delivers a BMC's
// graceful shutdown to a VM, the stand-in for the ACPI power button, to
// which this init has no handler (sim/lab, qemu backend).
const PathPowerOff = "/v1/poweroff"

// PathRecoveryOnce (POST) makes the next boot the recovery partition's,
// without rebooting: the lab's half of a host's OS asks for it before the
// restart it makes itself (agentv1.PathReset reboots at once).
const PathRecoveryOnce = "/v1/recovery-once"

// Server is the agent API of the running guest, on its real disk. It
// serves plain HTTP: the guest has no certificate of its own (the
// simulated agent serves the same API with the lab CA's mutual TLS).
type Server struct {
	Host     string
	Disk     *Disk
	Params   map[string]string
	Manifest imagev1.Manifest
	Client   *http.Client
	// Console is where progress and decisions are printed (the serial
	// console, which libvirt logs).
	Console io.Writer
	// Restart reboots the machine and PowerOff powers it off (Restart and
	// PowerOff in the VM).
	Restart, PowerOff func() error

	mu       sync.Mutex
	progress Progress
}

// Handler is the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+agentv1.PathStatus, s.status)
	mux.HandleFunc("POST "+agentv1.PathStage, s.stage)
	mux.HandleFunc("POST "+agentv1.PathActivate, s.activate)
	mux.HandleFunc("POST "+agentv1.PathHealth, s.health)
	mux.HandleFunc("POST "+agentv1.PathRollback, s.rollback)
	mux.HandleFunc("POST "+agentv1.PathReboot, s.reboot)
	mux.HandleFunc("POST "+agentv1.PathReset, s.reset)
	mux.HandleFunc("POST "+agentv1.PathClean, s.clean)
	mux.HandleFunc("POST "+PathPowerOff, s.powerOff)
	mux.HandleFunc("POST "+PathRecoveryOnce, s.recoveryOnce)
	return mux
}

func (s *Server) logf(format string, args ...any) {
	if s.Console != nil {
		fmt.Fprintf(s.Console, "upgradelab-guest: "+format+"\n", args...)
	}
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	im, err := s.Disk.Images()
	if err != nil {
		replyErr(w, err)
		return
	}
	st := agentv1.Status{Host: s.Host, Phase: agentv1.PhaseRunning, Images: im.Wire(), OS: s.runningOS()}
	jsonhttp.Reply(w, http.StatusOK, st)
}

func (s *Server) runningOS() *agentv1.RunningOS {
	os := &agentv1.RunningOS{Source: agentv1.FromDisk, Image: s.Manifest, BootID: readTrim("/proc/sys/kernel/random/boot_id")}
	switch s.Params[diskimage.ParamSource] {
	case "recovery":
		os.Source = agentv1.FromRecovery
	case diskimage.SourceVirtualMedia:
		os.Source, os.Media = agentv1.FromVirtualMedia, s.Params[diskimage.ParamMedia]
	default:
		os.Root = agentv1.RootID(s.Params[diskimage.ParamSlot])
		os.Trial = s.Params[diskimage.ParamTrial] == "1"
	}
	if f := strings.Fields(readTrim("/proc/uptime")); len(f) > 0 {
		os.UptimeSeconds, _ = strconv.ParseFloat(f[0], 64)
	}
	return os
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func (s *Server) stage(w http.ResponseWriter, r *http.Request) {
	var req agentv1.StageRequest
	if err := jsonhttp.Decode(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	if err := req.Check(); err != nil {
		replyErr(w, fmt.Errorf("%w: %w", jsonhttp.ErrBadRequest, err))
		return
	}
	start := time.Now()
	last := time.Time{}
	root, err := s.Disk.Stage(r.Context(), s.Client, req.URL, req.SHA256, func(p Progress) {
		s.mu.Lock()
		s.progress = p
		s.mu.Unlock()
		if time.Since(last) > time.Second || p.Written == p.Total {
			last = time.Now()
			s.logf("writing slot %s: %d of %d bytes", p.Root, p.Written, p.Total)
		}
	})
	if err != nil {
		s.logf("stage %s failed: %v", req.URL, err)
		replyErr(w, err)
		return
	}
	s.logf("staged %s into slot %s in %s", req.URL, root, time.Since(start).Round(time.Millisecond))
	jsonhttp.Reply(w, http.StatusOK, agentv1.StageResult{Root: agentv1.RootID(root)})
}

func (s *Server) activate(w http.ResponseWriter, r *http.Request) {
	var req agentv1.ActivateRequest
	if err := jsonhttp.Decode(r, &req); err != nil {
		replyErr(w, err)
		return
	}
	if err := s.Disk.Activate(disk.RootID(req.Root), req.Tries); err != nil {
		replyErr(w, err)
		return
	}
	s.logf("slot %s boots next with %d tries", req.Root, req.Tries)
	jsonhttp.Reply(w, http.StatusOK, req)
}

// health is the post-boot health check: this guest is healthy once it
// serves its API from a disk boot, and commits the slot it booted.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if s.Disk.Booted == "" {
		replyErr(w, fmt.Errorf("health: booted from recovery: %w", disk.ErrNotBooted))
		return
	}
	if err := s.Disk.Commit(); err != nil {
		replyErr(w, err)
		return
	}
	s.logf("slot %s committed", s.Disk.Booted)
	jsonhttp.Reply(w, http.StatusOK, agentv1.Health{Healthy: true, Checks: []string{"agent-api"}})
}

func (s *Server) rollback(w http.ResponseWriter, _ *http.Request) {
	if err := s.Disk.Rollback(); err != nil {
		replyErr(w, err)
		return
	}
	im, err := s.Disk.Images()
	if err != nil {
		replyErr(w, err)
		return
	}
	jsonhttp.Reply(w, http.StatusOK, im.Wire())
}

func (s *Server) reboot(w http.ResponseWriter, _ *http.Request) {
	jsonhttp.Reply(w, http.StatusAccepted, struct{}{})
	s.logf("rebooting")
	go func() {
		time.Sleep(100 * time.Millisecond)
		if err := s.Restart(); err != nil {
			log.Printf("reboot: %v", err)
		}
	}()
}

func (s *Server) powerOff(w http.ResponseWriter, _ *http.Request) {
	jsonhttp.Reply(w, http.StatusAccepted, struct{}{})
	s.logf("powering off")
	go func() {
		time.Sleep(100 * time.Millisecond)
		if err := s.PowerOff(); err != nil {
			log.Printf("power off: %v", err)
		}
	}()
}

func (s *Server) recoveryOnce(w http.ResponseWriter, _ *http.Request) {
	if err := s.Disk.RequestRecoveryBoot(); err != nil {
		replyErr(w, err)
		return
	}
	s.logf("the next boot is recovery's")
	w.WriteHeader(http.StatusNoContent)
}

// reset reboots into the recovery partition once (the start of a
// reset-based reprovisioning). The recovery OS's wipe is not modelled in
// the VM yet.
func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	if err := s.Disk.RequestRecoveryBoot(); err != nil {
		replyErr(w, err)
		return
	}
	s.logf("recovery boot requested")
	s.reboot(w, r)
}

func (s *Server) clean(w http.ResponseWriter, _ *http.Request) {
	if err := s.Disk.Erase(); err != nil {
		replyErr(w, err)
		return
	}
	s.logf("disk cleaned: slots, persistent and OEM partitions erased")
	w.WriteHeader(http.StatusNoContent)
}

func replyErr(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, disk.ErrNotWritten), errors.Is(err, disk.ErrNotBooted),
		errors.Is(err, disk.ErrNoFallback), errors.Is(err, disk.ErrNoSuchRoot), errors.Is(err, disk.ErrWriteUnderWay):
		status = http.StatusConflict
	case errors.Is(err, disk.ErrNoSpace):
		status = http.StatusInsufficientStorage
	case errors.Is(err, jsonhttp.ErrBadRequest):
		status = http.StatusBadRequest
	}
	jsonhttp.Reply(w, status, agentv1.Error{Error: err.Error()})
}
