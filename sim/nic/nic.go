// Package nic models an Intel i40e (X710 family) port: the NVM image in its
// flash with a firmware version and an admin-queue API version, the driver of
// the booted OS that expects an API version, and what happens between the
// two. What the driver does with each pairing is data (Rules), read from
// fixtures/nic/*.yaml.
package nic

import (
	"errors"
	"fmt"
)

// APIVersion is the admin-queue API version an NVM image speaks and a
// driver expects.
type APIVersion struct {
	Major int `json:"major" yaml:"major"`
	Minor int `json:"minor" yaml:"minor"`
}

func (v APIVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// NVMImage is one flashable NVM image.
type NVMImage struct {
	Name     string     `json:"name" yaml:"name"`
	Firmware string     `json:"firmware" yaml:"firmware"` // e.g. "9.20"
	EETrack  string     `json:"eetrack" yaml:"eetrack"`   // e.g. "0x8000d95e"
	API      APIVersion `json:"api" yaml:"api"`
	// FlashSeconds is the modelled time to write the image.
	FlashSeconds float64 `json:"flashSeconds" yaml:"flashSeconds"`
}

// Driver is the i40e driver of an OS image.
type Driver struct {
	Version string     `json:"version" yaml:"version"`
	API     APIVersion `json:"api" yaml:"api"`
	// MinAPIMinor is the oldest NVM API minor the driver runs without asking
	// for an NVM update.
	MinAPIMinor int `json:"minApiMinor" yaml:"minApiMinor"`
}

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
	Active  NVMImage  `json:"active" yaml:"active"`
	Pending *NVMImage `json:"pending,omitempty" yaml:"pending,omitempty"`
	writing *NVMImage
}

// ErrFlashBusy is returned while a flash is under way.
var ErrFlashBusy = errors.New("a flash is under way")

// BeginFlash starts writing img.
func (p *Port) BeginFlash(img NVMImage) error {
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
