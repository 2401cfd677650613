package ironic

import (
	"fmt"
	"os/exec"
	"text/template"
)

// configTemplate is ironic.conf. Interfaces are enabled, not defaulted,
// where a default would break a hardware type (a default redfish inspect
// interface stops the conductor for ipmi nodes): nodes name theirs.
var configTemplate = template.Must(template.New("ironic.conf").Parse(`[DEFAULT]
auth_strategy = noauth
rpc_transport = none
host = upgradelab
# Stopped with the run: nothing to finish gracefully.
graceful_shutdown_timeout = 2
tempdir = {{.Dir}}/tmp
enabled_hardware_types = redfish,ipmi
enabled_boot_interfaces = redfish-virtual-media,ipxe,pxe
enabled_deploy_interfaces = direct,ramdisk,custom-agent
enabled_inspect_interfaces = redfish,inspector,no-inspect
enabled_management_interfaces = redfish,ipmitool
enabled_power_interfaces = redfish,ipmitool
enabled_bios_interfaces = redfish,no-bios
enabled_raid_interfaces = no-raid,agent,redfish
enabled_vendor_interfaces = no-vendor,ipmitool,redfish
enabled_network_interfaces = noop
default_network_interface = noop
default_deploy_interface = direct

[api]
host_ip = 127.0.0.1
port = {{.APIPort}}
ramdisk_heartbeat_timeout = 10

[database]
connection = sqlite:///{{.Dir}}/ironic.db

[conductor]
automated_clean = true
bootloader = file://{{.Bootloader}}
file_url_allowed_paths = {{.Allowed}}
power_state_change_timeout = 30

[deploy]
http_url = {{.HTTPURL}}
http_root = {{.Dir}}/http
# Automated cleaning erases metadata only (the agent's priority 99).
erase_devices_priority = 0

[agent]
# The agent heartbeats as soon as a command is done; these bound how long
# Ironic waits between its own polls of the agent and of the power state.
command_wait_interval = 1
post_deploy_get_power_state_retry_interval = 1
post_deploy_get_power_state_retries = 30
deploy_logs_collect = never

[redfish]
use_swift = false

[dhcp]
dhcp_provider = none

[service_catalog]
auth_type = none
endpoint_override = {{.URL}}

# In-band inspection through ironic-inspector, which Ironic boots the
# deploy ramdisk for. Inspector's callback may not name a loopback
# address (Ironic refuses it: a real ramdisk cannot reach the
# conductor's loopback); the lab's hosts share the harness's, and Linux
# routes 0.0.0.0 to it.
[inspector]
auth_type = none
endpoint_override = {{.InspectorURL}}
callback_endpoint_override = {{.InspectorCallback}}
require_managed_boot = true
status_check_period = 2
extra_kernel_params = ipa-inspection-collectors=default,extra-hardware

[inventory]
data_backend = database
`))

// inspectorTemplate is inspector.conf: API and conductor in one process,
// RPC in process, no PXE filter (the lab has no DHCP to filter), and a
// port for every NIC the ramdisk reports (the lab's NICs have no lease
// while the ramdisk inspects).
var inspectorTemplate = template.Must(template.New("inspector.conf").Parse(`[DEFAULT]
auth_strategy = noauth
standalone = true
transport_url = fake://
host = upgradelab
listen_address = 127.0.0.1
listen_port = {{.Port}}

[database]
connection = sqlite:///{{.Dir}}/inspector.db

[coordination]
backend_url = file://{{.Dir}}/coordination

[ironic]
auth_type = none
endpoint_override = {{.IronicURL}}

[processing]
store_data = database
add_ports = all
keep_ports = present

[pxe_filter]
driver = noop
`))

// writeESP makes the small FAT image Ironic puts on UEFI virtual media as
// its EFI system partition (the lab's firmware boots what the ISO names,
// not the partition's loader).
func writeESP(path string) error {
	if out, err := exec.Command("mkfs.fat", "-C", path, "1024").CombinedOutput(); err != nil {
		return fmt.Errorf("making Ironic's bootloader image %s: %w\n%s", path, err, out)
	}
	return nil
}
