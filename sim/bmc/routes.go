package bmc

import (
	"net/http"
	"strings"
)

const (
	rootPath     = "/redfish/v1"
	systemsPath  = "/redfish/v1/Systems/"
	managerPath  = "/redfish/v1/Managers/bmc"
	chassisPath  = "/redfish/v1/Chassis/"
	sessionsPath = "/redfish/v1/SessionService/Sessions/"
	updatePath   = "/redfish/v1/UpdateService"
	inventory    = "/redfish/v1/UpdateService/FirmwareInventory/"
	tasksPath    = "/redfish/v1/TaskService/Tasks/"
)

// methods answers 405 in Redfish's format for a method a resource lacks.
type methods map[string]http.HandlerFunc

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, ok := m[r.Method]; ok {
		h(w, r)
		return
	}
	allowed := make([]string, 0, len(m))
	for k := range m {
		allowed = append(allowed, k)
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeError(w, http.StatusMethodNotAllowed, msgOperationNotAllowed, "The HTTP method "+r.Method+" is not allowed on "+r.URL.Path+".", "")
}

func (b *BMC) routes() http.Handler {
	mux := http.NewServeMux()
	sys := systemsPath + "{id}"
	handle := func(path string, m methods) { mux.Handle(path, b.withSystem(m)) }

	mux.Handle(rootPath, methods{"GET": b.getServiceRoot})
	mux.Handle("/redfish", methods{"GET": func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"v1": rootPath + "/"})
	}})
	mux.Handle(strings.TrimSuffix(systemsPath, "/"), methods{"GET": b.getSystems})
	handle(sys, methods{"GET": b.getSystem, "PATCH": b.patchSystem})
	handle(sys+"/Actions/ComputerSystem.Reset", methods{"POST": b.postReset})
	handle(sys+"/EthernetInterfaces", methods{"GET": b.getEthernetInterfaces})
	handle(sys+"/EthernetInterfaces/{nic}", methods{"GET": b.getEthernetInterface})
	handle(sys+"/Processors", methods{"GET": b.getProcessors})
	handle(sys+"/Processors/{cpu}", methods{"GET": b.getProcessor})
	handle(sys+"/Memory", methods{"GET": b.getMemoryCollection})
	handle(sys+"/Memory/{dimm}", methods{"GET": b.getMemory})
	handle(sys+"/Storage", methods{"GET": b.getStorageCollection})
	handle(sys+"/Storage/{storage}", methods{"GET": b.getStorage})
	handle(sys+"/Storage/{storage}/Drives/{drive}", methods{"GET": b.getDrive})
	handle(sys+"/SimpleStorage", methods{"GET": b.getSimpleStorageCollection})
	handle(sys+"/SimpleStorage/{storage}", methods{"GET": b.getSimpleStorage})
	handle(sys+"/BootOptions", methods{"GET": b.getBootOptions})
	handle(sys+"/BootOptions/{option}", methods{"GET": b.getBootOption})
	handle(sys+"/Bios", methods{"GET": b.getBios})
	handle(sys+"/Bios/Settings", methods{"GET": b.getBiosSettings, "PATCH": b.patchBiosSettings})
	handle(sys+"/SecureBoot", methods{"GET": b.getSecureBoot, "PATCH": b.patchSecureBoot})
	mux.Handle(registriesPath, methods{"GET": b.getRegistries})
	mux.Handle(biosRegistryFile, methods{"GET": b.getBiosRegistryFile})
	mux.Handle(biosRegistryPath, methods{"GET": b.getBiosRegistry})
	sysMedia := b.systemPath()
	handle(sys+"/VirtualMedia", methods{"GET": b.getVirtualMediaCollection(sysMedia)})
	handle(sys+"/VirtualMedia/Cd", methods{"GET": b.getVirtualMedia(sysMedia)})
	handle(sys+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", methods{"POST": b.postInsertMedia})
	handle(sys+"/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", methods{"POST": b.postEjectMedia})

	mux.Handle("/redfish/v1/Managers", methods{"GET": b.getManagers})
	mux.Handle(managerPath, methods{"GET": b.getManager})
	mux.Handle(managerPath+"/Actions/Manager.Reset", methods{"POST": b.postManagerReset})
	mux.Handle(managerPath+"/VirtualMedia", methods{"GET": b.getVirtualMediaCollection(managerPath)})
	mux.Handle(managerPath+"/VirtualMedia/Cd", methods{"GET": b.getVirtualMedia(managerPath)})
	mux.Handle(managerPath+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", methods{"POST": b.postInsertMedia})
	mux.Handle(managerPath+"/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", methods{"POST": b.postEjectMedia})

	mux.Handle(strings.TrimSuffix(chassisPath, "/"), methods{"GET": b.getChassisCollection})
	handle(chassisPath+"{id}", methods{"GET": b.getChassis})
	handle(chassisPath+"{id}/NetworkAdapters", methods{"GET": b.getNetworkAdapters})
	handle(chassisPath+"{id}/NetworkAdapters/{nic}", methods{"GET": b.getNetworkAdapter})
	handle(chassisPath+"{id}/PCIeDevices", methods{"GET": b.getPCIeDevices})
	handle(chassisPath+"{id}/PCIeDevices/{nic}", methods{"GET": b.getPCIeDevice})
	handle(chassisPath+"{id}/Power", methods{"GET": b.getPower})
	handle(chassisPath+"{id}/Thermal", methods{"GET": b.getThermal})

	mux.Handle(updatePath, methods{"GET": b.getUpdateService})
	mux.Handle(strings.TrimSuffix(inventory, "/"), methods{"GET": b.getFirmwareInventory})
	mux.Handle(inventory+"{item}", methods{"GET": b.getFirmwareItem})
	mux.Handle(updatePath+"/Actions/UpdateService.SimpleUpdate", methods{"POST": b.postSimpleUpdate})
	mux.Handle(pushPath, methods{"POST": b.postMultipartPush})
	mux.Handle("/redfish/v1/TaskService", methods{"GET": b.getTaskService})
	mux.Handle(strings.TrimSuffix(tasksPath, "/"), methods{"GET": b.getTasks})
	mux.Handle(tasksPath+"{task}", methods{"GET": b.getTask})
	mux.Handle("/redfish/v1/TaskService/TaskMonitors/{task}", methods{"GET": b.getTaskMonitor})

	mux.Handle(eventServicePath, methods{"GET": b.getEventService})
	mux.Handle(ssePath, methods{"GET": b.getSSE})
	mux.Handle("/redfish/v1/SessionService", methods{"GET": b.getSessionService})
	mux.Handle(strings.TrimSuffix(sessionsPath, "/"), methods{"GET": b.getSessions, "POST": b.postSession})
	mux.Handle(sessionsPath+"{session}", methods{"GET": b.getSession, "DELETE": b.deleteSession})
	mux.Handle("/redfish/v1/AccountService", methods{"GET": b.getAccountService})

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		notFound(w, r)
	})
	return b.withFaults(trimSlash(b.withAuth(mux)))
}

// trimSlash serves /redfish/v1/Systems/ and /redfish/v1/Systems alike, as
// Redfish clients use both.
func trimSlash(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.Path) > 1 {
			r.URL.Path = strings.TrimSuffix(r.URL.Path, "/")
		}
		next.ServeHTTP(w, r)
	})
}

// withSystem answers 404 for a system or chassis id that is not this host.
func (b *BMC) withSystem(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.PathValue("id"); id != b.host.Name() {
			notFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (b *BMC) getServiceRoot(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":      rootPath,
		"@odata.type":    "#ServiceRoot.v1_15_0.ServiceRoot",
		"Id":             "RootService",
		"Name":           "upgradelab emulated BMC for " + b.host.Name(),
		"RedfishVersion": "1.17.0",
		"Vendor":         "upgradelab",
		"Systems":        odataID("/redfish/v1/Systems"),
		"Managers":       odataID("/redfish/v1/Managers"),
		"Chassis":        odataID("/redfish/v1/Chassis"),
		"UpdateService":  odataID(updatePath),
		"TaskService":    odataID("/redfish/v1/TaskService"),
		"SessionService": odataID("/redfish/v1/SessionService"),
		"AccountService": odataID("/redfish/v1/AccountService"),
		"Registries":     odataID(registriesPath),
		"EventService":   odataID(eventServicePath),
		"Links":          map[string]any{"Sessions": odataID(strings.TrimSuffix(sessionsPath, "/"))},
	})
}

func collection(path, odataType, name string, members ...string) map[string]any {
	refs := make([]map[string]string, 0, len(members))
	for _, m := range members {
		refs = append(refs, odataID(m))
	}
	return map[string]any{
		"@odata.id": path, "@odata.type": odataType, "Name": name,
		"Members": refs, "Members@odata.count": len(refs),
	}
}
