"""Inspects a lab host and powers it on with sushy, the Redfish library
Ironic uses, unmodified; prints what it read as JSON.

Arguments: endpoint, CA file, username, password.
"""
import json
import sys

import sushy

endpoint, cafile, user, password = sys.argv[1:5]
root = sushy.Sushy(endpoint + "/redfish/v1", username=user, password=password, verify=cafile)
system = root.get_system(root.get_system_collection().members_identities[0])
before = system.power_state
# What Ironic's out-of-band inspection makes ports of: the MACs whose
# interface is Enabled (ironic/drivers/modules/redfish/utils.py,
# get_enabled_macs), read while the host is off, as when it is enrolled.
enabled_while_off = sorted(mac.lower() for mac, state in system.ethernet_interfaces.summary.items()
                           if state == sushy.STATE_ENABLED)
system.reset_system(sushy.RESET_ON)
system.refresh()
out = {
    "powerBefore": before.value,
    "enabledMACsWhileOff": enabled_while_off,
    "powerAfter": system.power_state.value,
    "logicalCPUs": system.processors.summary.count,
    "architecture": system.processors.summary.architecture.value,
    "memoryGiB": system.memory_summary.size_gib,
    "nics": {i.identity: {"mac": i.mac_address, "speed": i.speed_mbps}
             for i in system.ethernet_interfaces.get_members()},
    "simpleStorageMaxBytes": system.simple_storage.max_size_bytes,
    "storageMaxDriveBytes": system.storage.max_drive_size_bytes,
    "bootTargets": sorted(t.value for t in system.get_allowed_system_boot_source_values()),
    "resetTypes": sorted(t.value for t in system.get_allowed_reset_system_values()),
}
print(json.dumps(out))
