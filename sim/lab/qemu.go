package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/internal/cachedir"
	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/sim/disk"
	"github.com/upgradelab/upgradelab/sim/image"
	"github.com/upgradelab/upgradelab/sim/vm"
	"github.com/upgradelab/upgradelab/sim/vm/diskimage"
	"github.com/upgradelab/upgradelab/sim/vm/guest"
	"github.com/upgradelab/upgradelab/sim/vm/qemu"

	"libvirt.org/go/libvirt"
)

// Backends a lab file can name.
const (
	BackendTest = "test"
	BackendQEMU = "qemu"
)

// ErrNotOnQEMU refuses what the qemu backend's hosts cannot do yet.
var ErrNotOnQEMU = errors.New("not supported on the qemu backend yet")

// vmMemoryMiB is each VM's memory, whatever the lab file says the server
// has (the lab file's 64 GiB is the hardware the BMC and inventory
// describe; the guest needs a few dozen MiB).
const vmMemoryMiB = 256

// qemuBackend runs each host as a real VM (sim/vm/qemu) on a private libvirt
// daemon: power is the domain's, as on the test backend, but the boot is
// the VM's own (OVMF, GRUB's A/B choice, the kernel, the guest as init),
// and the host follows what its guest reports (vmHost.run) instead of
// modelling it.
//
// Disks are built at first Define into the host's state folder and kept:
// a lab brought up again on the same folder boots what its disks hold.
// A new disk is blank (both slots empty), with the lab's recovery image on
// its recovery partition, so a factory host boots recovery.
type qemuBackend struct {
	*LibvirtBackend
	daemon   *qemu.Daemon
	runDir   string
	stateDir string
	builder  *vm.Builder
	recovery diskimage.Payload
	accel    qemu.Accel

	// payloads serves the VM form of each image the lab's hosts stage
	// (vmHost.writeImage) to the guests, at the host's address on QEMU's user
	// network.
	payloads     *http.Server
	payloadsPort int

	mu  sync.Mutex
	vms map[string]*vmHost
	// served are the VM payloads by image name; catalogSHA maps a VM
	// payload's sha256 to the catalog image's, which the provider and
	// the status speak.
	served     map[string]diskimage.Payload
	catalogSHA map[string]string
}

// vmHost is one host's VM: its disk and its guest's API.
type vmHost struct {
	backend *qemuBackend
	spec    qemu.VMSpec
	disk    string
	env     int64
	// api is the guest's agent API.
	api *vm.Guest
	// host is the lab's host this VM is.
	host *Host
}

func newQEMUBackend(ctx context.Context, def *Definition, stateDir string) (b *qemuBackend, err error) {
	accel, err := qemu.AccelFromEnv()
	if err != nil {
		return nil, err
	}
	// libvirt's socket must fit a unix socket address, which a deep state
	// folder would not: the daemon's own folder is a short temporary one.
	runDir, err := os.MkdirTemp("", "ulvm-")
	if err != nil {
		return nil, err
	}
	b = &qemuBackend{runDir: runDir, stateDir: stateDir, accel: accel, vms: map[string]*vmHost{},
		served: map[string]diskimage.Payload{}, catalogSHA: map[string]string{}}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	if b.daemon, err = qemu.StartDaemon(ctx, filepath.Join(runDir, "libvirt"), filepath.Join(cachedir.Dir(), "run")); err != nil {
		return b, err
	}
	if b.LibvirtBackend, err = NewLibvirtBackend(b.daemon.URI); err != nil {
		return b, err
	}
	b.LibvirtBackend.domainXML = b.vmXML
	b.LibvirtBackend.undefineFlags = libvirt.DOMAIN_UNDEFINE_NVRAM
	if b.builder, err = vm.NewBuilder(ctx, filepath.Join(stateDir, "vm-build"), filepath.Join(cachedir.Dir(), "vm", "kernel"), ""); err != nil {
		return b, err
	}
	payload, err := def.Catalog.Get(def.Spec.RecoveryImage)
	if err != nil {
		return b, fmt.Errorf("recovery image: %w", err)
	}
	m, err := imagev1.ReadManifest(image.Payload(payload))
	if err != nil {
		return b, fmt.Errorf("recovery image %s: %w", def.Spec.RecoveryImage, err)
	}
	if b.recovery, err = b.builder.Payload(ctx, m); err != nil {
		return b, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return b, err
	}
	b.payloadsPort = l.Addr().(*net.TCPAddr).Port
	b.payloads = &http.Server{Handler: http.HandlerFunc(b.servePayload), ReadHeaderTimeout: 10 * time.Second}
	go b.payloads.Serve(l)
	return b, nil
}

func (b *qemuBackend) servePayload(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/payloads/"), ".img")
	b.mu.Lock()
	p, ok := b.served[name]
	b.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeFile(w, r, p.Path)
}

// vmPayload is the VM form of a catalog image (its manifest on Debian's
// kernel and the guest), served to the guests; catalogSHA is the catalog
// payload's checksum the caller verified, which the host reports for it.
func (b *qemuBackend) vmPayload(ctx context.Context, m imagev1.Manifest, catalogSHA string) (diskimage.Payload, string, error) {
	p, err := b.builder.Payload(ctx, m)
	if err != nil {
		return p, "", err
	}
	b.mu.Lock()
	b.served[m.Name] = p
	b.catalogSHA[p.SHA256] = catalogSHA
	b.mu.Unlock()
	// 10.0.2.2 is the host's loopback as QEMU's user network shows it.
	return p, fmt.Sprintf("http://10.0.2.2:%d/payloads/%s.img", b.payloadsPort, m.Name), nil
}

// catalogChecksum maps a checksum on the VM's disk to the catalog's.
func (b *qemuBackend) catalogChecksum(sum string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.catalogSHA[sum]; ok {
		return c
	}
	return sum
}

// vmXML builds (or finds) the host's disk and answers its VM's definition.
func (b *qemuBackend) vmXML(spec DomainSpec) (string, error) {
	dir := filepath.Join(b.stateDir, "hosts", spec.Name, "vm")
	diskPath := filepath.Join(dir, "system.img")
	var envOff int64
	if _, err := os.Stat(diskPath); err == nil {
		off, err := findEnvInFile(diskPath)
		if err != nil {
			return "", fmt.Errorf("host %s: its disk %s: %w (remove it to start from a factory disk)", spec.Name, diskPath, err)
		}
		envOff = off
	} else {
		d, err := diskimage.Build(context.Background(), diskPath, filepath.Join(dir, "build"), b.builder.Layout, mustScript(b.builder), nil, b.recovery)
		if err != nil {
			return "", fmt.Errorf("host %s: %w", spec.Name, err)
		}
		envOff = d.EnvOffset
		os.RemoveAll(filepath.Join(dir, "build"))
	}
	ports, err := loopback.Ports(1)
	if err != nil {
		return "", err
	}
	mac := "52:54:00:00:00:01"
	if len(spec.NICs) > 0 {
		mac = spec.NICs[0].MAC
	}
	vs := qemu.VMSpec{Name: spec.Name, CPUs: 1, MemoryMiB: vmMemoryMiB, Disk: diskPath, Dir: dir,
		AgentPort: ports[0], GuestPort: guest.Port, MAC: mac, Accel: b.accel}
	xml, err := qemu.PrepareVM(vs)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	b.vms[spec.Name] = &vmHost{backend: b, spec: vs, disk: diskPath, env: envOff, api: vm.NewGuest(fmt.Sprintf("http://127.0.0.1:%d", vs.AgentPort))}
	b.mu.Unlock()
	return xml, nil
}

// mediaISO turns what a BMC was given as virtual media into a real CD:
// the URL's payload names its image (its manifest, api/image/v1), and the
// builder makes that image's boot ISO, with the URL on its kernel command
// line as the lab's media boot has it.
func (b *qemuBackend) mediaISO(ctx context.Context, url string) (string, error) {
	payload, err := readMedia(ctx, url, image.PayloadBytes)
	if err != nil {
		return "", err
	}
	m, err := imagev1.ReadManifest(payload)
	if err != nil {
		return "", fmt.Errorf("virtual media %s: %w", url, err)
	}
	return b.builder.ISO(ctx, m, url)
}

// redefine updates a VM's definition (same domain, same UUID) for its
// next power-on: what is in its CD drive and whether it boots first.
func (b *qemuBackend) redefine(v *vmHost, cdrom string, fromCD bool) error {
	d, err := b.conn.LookupDomainByName(v.spec.Name)
	if err != nil {
		return err
	}
	uuid, err := d.GetUUIDString()
	d.Free()
	if err != nil {
		return err
	}
	vs := v.spec
	vs.UUID, vs.CDROM, vs.BootFromCD = uuid, cdrom, fromCD
	xml, err := qemu.DomainXML(vs)
	if err != nil {
		return err
	}
	nd, err := b.conn.DomainDefineXML(xml)
	if err != nil {
		return fmt.Errorf("redefine vm %s: %w", v.spec.Name, err)
	}
	return nd.Free()
}

// prepareBoot is the firmware's boot plan of a qemu host, made before
// the power goes on (the VM's OVMF then boots the device libvirt puts
// first): a Once override is used up as on the test backend, the inserted
// virtual medium becomes the VM's CD, and it boots first when the plan
// reaches the CD before the disk.
func (v *vmHost) prepareBoot(ctx context.Context) error {
	h := v.host
	h.mu.Lock()
	plan := h.bootPlanLocked()
	media := h.media
	h.saveLocked()
	h.mu.Unlock()
	fromCD := false
	for _, t := range plan.order {
		if t == BootHdd {
			break
		}
		if t == BootCd && media != "" {
			fromCD = true
			break
		}
	}
	iso := ""
	if media != "" {
		var err error
		if iso, err = v.backend.mediaISO(ctx, media); err != nil {
			h.emit(EventBoot, "BootDeviceFailed", fmt.Sprintf("%s: %v", BootCd, err), map[string]string{"target": string(BootCd)})
			iso, fromCD = "", false
		}
	}
	return v.backend.redefine(v, iso, fromCD)
}

func mustScript(b *vm.Builder) string {
	s, err := b.BootScript(b.Layout, vm.KernelArgs)
	if err != nil {
		panic(err) // the default layout always has its slots
	}
	return s
}

func findEnvInFile(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	parts, err := diskimage.ReadGPT(f)
	if err != nil {
		return 0, err
	}
	esp, err := diskimage.Find(parts, diskimage.PartESP)
	if err != nil {
		return 0, err
	}
	off, _, err := diskimage.FindEnv(f, esp.Offset, esp.Size)
	return off, err
}

// machine is the VM that Define made for the host's domain.
func (b *qemuBackend) machine(h *Host) machine {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.vms[h.spec.Name]
	v.host = h
	return v
}

// Close stops every VM and the daemon.
func (b *qemuBackend) Close() error {
	var err error
	if b.payloads != nil {
		b.payloads.Close()
	}
	if b.LibvirtBackend != nil {
		err = b.LibvirtBackend.Close()
	}
	if b.daemon != nil {
		err = errors.Join(err, b.daemon.Stop())
	}
	os.RemoveAll(b.runDir)
	return err
}

// readDisk is the A/B state on the VM's disk, read from the image file
// (QEMU writes it back through the host's page cache, so a running VM's
// writes are seen).
func (v *vmHost) readDisk() (*disk.Disk, error) {
	env, err := diskimage.ReadEnv(v.disk, v.env)
	if err != nil {
		return nil, err
	}
	return diskimage.DiskState(env)
}

// run is a qemu host's power cycle in place of boot: the VM boots
// itself, and the host reports what its guest says. A new boot ID is a
// boot (after a power-on, a reset, or the guest's own reboot, which
// libvirt does not report as a power change); a guest that stops
// answering is booting again. The A/B state is read from the disk.
func (v *vmHost) run(ctx context.Context) {
	h := v.host
	h.mu.Lock()
	h.phase = PhaseBooting
	h.saveLocked()
	h.mu.Unlock()
	var bootID string
	lastAnswer := time.Now()
	diskOK := true
	for ctx.Err() == nil {
		st, err := v.api.Status(ctx, guestAnswerTimeout)
		if ok := v.refreshDisk(); ok != diskOK {
			diskOK = ok
			if !ok {
				h.emit(EventDisk, "DiskUnreadable", "the bootloader's environment block on "+v.disk+" does not parse", nil)
			}
		}
		switch {
		case err == nil && st.OS != nil && st.OS.BootID != bootID:
			bootID, lastAnswer = st.OS.BootID, time.Now()
			v.guestUp(ctx, st)
		case err == nil:
			lastAnswer = time.Now()
		case bootID != "" && time.Since(lastAnswer) > guestSilentIsRebooting:
			bootID = ""
			h.mu.Lock()
			if ctx.Err() == nil {
				h.os, h.phase = nil, PhaseBooting
				h.saveLocked()
			}
			h.mu.Unlock()
			h.emit(EventBoot, "GuestStopped", "the guest stopped answering: it is rebooting or hung", nil)
		}
		select {
		case <-ctx.Done():
		case <-time.After(guestPoll):
		}
	}
}

// How the lab follows a VM's guest, in wall time: the guest runs in real
// time under QEMU, whatever the lab's time scale.
const (
	// guestPoll is how often the guest's status is asked for.
	guestPoll = 250 * time.Millisecond
	// guestAnswerTimeout bounds one status call.
	guestAnswerTimeout = time.Second
	// guestSilentIsRebooting is how long a guest that answered before may
	// stay silent before the host counts it as booting again.
	guestSilentIsRebooting = 3 * time.Second
)

// guestUp records the OS the guest reports.
func (v *vmHost) guestUp(ctx context.Context, st agentv1.Status) {
	h := v.host
	running := &RunningOS{Source: OSSource(st.OS.Source), Root: disk.RootID(st.OS.Root), Trial: st.OS.Trial,
		Image: st.OS.Image, Media: st.OS.Media, BootID: st.OS.BootID}
	h.mu.Lock()
	if running.Source == FromDisk {
		h.disk.Booted = running.Root
	}
	h.mu.Unlock()
	h.osUp(ctx, BootHdd, running)
}

// refreshDisk mirrors the real disk's A/B state into the host's disk
// model, which Status reports; the host's state is written only when it
// changed. It answers whether the disk could be read.
func (v *vmHost) refreshDisk() bool {
	h := v.host
	d, err := v.readDisk()
	if err != nil {
		return false
	}
	for _, s := range d.Slots {
		s.Checksum = v.backend.catalogChecksum(s.Checksum)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// /etc is the lab's half of the OS (the guest keeps none): a slot's
	// edits stay while it holds the same image.
	for name, s := range d.Slots {
		if old := h.disk.Slots[name]; old != nil && old.Image == s.Image && old.Checksum == s.Checksum {
			s.Etc = old.Etc
		}
	}
	if reflect.DeepEqual(h.disk.Slots, d.Slots) && h.disk.RecoveryOnce == d.RecoveryOnce {
		return true
	}
	h.disk.Slots, h.disk.RecoveryOnce = d.Slots, d.RecoveryOnce
	h.saveLocked()
	return true
}

// writeImage is WriteImage on a VM: the catalog image is fetched and
// verified against wantSHA256 as on the test backend, before anything is
// written; the guest then writes the image's VM form into the slot its
// disk stages into, for real. The host reports the catalog's checksum for
// the slot.
func (v *vmHost) writeImage(ctx context.Context, url, wantSHA256 string) (disk.RootID, error) {
	h := v.host
	if h.Status().Phase != PhaseRunning {
		return "", fmt.Errorf("host %s: stage %s: %w", h.spec.Name, url, ErrNotRunning)
	}
	_, m, err := h.fetchImage(ctx, url, wantSHA256)
	if err != nil {
		return "", err
	}
	p, guestURL, err := v.backend.vmPayload(ctx, m, wantSHA256)
	if err != nil {
		return "", fmt.Errorf("host %s: stage %s: %w", h.spec.Name, m.Name, err)
	}
	h.emit(EventDisk, "WriteStarted", fmt.Sprintf("writing %s (%d MiB as the VM's payload) into the staging slot", m.Name, p.Size>>20), map[string]string{"image": m.Name})
	var res agentv1.StageResult
	if err := v.api.Call(ctx, agentv1.PathStage, agentv1.StageRequest{URL: guestURL, SHA256: p.SHA256}, &res); err != nil {
		v.refreshDisk()
		err = guestErr(err)
		h.emit(EventDisk, writeRefusal(err), err.Error(), map[string]string{"url": url, "image": m.Name})
		return "", fmt.Errorf("host %s: stage %s: %w", h.spec.Name, m.Name, err)
	}
	v.refreshDisk()
	h.emit(EventDisk, "WriteFinished", fmt.Sprintf("%s written to slot %s", m.Name, res.Root), map[string]string{"root": string(res.Root), "image": m.Name})
	return disk.RootID(res.Root), nil
}

// diskOp forwards one update-contract operation to the guest, which
// applies it to the real disk, then mirrors the disk and records it as the
// test backend's diskOp does.
func (v *vmHost) diskOp(reason, msg, path string, body any) error {
	h := v.host
	if h.Status().Phase != PhaseRunning {
		return fmt.Errorf("host %s: %s: %w", h.spec.Name, reason, ErrNotRunning)
	}
	if err := v.api.Call(context.Background(), path, body, nil); err != nil {
		return fmt.Errorf("host %s: %s: %w", h.spec.Name, reason, guestErr(err))
	}
	v.refreshDisk()
	h.emit(EventDisk, reason, msg, nil)
	return nil
}

// guestErr gives a guest's refusal the sentinel the test backend would
// have answered with, so the agent API answers the same status.
func guestErr(err error) error {
	var ae *vm.AgentError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.Status {
	case http.StatusInsufficientStorage:
		return fmt.Errorf("%w: %w", disk.ErrNoSpace, err)
	case http.StatusConflict:
		if strings.Contains(ae.Message, disk.ErrWriteUnderWay.Error()) {
			return fmt.Errorf("%w: %w", disk.ErrWriteUnderWay, err)
		}
		return fmt.Errorf("%w: %w", disk.ErrNotWritten, err)
	}
	return err
}

// shutdown is a graceful shutdown of a VM: the guest is asked to power
// off (the lab's stand-in for ACPI) and the power goes when the guest
// cuts it.
func (v *vmHost) shutdown(ctx context.Context) error {
	h := v.host
	since := h.powerChangesTo(PoweredOff)
	if err := v.api.Call(ctx, guest.PathPowerOff, nil, nil); err != nil {
		return fmt.Errorf("host %s: shutdown: %w", h.spec.Name, err)
	}
	return h.waitPower(PoweredOff, since)
}

// lacks refuses what only the modelled hardware does yet: network boot,
// HTTP boot, the firmware setup screen and hangs are not wired to the VM.
func (v *vmHost) lacks(op string) error {
	return fmt.Errorf("host %s: %s: %w", v.host.spec.Name, op, ErrNotOnQEMU)
}

// erase erases a VM's disk for real (the guest zeroes its slots and data
// partitions and empties its slots in the bootloader's block) before the
// host's bookkeeping erases the rest (persistent files, config drive).
// The guest refuses from a disk boot, as the lab does.
func (v *vmHost) erase() error {
	if err := v.api.Call(context.Background(), agentv1.PathClean, nil, nil); err != nil {
		return fmt.Errorf("host %s: erase: %w", v.host.spec.Name, guestErr(err))
	}
	v.refreshDisk()
	return nil
}

// recoveryOnce asks the guest to set the bootloader's one-time recovery
// flag on the real disk.
func (v *vmHost) recoveryOnce() error {
	if err := v.api.Call(context.Background(), guest.PathRecoveryOnce, nil, nil); err != nil {
		return fmt.Errorf("host %s: recovery boot: %w", v.host.spec.Name, err)
	}
	v.refreshDisk()
	return nil
}

func (v *vmHost) activate(root disk.RootID, tries int) error {
	return v.diskOp(reasonActivated, activatedMsg(root, tries), agentv1.PathActivate,
		agentv1.ActivateRequest{Root: agentv1.RootID(root), Tries: tries})
}

func (v *vmHost) commit() error {
	return v.diskOp(reasonCommitted, committedMsg, agentv1.PathHealth, nil)
}

func (v *vmHost) rollback() error {
	return v.diskOp(reasonRolledBack, rolledBackMsg, agentv1.PathRollback, nil)
}

func (v *vmHost) guest() (url, console string, ok bool) { return v.api.URL, v.spec.ConsoleLog(), true }
