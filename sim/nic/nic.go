package nic

import (
	"errors"
	"fmt"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
)

// FlashState is the state of the NIC's flash.
type FlashState string

const (
	FlashIdle     FlashState = "idle"
	FlashWriting  FlashState = "writing"
	FlashRecovery FlashState = "recovery" // a flash was cut: the NIC runs its recovery firmware
)

// Port is one NIC port's hardware state.
type Port struct {
	Name  string     `json:"name" yaml:"name"`
	MAC   string     `json:"mac" yaml:"mac"`
	Model string     `json:"model" yaml:"model"`
	Flash FlashState `json:"flash" yaml:"flash"`
	// Active is the NVM image the NIC runs; Pending was flashed and runs
	// after the next reset.
	Active  imagev1.NVMImage  `json:"active" yaml:"active"`
	Pending *imagev1.NVMImage `json:"pending,omitempty" yaml:"pending,omitempty"`
	writing *imagev1.NVMImage
}

// ErrFlashBusy is returned while a flash is under way.
var ErrFlashBusy = errors.New("a flash is under way")

// BeginFlash starts writing img.
func (p *Port) BeginFlash(img imagev1.NVMImage) error {
	if p.Flash == FlashWriting {
		return fmt.Errorf("port %s: flash %s: %w", p.Name, img.Name, ErrFlashBusy)
	}
	p.Flash = FlashWriting
	p.writing = &img
	return nil
}

// FinishFlash completes the write; the image runs after the next reset.
// A NIC in recovery mode that is fully reflashed leaves recovery then too.
func (p *Port) FinishFlash() error {
	if p.Flash != FlashWriting || p.writing == nil {
		return fmt.Errorf("port %s: no flash under way", p.Name)
	}
	p.Pending = p.writing
	p.writing = nil
	p.Flash = FlashIdle
	return nil
}

// PowerLoss cuts a flash under way: the NIC is left in recovery mode.
func (p *Port) PowerLoss() {
	if p.Flash == FlashWriting {
		p.Flash = FlashRecovery
		p.writing = nil
		p.Pending = nil
	}
}

// Reset is a power cycle or host reset: a pending image becomes active.
func (p *Port) Reset() {
	if p.Pending != nil {
		p.Active = *p.Pending
		p.Pending = nil
	}
}

// Link is the port as the booted OS sees it.
type Link struct {
	Up bool `json:"up" yaml:"up"`
	// Rule is the rule that decided; Level and Message what the driver
	// logged ("" when it logged nothing).
	Rule    string `json:"rule" yaml:"rule"`
	Level   string `json:"level,omitempty" yaml:"level,omitempty"`
	Message string `json:"message,omitempty" yaml:"message,omitempty"`
}
