package host

import (
	"context"
	"errors"
	"sort"
	"strings"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/upgradelab/upgradelab/providers/baremetal/callback"
)

// register checks that the BMC answers and takes the credentials. A
// registered host announced itself and has no BMC to check.
func (r *Reconciler) register(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	if registered(host) {
		host.Status.HardwareDetails = &metal3.HardwareDetails{
			Hostname: host.Annotations[callback.HostnameAnnotation],
			NIC:      []metal3.NIC{{MAC: host.Spec.BootMACAddress}},
		}
		host.Status.PoweredOn = true
		setState(host, metal3.StateAvailable)
		return ctrl.Result{Requeue: true}, nil
	}
	setState(host, metal3.StateRegistering)
	if host.Spec.BMC.Address == "" {
		return ctrl.Result{}, failed(metal3.RegistrationError, "spec.bmc.address is empty")
	}
	bmc, err := r.dialBMC(ctx, host)
	if err != nil {
		return ctrl.Result{}, failed(metal3.RegistrationError, "%v", err)
	}
	defer bmc.Close()
	_, _, version, _ := r.credentials(ctx, host)
	host.Status.GoodCredentials = metal3.CredentialsStatus{
		Reference: &corev1.SecretReference{Namespace: host.Namespace, Name: host.Spec.BMC.CredentialsName}, Version: version,
	}
	host.Status.PoweredOn = bmc.PoweredOn()
	setState(host, metal3.StateInspecting)
	return ctrl.Result{Requeue: true}, nil
}

// inspect reads the hardware over Redfish: CPUs, memory, NICs, and every
// firmware version (BIOS, BMC, each NIC's NVM) into the host's
// HostFirmwareComponents. A BMC that cannot tell (IPMI) gets in-band
// inspection instead.
func (r *Reconciler) inspect(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	if r.deployBootPending(host) { // in band, waiting for the ramdisk
		return ctrl.Result{RequeueAfter: r.heartbeatWait()}, nil
	}
	bmc, err := r.dialBMC(ctx, host)
	if err != nil {
		return ctrl.Result{}, failed(metal3.InspectionError, "%v", err)
	}
	defer bmc.Close()
	hw, err := bmc.Inspect()
	if errors.Is(err, errInBandOnly) {
		return r.inspectInBand(ctx, host, bmc)
	}
	if err != nil {
		return ctrl.Result{}, failed(metal3.InspectionError, "%v", err)
	}
	details := &metal3.HardwareDetails{
		Hostname:     bmc.SystemID(),
		CPU:          metal3.CPU{Count: hw.CPUs, Arch: "x86_64"},
		RAMMebibytes: hw.MemoryMiB,
		SystemVendor: metal3.HardwareSystemVendor{Manufacturer: "upgradelab", SerialNumber: hw.Serial},
		Firmware:     metal3.Firmware{BIOS: metal3.BIOS{Version: hw.Firmware["BIOS"]}},
	}
	for _, n := range hw.NICs {
		details.NIC = append(details.NIC, metal3.NIC{Name: n.Name, MAC: n.MAC, Model: "Intel X710 (i40e)"})
	}
	host.Status.HardwareDetails = details
	host.Status.PoweredOn = bmc.PoweredOn()
	if err := r.writeFirmwareComponents(ctx, host, hw.Firmware); err != nil {
		return ctrl.Result{}, err
	}
	setState(host, metal3.StateAvailable)
	return ctrl.Result{Requeue: true}, nil
}

// inspectInBand is Ironic's in-band inspection: boot the deploy ramdisk,
// read the inventory its agent collects (CPUs, memory, NICs with their
// DHCP leases and NVM versions), then power the host off. The BIOS and
// BMC versions are not seen from the OS, so the HostFirmwareComponents
// hold the NICs only.
func (r *Reconciler) inspectInBand(ctx context.Context, host *metal3.BareMetalHost, bmc bmcDriver) (ctrl.Result, error) {
	ag, err := r.deployRamdisk(ctx, host, bmc)
	if ag == nil || err != nil {
		return ctrl.Result{RequeueAfter: r.heartbeatWait()}, err
	}
	inv, err := ag.Inventory(ctx)
	if err != nil {
		return ctrl.Result{}, failed(metal3.InspectionError, "in-band inventory: %v", err)
	}
	details := &metal3.HardwareDetails{
		Hostname:     inv.Hostname,
		CPU:          metal3.CPU{Count: inv.CPUs, Arch: "x86_64"},
		RAMMebibytes: inv.MemoryMiB,
		SystemVendor: metal3.HardwareSystemVendor{Manufacturer: "upgradelab", SerialNumber: inv.Serial},
		Storage:      []metal3.Storage{{Name: "/dev/sda", SizeBytes: metal3.Capacity(int64(inv.DiskGiB) << 30)}},
	}
	firmware := map[string]string{}
	for _, n := range inv.NICs {
		details.NIC = append(details.NIC, metal3.NIC{Name: n.Name, MAC: n.MAC, IP: n.IP, Model: "Intel X710 (i40e)"})
		if n.Firmware != "" {
			firmware["NIC."+n.Name] = n.Firmware
		}
	}
	if err := powerOff(bmc); err != nil {
		return ctrl.Result{}, failed(metal3.PowerManagementError, "powering off after inspection: %v", err)
	}
	r.forgetDeployBoot(host)
	host.Status.HardwareDetails = details
	host.Status.PoweredOn = false
	if err := r.writeFirmwareComponents(ctx, host, firmware); err != nil {
		return ctrl.Result{}, err
	}
	setState(host, metal3.StateAvailable)
	return ctrl.Result{Requeue: true}, nil
}

// writeFirmwareComponents records firmware versions as BMO does, one
// component per item: bios, bmc, nic:<port>.
func (r *Reconciler) writeFirmwareComponents(ctx context.Context, host *metal3.BareMetalHost, firmware map[string]string) error {
	hfc := &metal3.HostFirmwareComponents{ObjectMeta: metav1.ObjectMeta{Namespace: host.Namespace, Name: host.Name}}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(hfc), hfc)
	if apierrors.IsNotFound(err) {
		hfc.Spec.Updates = []metal3.FirmwareUpdate{}
		if err := controllerutil.SetOwnerReference(host, hfc, r.Client.Scheme()); err != nil {
			return err
		}
		err = r.Client.Create(ctx, hfc)
	}
	if err != nil {
		return err
	}
	known := map[string]metal3.FirmwareComponentStatus{}
	for _, c := range hfc.Status.Components {
		known[c.Component] = c
	}
	changed := len(known) != len(firmware)
	var components []metal3.FirmwareComponentStatus
	for id, version := range firmware {
		name := strings.ToLower(id)
		if port, ok := strings.CutPrefix(id, "NIC."); ok {
			name = "nic:" + port
		}
		c, seen := known[name]
		switch {
		case !seen:
			c = metal3.FirmwareComponentStatus{Component: name, InitialVersion: version, CurrentVersion: version, UpdatedAt: metav1.Now()}
			changed = true
		case c.CurrentVersion != version:
			c.CurrentVersion, c.UpdatedAt = version, metav1.Now()
			changed = true
		}
		components = append(components, c)
	}
	if !changed {
		return nil
	}
	sort.Slice(components, func(i, j int) bool { return components[i].Component < components[j].Component })
	before := hfc.DeepCopy()
	hfc.Status.Components = components
	now := metav1.Now()
	hfc.Status.LastUpdated = &now
	return r.Client.Status().Patch(ctx, hfc, client.MergeFrom(before))
}

// available waits for a consumer, managing power meanwhile.
func (r *Reconciler) available(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	if host.Spec.ConsumerRef != nil && host.Spec.Image != nil {
		setState(host, metal3.StateProvisioning)
		host.Status.OperationHistory.Provision = metal3.OperationMetric{Start: metav1.Now()}
		return ctrl.Result{Requeue: true}, nil
	}
	return r.managePower(ctx, host)
}

// provisioned watches for the consumer to let go or the image to change,
// managing power meanwhile.
func (r *Reconciler) provisioned(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	if host.Spec.ConsumerRef == nil || imageChanged(host) {
		setState(host, metal3.StateDeprovisioning)
		host.Status.OperationHistory.Deprovision = metal3.OperationMetric{Start: metav1.Now()}
		return ctrl.Result{Requeue: true}, nil
	}
	return r.managePower(ctx, host)
}

// imageChanged says whether spec.image no longer names the image the host
// was (or is being) provisioned with, by URL, as baremetal-operator
// decides it: a provisioned host whose spec.image is removed, emptied or
// pointed elsewhere is deprovisioned, so an in-place update must never be
// recorded there.
func imageChanged(host *metal3.BareMetalHost) bool {
	if host.Spec.Image == nil || host.Spec.Image.URL == "" {
		return true
	}
	was := host.Status.Provisioning.Image.URL
	return was != "" && host.Spec.Image.URL != was
}

// powerOff is the end of cleaning: no deploy boot left behind, power off.
func powerOff(bmc bmcDriver) error {
	if err := bmc.BootDisk(); err != nil {
		return err
	}
	return bmc.PowerOff()
}
