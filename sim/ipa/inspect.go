package ipa

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/upgradelab/upgradelab/sim/lab"
)

// report is what IPA posts to ironic-inspector's /v1/continue: the
// inventory (the hardware as the ramdisk reads it in band), the disk it
// would deploy to and, with the extra-hardware collector, the facts
// lshw gives per device (here each NIC's driver and firmware).
type report struct {
	Inventory inventory   `json:"inventory"`
	RootDisk  blockDevice `json:"root_disk"`
	Extra     [][]string  `json:"data,omitempty"`
	// Error is the ramdisk's own failure (none: inspector checks it).
	Error *string `json:"error"`
}

type inventory struct {
	Interfaces   []iface       `json:"interfaces"`
	CPU          cpu           `json:"cpu"`
	Memory       memory        `json:"memory"`
	Disks        []blockDevice `json:"disks"`
	BMCAddress   string        `json:"bmc_address"`
	BMCv6Address string        `json:"bmc_v6address"`
	SystemVendor systemVendor  `json:"system_vendor"`
	Boot         boot          `json:"boot"`
	Hostname     string        `json:"hostname"`
}

type iface struct {
	Name       string  `json:"name"`
	MAC        string  `json:"mac_address"`
	IPv4       *string `json:"ipv4_address"`
	IPv6       *string `json:"ipv6_address"`
	HasCarrier bool    `json:"has_carrier"`
}

type cpu struct {
	ModelName    string   `json:"model_name"`
	Frequency    string   `json:"frequency"`
	Count        int      `json:"count"`
	Architecture string   `json:"architecture"`
	Flags        []string `json:"flags"`
}

type memory struct {
	Total      int64 `json:"total"`
	PhysicalMB int   `json:"physical_mb"`
}

type blockDevice struct {
	Name       string `json:"name"`
	Model      string `json:"model"`
	Size       int64  `json:"size"`
	Rotational bool   `json:"rotational"`
	Serial     string `json:"serial"`
}

type systemVendor struct {
	ProductName  string `json:"product_name"`
	SerialNumber string `json:"serial_number"`
	Manufacturer string `json:"manufacturer"`
}

type boot struct {
	CurrentBootMode string `json:"current_boot_mode"`
}

// extraHardware is the collector that adds lshw's per-device facts.
const extraHardware = "extra-hardware"

// newReport reads inv as IPA's default collector (and extra-hardware
// when collectors names it) reports it. Where it is kinder than IPA: the
// BMC's LAN address is not read in band (IPA reads it over IPMI's KCS;
// it reports 0.0.0.0, as IPA does when it cannot), the one disk is
// /dev/sda and the CPU has no flags.
func newReport(inv lab.Inventory, collectors []string) report {
	root := blockDevice{Name: "/dev/sda", Model: "upgradelab disk", Size: int64(inv.DiskGiB) << 30, Serial: inv.Serial + "-sda"}
	r := report{RootDisk: root, Inventory: inventory{
		CPU:          cpu{ModelName: "upgradelab vCPU", Frequency: "2400", Count: inv.CPUs, Architecture: "x86_64", Flags: []string{}},
		Memory:       memory{Total: int64(inv.MemoryMiB) << 20, PhysicalMB: inv.MemoryMiB},
		Disks:        []blockDevice{root},
		BMCAddress:   "0.0.0.0",
		BMCv6Address: "::/0",
		SystemVendor: systemVendor{ProductName: "upgradelab host", SerialNumber: inv.Serial, Manufacturer: "upgradelab"},
		Boot:         boot{CurrentBootMode: "uefi"},
		Hostname:     inv.Hostname,
	}}
	extra := slices.Contains(collectors, extraHardware)
	for _, n := range inv.NICs {
		i := iface{Name: n.Name, MAC: n.MAC, HasCarrier: n.Up}
		if n.IP != "" {
			i.IPv4 = &n.IP
		}
		r.Inventory.Interfaces = append(r.Inventory.Interfaces, i)
		if extra {
			r.Extra = append(r.Extra, []string{"network", n.Name, "serial", n.MAC},
				[]string{"network", n.Name, "driver", n.Driver}, []string{"network", n.Name, "firmware", n.Firmware})
		}
	}
	return r
}

// inspect posts the host's report to inspector's callback, retrying
// while inspector cannot be reached (no connection); any other failure
// ends the inspection, as in IPA, which logs it and goes on: a report
// inspector may have processed is never sent twice.
func (a *Agent) inspect(ctx context.Context) {
	r := newReport(a.host.Inventory(), a.params.Collectors)
	for failures := 0; ; failures++ {
		var ans struct {
			UUID string `json:"uuid"`
		}
		err := a.call(ctx, http.MethodPost, a.params.InspectionURL, "", r, &ans)
		if err == nil {
			a.record("IronicInspectionSent", fmt.Sprintf("%d NICs, %d CPUs, %d MiB to %s (node %s)", len(r.Inventory.Interfaces), r.Inventory.CPU.Count, r.Inventory.Memory.PhysicalMB, a.params.InspectionURL, ans.UUID))
			return
		}
		var refused *httpError
		if errors.As(err, &refused) {
			a.record("IronicInspectionRefused", err.Error())
			return
		}
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			a.record("IronicInspectionFailed", err.Error())
			return
		}
		if failures%20 == 0 {
			a.record("IronicInspectionFailed", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// collectors reads ipa-inspection-collectors (default: the default
// collector alone).
func collectors(v string) []string {
	if v == "" {
		return []string{"default"}
	}
	return strings.Split(v, ",")
}
