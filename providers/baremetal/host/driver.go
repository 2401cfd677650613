package host

import (
	"context"
	"errors"
	"fmt"
	"strings"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	gofish "github.com/stmcginnis/gofish/redfish"

	"github.com/upgradelab/upgradelab/providers/baremetal/ipmi"
	"github.com/upgradelab/upgradelab/providers/baremetal/netboot"
	"github.com/upgradelab/upgradelab/providers/baremetal/redfish"
)

// bmcDriver is what the host controller asks of a host's BMC, whichever
// protocol its bmc.address names: Metal3's redfish-virtualmedia+https://
// (Ironic's redfish-virtualmedia hardware type) or ipmi:// (its ipmi
// hardware type, with PXE). The controller's phases are the same for
// both; only how the deploy ramdisk is booted and how the hardware is
// inspected differ.
type bmcDriver interface {
	PoweredOn() bool
	// PowerOn turns the host on, or restarts it when on.
	PowerOn() error
	// GracefulShutdown asks the OS to shut down.
	GracefulShutdown() error
	// PowerOff cuts the power.
	PowerOff() error
	// BootDeploy makes the next boot load the deploy image at url.
	BootDeploy(url string) error
	// BootDisk makes the next boot the installed OS, undoing BootDeploy.
	BootDisk() error
	// Inspect reads the hardware out of band; errInBandOnly when the
	// protocol cannot (the deploy ramdisk is asked instead).
	Inspect() (redfish.Hardware, error)
	// SystemID names the system as its BMC does ("" when it cannot).
	SystemID() string
	Close()
}

// errInBandOnly: the BMC knows nothing of the hardware (IPMI).
var errInBandOnly = errors.New("the BMC has no hardware inventory: inspect in band")

// dialBMC connects to the host's BMC with the credentials of its secret,
// by the scheme of its bmc.address.
func (r *Reconciler) dialBMC(ctx context.Context, host *metal3.BareMetalHost) (bmcDriver, error) {
	user, pass, _, err := r.credentials(ctx, host)
	if err != nil {
		return nil, err
	}
	creds := func(err error) error {
		return fmt.Errorf("%w (username %q from secret %s/%s)", err, user, host.Namespace, host.Spec.BMC.CredentialsName)
	}
	switch address := host.Spec.BMC.Address; {
	case strings.HasPrefix(address, ipmi.AddressScheme):
		addr, err := ipmi.ParseAddress(address)
		if err != nil {
			return nil, fmt.Errorf("spec.bmc.address: %w", err)
		}
		c, err := ipmi.Dial(ctx, addr, user, pass, ipmi.Options{Binary: r.IPMITool})
		if errors.Is(err, ipmi.ErrCredentials) {
			return nil, creds(err)
		}
		if err != nil {
			return nil, err
		}
		return &ipmiDriver{ctx: ctx, c: c, mac: host.Spec.BootMACAddress, boot: r.NetBoot}, nil
	default:
		addr, err := redfish.ParseAddress(address)
		if err != nil {
			return nil, fmt.Errorf("spec.bmc.address: %w (or %sHOST:PORT)", err, ipmi.AddressScheme)
		}
		c, err := redfish.Dial(addr, user, pass, r.BMCHTTP)
		if errors.Is(err, redfish.ErrCredentials) {
			return nil, creds(err)
		}
		if err != nil {
			return nil, err
		}
		return redfishDriver{c}, nil
	}
}

// redfishDriver boots the deploy ramdisk from virtual media.
type redfishDriver struct{ *redfish.Client }

func (d redfishDriver) BootDeploy(url string) error {
	if err := d.InsertMedia(url); err != nil {
		return fmt.Errorf("inserting the deploy media: %w", err)
	}
	if err := d.BootOnce(gofish.CdBootSourceOverrideTarget); err != nil {
		return fmt.Errorf("boot override Cd: %w", err)
	}
	return nil
}

func (d redfishDriver) BootDisk() error {
	if err := d.EjectMedia(); err != nil {
		return fmt.Errorf("ejecting the deploy media: %w", err)
	}
	if err := d.BootOnce(gofish.HddBootSourceOverrideTarget); err != nil {
		return fmt.Errorf("boot override Hdd: %w", err)
	}
	return nil
}

// ipmiDriver boots the deploy ramdisk from the network: the boot server
// gets a script for the host's boot MAC, the BMC's next boot is PXE.
type ipmiDriver struct {
	ctx  context.Context
	c    *ipmi.Client
	mac  string
	boot *netboot.Server
}

func (d *ipmiDriver) PoweredOn() bool         { return d.c.PoweredOn() }
func (d *ipmiDriver) PowerOn() error          { return d.c.PowerOn(d.ctx) }
func (d *ipmiDriver) GracefulShutdown() error { return d.c.GracefulShutdown(d.ctx) }
func (d *ipmiDriver) PowerOff() error         { return d.c.PowerOff(d.ctx) }
func (d *ipmiDriver) SystemID() string        { return "" }
func (d *ipmiDriver) Close()                  { d.c.Close() }

func (d *ipmiDriver) Inspect() (redfish.Hardware, error) { return redfish.Hardware{}, errInBandOnly }

func (d *ipmiDriver) BootDeploy(url string) error {
	if d.boot == nil {
		return errors.New("an ipmi:// host boots its deploy ramdisk from the network, and this provider runs no boot server (--netboot-addr)")
	}
	if d.mac == "" {
		return errors.New("an ipmi:// host needs spec.bootMACAddress: the boot server answers by MAC")
	}
	d.boot.Chain(d.mac, url)
	if err := d.c.BootOnce(d.ctx, ipmi.DevicePXE); err != nil {
		return fmt.Errorf("bootdev pxe: %w", err)
	}
	return nil
}

func (d *ipmiDriver) BootDisk() error {
	if d.boot != nil {
		d.boot.Forget(d.mac)
	}
	if err := d.c.BootOnce(d.ctx, ipmi.DeviceDisk); err != nil {
		return fmt.Errorf("bootdev disk: %w", err)
	}
	return nil
}
