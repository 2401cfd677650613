package v1

import "fmt"

// APIVersion is the admin-queue API version an i40e NVM image speaks and
// a driver expects.
type APIVersion struct {
	Major int `json:"major" yaml:"major"`
	Minor int `json:"minor" yaml:"minor"`
}

func (v APIVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// NVMImage is one flashable NIC NVM image; a firmware package's
// descriptor (JSON, served next to the package) is one.
type NVMImage struct {
	Name     string     `json:"name" yaml:"name"`
	Firmware string     `json:"firmware" yaml:"firmware"` // e.g. "9.20"
	EETrack  string     `json:"eetrack" yaml:"eetrack"`   // e.g. "0x8000d95e"
	API      APIVersion `json:"api" yaml:"api"`
	// FlashSeconds is the modelled time to write the image.
	FlashSeconds float64 `json:"flashSeconds" yaml:"flashSeconds"`
}

// Driver is an OS image's i40e driver.
type Driver struct {
	Version string     `json:"version" yaml:"version"`
	API     APIVersion `json:"api" yaml:"api"`
	// MinAPIMinor is the oldest NVM API minor the driver runs without
	// asking for an NVM update.
	MinAPIMinor int `json:"minApiMinor" yaml:"minApiMinor"`
}
