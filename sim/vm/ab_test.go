package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/upgradelab/upgradelab/api/hostagent/v1"
	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/sim/abcases"
	"github.com/upgradelab/upgradelab/sim/vm/diskimage"
)

// abVM plays the A/B table on a real VM: GRUB picks the slot, the guest
// writes it, and a power cut is QEMU killed.
type abVM struct {
	m        *Machine
	images   *imageServer
	payloads map[string]diskimage.Payload
	bootID   string
	running  bool
}

func (v *abVM) Boot(ctx context.Context) (abcases.Booted, error) {
	if v.running {
		if err := v.m.Call(ctx, agentv1.PathReboot, nil, nil); err != nil {
			return abcases.Booted{}, err
		}
	} else if err := v.m.PowerOn(); err != nil {
		return abcases.Booted{}, err
	}
	return v.waitBoot(ctx)
}

func (v *abVM) waitBoot(ctx context.Context) (abcases.Booted, error) {
	st, err := v.m.WaitBoot(ctx, v.bootID)
	if err != nil {
		return abcases.Booted{}, err
	}
	v.bootID, v.running = st.OS.BootID, true
	b := abcases.Booted{Source: "disk", Slot: string(st.OS.Root), Trial: st.OS.Trial, Image: st.OS.Image.Name}
	if st.OS.Source == agentv1.FromRecovery {
		b.Source = "recovery"
	}
	return b, nil
}

func (v *abVM) Stage(ctx context.Context, image string, cut bool) (string, error) {
	p, ok := v.payloads[image]
	if !ok {
		return "", fmt.Errorf("no payload %q", image)
	}
	req := agentv1.StageRequest{URL: v.images.guestURL(image, cut), SHA256: p.SHA256}
	if !cut {
		var res agentv1.StageResult
		err := v.m.Call(ctx, agentv1.PathStage, req, &res)
		return string(res.Root), err
	}
	done := make(chan error, 1)
	go func() { done <- v.m.Call(ctx, agentv1.PathStage, req, nil) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := v.m.Status(ctx, time.Second)
		if err == nil && st.Images.Staged != nil && st.Images.Staged.State == agentv1.RootWriting {
			if err := v.m.PowerCut(); err != nil {
				return "", err
			}
			v.running = false
			if err := <-done; err == nil {
				return "", errors.New("the stage finished although the power was cut during the write")
			}
			return string(st.Images.Staged.ID), nil
		}
		select {
		case err := <-done:
			return "", fmt.Errorf("the write ended (%s) before the power could be cut: the image server's throttle is too fast", fmt.Sprint(err))
		default:
		}
		if time.Now().After(deadline) {
			return "", errors.New("the write never showed as under way")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (v *abVM) Activate(ctx context.Context, root string, tries int) error {
	return v.m.Call(ctx, agentv1.PathActivate, agentv1.ActivateRequest{Root: agentv1.RootID(root), Tries: tries}, nil)
}
func (v *abVM) Commit(ctx context.Context) error { return v.m.Call(ctx, agentv1.PathHealth, nil, nil) }
func (v *abVM) Rollback(ctx context.Context) error {
	return v.m.Call(ctx, agentv1.PathRollback, nil, nil)
}

func (v *abVM) Reset(ctx context.Context) (abcases.Booted, error) {
	if err := v.m.Call(ctx, agentv1.PathReset, nil, nil); err != nil {
		return abcases.Booted{}, err
	}
	return v.waitBoot(ctx)
}

func (v *abVM) Clean(ctx context.Context) error { return v.m.Call(ctx, agentv1.PathClean, nil, nil) }

func (v *abVM) Images(ctx context.Context) (agentv1.Images, error) {
	st, err := v.m.Status(ctx, 5*time.Second)
	return st.Images, err
}

// TestRealDiskAgreesWithTheModel plays every A/B case on sim/disk's model
// and on a VM with a real GPT disk, GRUB and the guest, and requires the
// same outcome at every step from both (each also checked against the
// table).
func TestRealDiskAgreesWithTheModel(t *testing.T) {
	cases, err := abcases.Cases()
	if err != nil {
		t.Fatal(err)
	}
	lab := newTestLab(t)
	ctx := context.Background()
	payloads := map[string]diskimage.Payload{}
	for _, name := range []string{"os-a", "os-b", abcases.RecoveryImage} {
		p, err := lab.builder.Payload(ctx, imagev1.Manifest{Name: name, Kernel: lab.builder.Kernel().Package})
		if err != nil {
			t.Fatal(err)
		}
		payloads[name] = p
	}
	lab.images.payloads = payloads
	sem := make(chan struct{}, 2) // two VMs at a time on two cores
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			modelTrace, err := abcases.Run(ctx, c, abcases.NewModel(c.Factory))
			if err != nil {
				t.Fatalf("the model: %v", err)
			}
			var slotA *diskimage.Payload
			if c.Factory != "" {
				p := payloads[c.Factory]
				slotA = &p
			}
			m := lab.machine(t, fmt.Sprintf("ab-%d", i), slotA, payloads[abcases.RecoveryImage])
			vmTrace, err := abcases.Run(ctx, c, &abVM{m: m, images: lab.images, payloads: payloads})
			if err != nil {
				t.Fatalf("the VM: %v\nconsole:\n%s", err, consoleOf(m))
			}
			if strings.Join(modelTrace, "\n") != strings.Join(vmTrace, "\n") {
				t.Errorf("the model and the VM disagree:\nmodel:\n%s\nvm:\n%s", strings.Join(modelTrace, "\n"), strings.Join(vmTrace, "\n"))
			}
			if out := consoleOf(m); strings.Contains(out, "Kernel panic") {
				t.Logf("the guest's kernel panicked and restarted during the case (KernelArgs' softlockup_panic):\n%s", out)
			}
		})
	}
}

// A bootloader that never saves a trial's spent try boots an uncommitted
// slot for ever. The same table on the same VM must catch it: the test
// above could fail.
func TestRealDiskCatchesABootloaderThatDoesNotCountTries(t *testing.T) {
	cases, err := abcases.Cases()
	if err != nil {
		t.Fatal(err)
	}
	var c abcases.Case
	for _, x := range cases {
		if strings.Contains(x.Name, "never passes its health check") {
			c = x
		}
	}
	lab := newTestLab(t)
	lab.builder.BootScript = func(l diskimage.Layout, args string) (string, error) {
		s, err := diskimage.GrubConfig(l, args)
		var kept []string
		for _, line := range strings.Split(s, "\n") {
			if !strings.Contains(line, "save_env --file $prefix/grubenv A_TRIES") && !strings.Contains(line, "save_env --file $prefix/grubenv B_TRIES") {
				kept = append(kept, line)
			}
		}
		if len(kept) != len(strings.Split(s, "\n"))-2 {
			t.Fatal("the boot script no longer saves tries as this test expects")
		}
		return strings.Join(kept, "\n"), err
	}
	ctx := context.Background()
	payloads := map[string]diskimage.Payload{}
	for _, name := range []string{"os-a", "os-b", abcases.RecoveryImage} {
		p, err := lab.builder.Payload(ctx, imagev1.Manifest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		payloads[name] = p
	}
	lab.images.payloads = payloads
	a := payloads["os-a"]
	m := lab.machine(t, "ab-broken", &a, payloads[abcases.RecoveryImage])
	_, err = abcases.Run(ctx, c, &abVM{m: m, images: lab.images, payloads: payloads})
	if err == nil || !strings.Contains(err.Error(), "step 4 (boot): roots {A: committed, B: written tries=1}") {
		t.Fatalf("a bootloader without boot counting passed, or failed elsewhere: %v\nconsole:\n%s", err, consoleOf(m))
	}
}

// consoleOf is the guest's and GRUB's lines of a VM's console and the
// kernel's own (at loglevel 4: warnings, lockups, panics and their stacks),
// without the firmware's screen control.
func consoleOf(m *Machine) string {
	b, _ := os.ReadFile(m.Spec.ConsoleLog())
	var keep []string
	for _, l := range strings.Split(strings.ReplaceAll(string(b), "\r", "\n"), "\n") {
		switch {
		case strings.Contains(l, "upgradelab-"):
			_, rest, _ := strings.Cut(l, "upgradelab-")
			keep = append(keep, "upgradelab-"+strings.TrimSpace(rest))
		case strings.HasPrefix(l, "["):
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	return strings.Join(keep, "\n")
}
