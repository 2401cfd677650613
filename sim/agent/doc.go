// Package agent is the OS a lab host runs, as the provider under test
// meets it: the installed OS booted from its disk (either kind), a deploy
// ramdisk, or a recovery OS. [New] makes one [Agent] per host; [Agent.Run]
// follows the lab's events for that host; [ServeAPI] serves its API.
//
// The agent depends on two small interfaces: [Machine], what it does to
// its host's hardware and disks (*lab.Host in process), and [Workload],
// what kubeadm and the kubelet reach of their cluster
// (*workload.Clusters). remote.go carries both over HTTP ([HardwareServer]
// serving them, [Remote] dialling them, events as JSON lines), so
// cmd/upgradelab-agent runs the same code as its own process. On a
// qemu-backend host the VM's guest (sim/vm/guest) owns the disk and
// *lab.Host forwards disk operations to it; the agent is the rest:
// provisioner callbacks, the config drive, kubeadm and the kubelet.
//
// # The installed OS
//
//   - First boot with user data on the config drive: [ParseBootstrap]
//     reads CABPK's cloud-config (kubeadm init, control-plane join or
//     worker join; node name, provider ID and labels from
//     nodeRegistration; the cluster and etcd CAs from /etc/kubernetes/pki),
//     finds the workload cluster by the endpoint kubeadm would dial, and
//     performs the init or join after its modelled time ([Timing]).
//     cloud-init's jinja variables in it (`{{ ds.meta_data.KEY }}`,
//     `{{ v1.local_hostname }}`) are rendered from the config drive's
//     meta data first, as a Metal3 user's templates need. The node name
//     and provider ID fall back to the meta data (local-hostname,
//     provider-id), then to the host's name.
//   - Every later boot: the Node reports the booted image's versions, and
//     is Ready only when every port has link under the booted driver. A
//     control-plane host starts its static pods from the manifests
//     kubeadm last wrote, and when its kubelet is another Kubernetes
//     version than kubeadm last ran under it runs kubeadm upgrade node:
//     it applies the cluster's kubeadm-config ClusterConfiguration,
//     feature gates included, and writes the static pods at its
//     kubernetesVersion, whatever the kubelet's; the status reports it
//     as kubeadm, as init and join report theirs.
//   - Files: cloud-init's write_files from the user data, and every PUT
//     of the files endpoint (an updater changing a KubeadmConfig's files),
//     reported in the status as path to SHA-256. They survive reboots and
//     image updates, as cloud-init's state does whichever way the host
//     keeps its images, and go with metadata cleaning or new user data.
//     An admin's own /etc edits are the disk's and follow its model.
//   - A graceful shutdown's start, a power off, or the OS hung, whichever
//     comes first after a boot: at once, in the event loop so that it
//     comes before the next boot's kubelet starts anything, the node's
//     kubelet, static pods and etcd member stop (Workload.StopNode). The
//     Node turns NotReady after the node grace period from then unless a
//     new boot came; without quorum the cluster refuses that write, so with the
//     only control-plane host off nothing marks the Node. The NotReady and
//     the next boot's kubelet report are ordered by one lock: a NotReady
//     for a power loss is written before the new boot's Ready, never
//     after, since a real kubelet's next post would undo a stale NotReady
//     and this one posts once a boot.
//   - While the OS is hung, its API drops every connection, as one to a
//     frozen kernel times out.
//
// [Agent.CheckHealth] checks what an update agent checks after booting a
// new image (kubelet joined, links up, the Node Ready as the API server
// holds it; greenboot's checks) and commits the running root, or reports
// why not and leaves the bootloader to fall back. A fresh installation
// commits on its first good boot, as installers do; an update waits for
// its health check.
//
// # Provisioners (provisioner.go)
//
// A host finds what provisions it in one of two ways, as real fleets do.
// A deploy ramdisk heartbeats its identity and API URL to the URL in its
// media's ipa-api-url parameter (Ironic's kernel parameter) until its boot
// ends. A recovery OS of a registration pool ([Agent.SetProvisioner])
// registers at the pool's URL once a boot, with a machine ID kept on the
// persistent partition, so a reset, which wipes that partition, registers
// under a new identity. A reset request ([Agent.RequestReset]) reboots
// into recovery, which wipes the persistent and OEM partitions, the
// config drive and the slots. That wipe, or metadata cleaning from a
// deploy ramdisk, loses the etcd member's data (Workload.MemberDataLost)
// and the host forgets its node.
//
// # The API (api.go, wire.go)
//
// The API takes only clients with a certificate from the CA it is given
// (the site CA; mutual TLS). It offers the update contract (stage
// answering the root, activate with a root and tries, health which
// commits, rollback; status reporting the images: booted, staged,
// fallback, every root and the disk's kind), /etc, files, persistent data,
// inventory, the config drive, metadata cleaning (deploy ramdisk only),
// kubeadm upgrade node, reset and a graceful reboot. Every body is a type
// of api/hostagent/v1; wire.go converts the running OS to it (sim/disk the
// images), so the model can change without the wire moving. The wire names
// no lab rule and carries no lab clock: a reboot shows as a new boot ID,
// how long the OS has run as its uptime, and a NIC on recovery firmware as
// a flag on its link. [API.Crash] is the agent process dying and its
// service manager restarting it.
package agent
