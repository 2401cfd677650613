"""Changes a lab host's firmware settings and firmware with sushy, the
Redfish library Ironic uses, unmodified, the way Ironic's redfish BIOS,
boot and firmware interfaces call it; prints what it read as JSON.

Arguments: endpoint, CA file, username, password, an NVM image URL.
"""
import json
import sys
import time

import sushy

endpoint, cafile, user, password, nvm_url = sys.argv[1:6]
root = sushy.Sushy(endpoint + "/redfish/v1", username=user, password=password, verify=cafile)
system = root.get_system(root.get_system_collection().members_identities[0])

bios = system.bios
out = {"pxeBefore": bios.attributes["PxeBoot"], "registry": bios._attribute_registry}
bios.set_attributes({"PxeBoot": "Disabled"}, apply_time=sushy.ApplyTime.ON_RESET)
out["pxePending"] = bios.pending_attributes["PxeBoot"]
out["applyTime"] = bios.apply_time_settings.apply_time if bios.apply_time_settings else None

secure = system.secure_boot
secure.set_enabled(True)
secure.refresh()
out["secureEnable"] = secure.enabled
out["secureCurrentBefore"] = secure.current_boot.value

system.set_system_boot_options(target=sushy.BOOT_SOURCE_TARGET_HDD, enabled=sushy.BOOT_SOURCE_ENABLED_ONCE,
                               mode=sushy.BOOT_SOURCE_MODE_UEFI)
system.refresh()
out["bootTarget"] = system.boot.target.value
out["bootMode"] = system.boot.mode.value
system.reset_system(sushy.RESET_ON)

# The settings apply during the POST: read them back as Ironic does after
# a reboot, until they show (or a minute passes).
for _ in range(600):
    system.bios.refresh()
    if system.bios.attributes["PxeBoot"] == "Disabled":
        break
    time.sleep(0.1)
out["pxeAfter"] = system.bios.attributes["PxeBoot"]
system.secure_boot.refresh()
out["secureCurrentAfter"] = system.secure_boot.current_boot.value

updates = root.get_update_service()
monitor = updates.simple_update(nvm_url)  # no Targets: the image names its component
out["retryAfter"] = monitor.sleep_for
# Polled as Ironic's redfish firmware interface does: the task's state,
# at the pace Retry-After asks. (TaskMonitor.wait is no use: sushy takes
# the 202 body's Task @odata.id as the monitor, which answers 200 at
# once, and hands Retry-After's string to time.sleep.)
for _ in range(60):
    state = monitor.get_task().task_state.value
    if state in ("Completed", "Exception", "Killed", "Cancelled"):
        break
    time.sleep(float(monitor.sleep_for))
out["taskState"] = state
print(json.dumps(out))
