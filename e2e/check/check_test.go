package check

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/upgradelab/upgradelab/e2e/scenario"
	"github.com/upgradelab/upgradelab/e2e/timeline"
	"github.com/upgradelab/upgradelab/internal/vocab"
)

// history builds a timeline by hand: each call is one observed change.
type history struct {
	t       time.Time
	entries []timeline.Entry
	last    map[string]map[string]string
}

func newHistory() *history {
	return &history{t: time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC), last: map[string]map[string]string{}}
}

// set records kind/name changing to fields (nil: gone).
func (h *history) set(kind, name string, fields map[string]string) *history {
	h.t = h.t.Add(100 * time.Millisecond)
	key := kind + "/" + name
	h.entries = append(h.entries, timeline.Entry{Time: h.t, Kind: kind, Name: name, Old: h.last[key], New: fields})
	h.last[key] = fields
	return h
}

// sameMoment records a change seen in the same poll as the last one.
func (h *history) sameMoment(kind, name string, fields map[string]string) *history {
	h.t = h.t.Add(-100 * time.Millisecond)
	return h.set(kind, name, fields)
}

func (h *history) step(name string) *history {
	h.t = h.t.Add(100 * time.Millisecond)
	h.entries = append(h.entries, timeline.Entry{Time: h.t, Kind: timeline.KindStep, Name: name})
	return h
}

func machine(version, uid, infra string, cp bool, upToDate string) map[string]string {
	m := map[string]string{vocab.FieldVersion: version, vocab.FieldUID: uid, vocab.FieldInfra: infra, vocab.FieldNode: infra,
		vocab.FieldUpToDate: upToDate, vocab.FieldAvailable: "True", vocab.FieldProviderID: "upgradelab://" + infra}
	if cp {
		m[vocab.FieldControlPlane] = "true"
	}
	return m
}

// addon is an add-on whose template and pods all run image.
func addon(image string) map[string]string {
	return map[string]string{vocab.FieldImage: image, vocab.FieldPodImages: image}
}

// osRunning is a host's OS up from its disk, on an image of version.
func osRunning(version string) map[string]string {
	return map[string]string{vocab.FieldLabKind: "boot", vocab.FieldReason: vocab.LabOSRunning, vocab.FieldLabSource: vocab.LabSourceDisk, vocab.FieldKubernetesVersion: version}
}

// updating is m marked update-in-progress.
func updating(m map[string]string) map[string]string {
	m[vocab.FieldUpdating] = "true"
	return m
}

func kcp(version, replicas, surge, upToDate string) map[string]string {
	return map[string]string{vocab.FieldVersion: version, vocab.FieldReplicas: replicas, vocab.FieldMaxSurge: surge,
		vocab.FieldUpToDateCount: upToDate, vocab.FieldAvailableCount: replicas}
}

func host(consumer, state string) map[string]string {
	return map[string]string{vocab.FieldConsumer: consumer, vocab.FieldState: state}
}

var done = map[string]string{vocab.FieldAvailable: "True", vocab.FieldCPUpToDate: "True", vocab.FieldWorkersUpToDate: "True", vocab.FieldRollingOut: "False"}

// provisionedSingleNode is a one-machine cluster at v1.35.3 as the
// recorder sees it before the upgrade, with a marker on its host.
func provisionedSingleNode() *history {
	h := newHistory()
	h.set(vocab.KindControlPlane, "c-cp", kcp("v1.35.3", "1", "1", "1"))
	h.set(vocab.KindMachine, "c-cp-a", machine("v1.35.3", "u1", "c-cp-a", true, "True"))
	h.set(vocab.KindHost, "node-0", host("c-cp-a", "provisioned"))
	h.set(timeline.KindLab, "node-0", osRunning("v1.35.3"))
	h.set(vocab.KindNode, "c-cp-a", map[string]string{vocab.FieldReady: "True", vocab.FieldKubelet: "v1.35.3"})
	h.set(vocab.KindEtcdMember, "etcd-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a", vocab.FieldImage: "registry.k8s.io/etcd:3.6.4-0"})
	h.set(vocab.KindAddon, "coredns", addon("registry.k8s.io/coredns/coredns:v1.12.1"))
	h.set(vocab.KindAddon, vocab.AddonKubeadmConfig, map[string]string{vocab.FieldVersion: "v1.35.3", vocab.FieldFeatureGates: "ControlPlaneKubeletLocalMode=true"})
	h.set(KindHostData, "node-0", map[string]string{FieldMarker: "written"})
	return h
}

// A single-node in-place upgrade as it should go.
func goodInPlace() *history { return inPlaceRun(false) }

// inPlaceRun is the good in-place run whose host's graceful shutdown is
// cut by a power-off when cut.
func inPlaceRun(cut bool) *history {
	h := provisionedSingleNode()
	h.set(vocab.KindWorkloadAPI, "api", apiUp)
	h.set(vocab.KindBudget, "web", budget("app=web", 0))
	h.set(vocab.KindPod, "web-1", pod("c-cp-a", "app=web", true, false))
	h.step(StepUpgrade)
	h.set(vocab.KindControlPlane, "c-cp", kcp("v1.36.3", "1", "1", "0"))
	h.set(vocab.KindAddon, vocab.AddonKubeadmConfig, map[string]string{vocab.FieldVersion: "v1.36.3"})
	h.set(vocab.KindMachine, "c-cp-a", updating(machine("v1.36.3", "u1", "c-cp-a", true, "False")))
	// The extension drains (the budget lets the one replica go), then
	// reboots: the API is down until the host is back.
	h.set(vocab.KindPod, "web-1", pod("c-cp-a", "app=web", false, true))
	h.set(vocab.KindPod, "web-1", nil)
	h.set(vocab.KindPod, "web-2", pod("", "app=web", false, false))
	h.set(timeline.KindLab, "node-0", map[string]string{vocab.FieldLabKind: "boot", vocab.FieldReason: vocab.LabOSShuttingDown})
	h.set(vocab.KindWorkloadEvent, "c-cp-a", map[string]string{vocab.FieldReason: vocab.EventNodeStopped, "pods": ""})
	h.set(vocab.KindWorkloadAPI, "api", apiDown)
	if !cut {
		h.set(timeline.KindLab, "node-0", map[string]string{vocab.FieldLabKind: "boot", vocab.FieldReason: vocab.LabOSShutdown})
	}
	h.set(timeline.KindLab, "node-0", map[string]string{vocab.FieldLabKind: vocab.LabKindPower, vocab.FieldReason: "DomainStopped", vocab.FieldPower: vocab.LabPowerOff})
	// Recorded in the same moment: a poll's rules run after all of it.
	h.sameMoment(timeline.KindLab, "node-0", map[string]string{vocab.FieldLabKind: "bmc", vocab.FieldReason: "GracefulResetFailed"})
	h.set(timeline.KindLab, "node-0", osRunning("v1.36.3"))
	h.set(vocab.KindWorkloadAPI, "api", apiUp)
	h.set(vocab.KindPod, "web-2", pod("c-cp-a", "app=web", true, false))
	h.set(vocab.KindApp, "web", map[string]string{vocab.FieldReplicas: "1", vocab.FieldReadyCount: "1"})
	h.set(vocab.KindNode, "c-cp-a", map[string]string{vocab.FieldReady: "True", vocab.FieldKubelet: "v1.36.3"})
	h.set(vocab.KindEtcdMember, "etcd-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a", vocab.FieldImage: "registry.k8s.io/etcd:3.6.5-0"})
	h.set(vocab.KindMachine, "c-cp-a", machine("v1.36.3", "u1", "c-cp-a", true, "True"))
	h.set(vocab.KindControlPlane, "c-cp", kcp("v1.36.3", "1", "1", "1"))
	h.set(vocab.KindAddon, "kube-proxy", addon("registry.k8s.io/kube-proxy:v1.36.3"))
	h.set(vocab.KindAddon, "coredns", addon("registry.k8s.io/coredns/coredns:v1.13.1"))
	h.set(vocab.KindCluster, "c", done)
	h.step(StepDone)
	h.set(KindHostData, "node-0", map[string]string{FieldMarker: "present"})
	h.set(KindHostEtc, "node-0", map[string]string{FieldMarker: "present"})
	return h
}

// withOSTree is p on a lab with OSTree hosts.
func withOSTree(p Params) Params {
	p.OSTreeHosts = true
	return p
}

var inPlace = Params{Strategy: scenario.InPlace, ToVersion: "v1.36.3", ToCoreDNS: "v1.13.1", ToEtcd: "3.6.5-0", HostsVisible: true, SparesVisible: true, RBACEnforced: true, HostData: true,
	Apps: true, AddonPods: true, EtcdOnHosts: true, MaxAPIOutage: 30 * time.Second, ControlPlaneReplicas: 1,
	Expect: scenario.Expect{SameMachines: true, SameHosts: true, PersistentData: "kept"}}

var (
	apiUp   = map[string]string{vocab.FieldAPIAvailable: "true"}
	apiDown = map[string]string{vocab.FieldAPIAvailable: "false", vocab.FieldAPIError: "connection refused"}
)

func pod(node, labels string, ready, terminating bool) map[string]string {
	p := map[string]string{vocab.FieldNode: node, vocab.FieldLabels: labels, vocab.FieldOwner: "Deployment/web"}
	if ready {
		p[vocab.FieldReady] = "true"
	}
	if terminating {
		p[vocab.FieldTerminating] = "true"
	}
	return p
}

func budget(selector string, desired int) map[string]string {
	return map[string]string{vocab.FieldSelector: selector, vocab.FieldDesired: strconv.Itoa(desired)}
}

func statuses(results []Result) map[string]Status {
	out := map[string]Status{}
	for _, r := range results {
		out[r.Rule] = r.Status
	}
	return out
}

// Etcd members without an image (CAPI's in-memory provider) leave
// end-etcd n/a, never passed.
func TestEtcdVersionsAreNotJudgedWithoutImages(t *testing.T) {
	p := inPlace
	p.ToEtcd = ""
	if st := statuses(Run(goodInPlace().entries, p)); st["end-etcd"] != NotApplicable || st["end-coredns"] != Pass {
		t.Errorf("end-etcd %s, end-coredns %s; want n/a and pass", st["end-etcd"], st["end-coredns"])
	}
}

// An in-place run deletes no Machine and deprovisions no host: the rules
// that judge those are not exercised, never passed.
func TestAGoodRunPassesEveryRuleThatApplies(t *testing.T) {
	results := Run(goodInPlace().entries, inPlace)
	for _, r := range results {
		want := Pass
		switch r.Rule {
		case "md-max-machines", "md-min-available", "end-workers", "spares-left", "end-rolled-back", "reverted-after-failure", "etcd-quorum", "workload-data", "etc-merged":
			want = NotApplicable
		case "kcp-one-deleting", "no-wipe-under-live-machine", "etcd-member-removed-first", "deletion-order", "paused-respected":
			want = NotExercised
		}
		if r.Status != want {
			t.Errorf("%s: %s %v; want %s", r.Rule, r.Status, r.Violations, want)
		}
	}
}

// On a lab with OSTree hosts the same good run passes etc-merged too.
func TestAGoodRunOnOSTreeHostsKeepsTheAdminsEtc(t *testing.T) {
	if st := statuses(Run(goodInPlace().entries, withOSTree(inPlace))); st["etc-merged"] != Pass {
		t.Errorf("etc-merged %s; want pass", st["etc-merged"])
	}
}

// A power-off before a host's graceful shutdown finished breaks
// clean-shutdowns, at that moment and naming the host; a scenario whose
// fault cuts the power on purpose is not judged by it.
func TestAPowerOffMidShutdownIsAnUncleanShutdown(t *testing.T) {
	var got *Result
	for _, r := range Run(inPlaceRun(true).entries, inPlace) {
		if r.Rule == "clean-shutdowns" {
			got = &r
		}
	}
	if got == nil || got.Status != Fail || len(got.Violations) != 1 {
		t.Fatalf("clean-shutdowns %+v; want one violation", got)
	}
	if v := got.Violations[0]; strings.Join(v.Objects, ",") != "BareMetalHost/node-0" || !strings.Contains(v.Message, "host node-0 was powered off 300ms into its graceful shutdown") {
		t.Fatalf("violation %s", v)
	}
	// A host whose Machine is deleting (remediated) is powered off as
	// its provisioner wipes it: excused, and named in the note.
	var entries []timeline.Entry
	for _, e := range inPlaceRun(true).entries {
		if e.Kind == timeline.KindLab && e.New[vocab.FieldPower] == vocab.LabPowerOff {
			m := machine("v1.36.3", "u1", "c-cp-a", true, "False")
			m[vocab.FieldDeleting] = "true"
			entries = append(entries, timeline.Entry{Time: e.Time.Add(-time.Millisecond), Kind: vocab.KindMachine, Name: "c-cp-a", New: m})
		}
		entries = append(entries, e)
	}
	for _, r := range Run(entries, inPlace) {
		if r.Rule == "clean-shutdowns" && (r.Status != Pass || !strings.Contains(r.Note, "with their Machine deleting or gone: node-0")) {
			t.Fatalf("a deprovisioned host's cut shutdown: %s %v %q; want pass, named in the note", r.Status, r.Violations, r.Note)
		}
	}
	p := inPlace
	p.PowerCuts = true
	if st := statuses(Run(inPlaceRun(true).entries, p)); st["clean-shutdowns"] != NotApplicable {
		t.Fatalf("with a power-loss fault clean-shutdowns is %s; want n/a", st["clean-shutdowns"])
	}
}

// brokenRule breaks one rule on purpose in a good history: the rule
// that must fail, with which objects and message.
type brokenRule struct {
	name, rule string
	params     Params
	breakIt    func(h *history)
	objects    []string
	message    string
}

// brokenRules are the rules TestBrokenRulesFailWithTheMomentAndTheObjects
// breaks, one at a time.
var brokenRules = []brokenRule{
	{name: "a second write while one is under way", rule: "one-writer", params: inPlace,
		breakIt: func(h *history) {
			h.set(timeline.KindLab, "node-0", map[string]string{vocab.FieldLabKind: "disk", vocab.FieldReason: vocab.LabWriteBusy, "image": "ubuntu-24.04-k8s-v1.36.3"})
		},
		objects: []string{"BareMetalHost/node-0"}, message: "host node-0 was asked to write ubuntu-24.04-k8s-v1.36.3 while another write was under way"},
	{name: "a Machine done while its Node runs the old kubelet", rule: "spec-matches-host", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindNode, "c-cp-a", map[string]string{vocab.FieldReady: "True", vocab.FieldKubelet: "v1.35.3"})
		},
		objects: []string{"Machine/c-cp-a", "Node/c-cp-a"}, message: "Machine c-cp-a says v1.36.3, not updating, while its Node c-cp-a runs kubelet v1.35.3"},
	{name: "a Machine done while its host runs the old image", rule: "spec-matches-host", params: inPlace,
		breakIt: func(h *history) { h.set(timeline.KindLab, "node-0", osRunning("v1.35.3")) },
		objects: []string{"BareMetalHost/node-0", "Machine/c-cp-a"}, message: "Machine c-cp-a says v1.36.3, not updating, while its host node-0 runs an image of v1.35.3"},
	{name: "an API server that refuses its flags", rule: "static-pods-run", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindStaticPod, "kube-apiserver-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a", vocab.FieldReady: "True",
				vocab.FieldImage: "registry.k8s.io/kube-apiserver:v1.35.3"})
			h.set(vocab.KindStaticPod, "kube-apiserver-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a", vocab.FieldReady: "False",
				vocab.FieldImage: "registry.k8s.io/kube-apiserver:v1.36.3", vocab.FieldCrashLoop: "unrecognized feature gate: ServiceTrafficDistribution"})
		},
		objects: []string{"StaticPod/kube-apiserver-c-cp-a"},
		message: "kube-apiserver-c-cp-a on node c-cp-a (registry.k8s.io/kube-apiserver:v1.36.3) crash-loops: unrecognized feature gate: ServiceTrafficDistribution"},
	{name: "CoreDNS's pods left on the old image", rule: "end-coredns", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindAddon, "coredns", map[string]string{vocab.FieldImage: "registry.k8s.io/coredns/coredns:v1.13.1",
				vocab.FieldPodImages: "registry.k8s.io/coredns/coredns:v1.12.1,registry.k8s.io/coredns/coredns:v1.13.1"})
		},
		objects: []string{"Addon/coredns"}, message: "but its pods end on registry.k8s.io/coredns/coredns:v1.12.1,registry.k8s.io/coredns/coredns:v1.13.1: the rollout did not reach them"},
	{name: "kube-proxy without pods", rule: "end-kube-proxy", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindAddon, "kube-proxy", map[string]string{vocab.FieldImage: "registry.k8s.io/kube-proxy:v1.36.3"})
		},
		objects: []string{"Addon/kube-proxy"}, message: "the kube-proxy DaemonSet ends with no pods"},
	{name: "the application's rollout left unfinished", rule: "end-application", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindApp, "web", map[string]string{vocab.FieldReplicas: "1", vocab.FieldReadyCount: "1", vocab.FieldUpToDateCount: "0"})
		},
		objects: []string{"Deployment/web"}, message: "Deployment web ends with 0 of 1 replicas of its current template: its rollout did not finish"},
	{name: "a host bound twice", rule: "host-bound-once", params: inPlace,
		breakIt: func(h *history) { h.set(vocab.KindHost, "node-1", host("c-cp-a", "provisioning")) },
		objects: []string{"BareMetalHost/node-0", "BareMetalHost/node-1"}, message: "bound to 2 hosts"},
	{name: "KCP above replicas + maxSurge", rule: "kcp-max-machines", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindMachine, "c-cp-b", machine("v1.36.3", "u2", "c-cp-b", true, "True"))
			h.set(vocab.KindMachine, "c-cp-c", machine("v1.36.3", "u3", "c-cp-c", true, "True"))
		},
		objects: []string{"KubeadmControlPlane/c-cp", "Machine/c-cp-a", "Machine/c-cp-b", "Machine/c-cp-c"}, message: "3 Machines of the control plane, KCP allows 2"},
	{name: "a Machine created in place", rule: "same-machines", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindMachine, "c-cp-b", machine("v1.36.3", "u2", "c-cp-b", true, "True"))
		},
		objects: []string{"Machine/c-cp-b"}, message: "created during an in-place upgrade"},
	{name: "a Machine deleting in place", rule: "same-machines", params: inPlace,
		breakIt: func(h *history) {
			a := machine("v1.36.3", "u1", "c-cp-a", true, "True")
			a[vocab.FieldDeleting] = "true"
			h.set(vocab.KindMachine, "c-cp-a", a)
		},
		objects: []string{"Machine/c-cp-a"}, message: "being deleted during an in-place upgrade"},
	{name: "a Machine recreated under its name", rule: "same-machines", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindMachine, "c-cp-a", machine("v1.36.3", "u9", "c-cp-a", true, "True"))
		},
		objects: []string{"Machine/c-cp-a"}, message: "has UID u9, had u1"},
	{name: "a host wiped under its Machine", rule: "no-wipe-under-live-machine", params: inPlace,
		breakIt: func(h *history) { h.set(vocab.KindHost, "node-0", host("", "deprovisioning")) },
		objects: []string{"BareMetalHost/node-0", "Machine/c-cp-a"}, message: "alive and not deleting"},
	{name: "a host wiped before its etcd member was removed", rule: "etcd-member-removed-first", params: inPlace,
		breakIt: func(h *history) {
			a := machine("v1.36.3", "u1", "c-cp-a", true, "True")
			a[vocab.FieldNode], a[vocab.FieldDeleting] = "c-cp-a", "true"
			h.set(vocab.KindEtcdMember, "etcd-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a"})
			h.set(vocab.KindMachine, "c-cp-a", a)
			h.set(vocab.KindHost, "node-0", host("", "deprovisioning"))
		},
		objects: []string{"BareMetalHost/node-0", "EtcdMember/etcd-c-cp-a"}, message: "etcd member on node c-cp-a of Machine c-cp-a is still a member"},
	{name: "two control-plane Machines deleting", rule: "kcp-one-deleting", params: inPlace,
		breakIt: func(h *history) {
			a := machine("v1.36.3", "u1", "c-cp-a", true, "True")
			a[vocab.FieldDeleting] = "true"
			b := machine("v1.36.3", "u2", "c-cp-b", true, "True")
			b[vocab.FieldDeleting] = "true"
			h.set(vocab.KindMachine, "c-cp-a", a).set(vocab.KindMachine, "c-cp-b", b)
		},
		objects: []string{"KubeadmControlPlane/c-cp", "Machine/c-cp-a", "Machine/c-cp-b"}, message: "2 Machines of the control plane deleting at once"},
	{name: "KCP ends short of its replicas", rule: "end-control-plane", params: inPlace,
		breakIt: func(h *history) { h.set(vocab.KindControlPlane, "c-cp", kcp("v1.36.3", "1", "1", "0")) },
		objects: []string{"KubeadmControlPlane/c-cp"}, message: "KCP ends at v1.36.3 with upToDateReplicas 0"},
	{name: "a MachineDeployment ends short", rule: "end-workers", params: withWorkers(inPlace),
		breakIt: func(h *history) {
			h.set(vocab.KindMachineDeployment, "c-md", map[string]string{vocab.FieldReplicas: "1", vocab.FieldVersion: "v1.36.3", vocab.FieldUpToDateCount: "0", vocab.FieldAvailableCount: "1"})
		},
		objects: []string{"MachineDeployment/c-md"}, message: "MachineDeployment ends at v1.36.3 with upToDateReplicas 0"},
	{name: "workers expected, no MachineDeployment seen", rule: "end-workers", params: withWorkers(inPlace),
		breakIt: func(h *history) {},
		objects: []string{"MachineDeployment"}, message: "no MachineDeployment was seen"},
	{name: "a MachineDeployment above replicas + maxSurge", rule: "md-max-machines", params: withWorkers(inPlace),
		breakIt: func(h *history) {
			h.set(vocab.KindMachineDeployment, "c-md", map[string]string{vocab.FieldReplicas: "1", vocab.FieldMaxSurge: "0", vocab.FieldMaxUnavailable: "1", vocab.FieldVersion: "v1.36.3"})
			for _, w := range []string{"w1", "w2"} {
				m := machine("v1.36.3", w, w, false, "True")
				m[vocab.FieldDeployment] = "c-md"
				h.set(vocab.KindMachine, w, m)
			}
		},
		objects: []string{"Machine/w1", "Machine/w2", "MachineDeployment/c-md"}, message: "2 Machines, the MachineDeployment allows 1"},
	{name: "the cluster moved to another host", rule: "same-hosts", params: expecting(inPlace, func(e *scenario.Expect) { e.SameHosts = true }),
		breakIt: func(h *history) {
			h.set(vocab.KindHost, "node-0", host("", "available"))
			h.set(vocab.KindHost, "node-1", host("c-cp-a", "provisioned"))
		},
		objects: []string{"BareMetalHost/node-1"}, message: "bound hosts before [node-0], after [node-1]"},
	{name: "no spare left", rule: "spares-left", params: expecting(inPlace, func(e *scenario.Expect) { e.SparesLeft = ptr.To(1) }),
		breakIt: func(h *history) {
			spare := host("c-cp-b", "provisioned")
			spare[vocab.FieldSpare] = "true"
			h.set(vocab.KindHost, "node-9", spare)
		},
		objects: nil, message: "0 free spare hosts at the end [], want 1"},
	{name: "an OSTree host's /etc edit lost", rule: "etc-merged", params: withOSTree(inPlace),
		breakIt: func(h *history) { h.set(KindHostEtc, "node-0", map[string]string{FieldMarker: "absent"}) },
		objects: []string{"HostEtc/node-0"}, message: "the /etc edit made before the upgrade is absent"},
	{name: "no /etc edit recorded on OSTree hosts", rule: "etc-merged", params: withOSTree(inPlace),
		breakIt: func(h *history) { h.set(KindHostEtc, "node-0", nil) },
		objects: []string{"HostEtc"}, message: "no /etc edits were recorded on the OSTree hosts"},
	{name: "a manager refused for want of RBAC", rule: "rbac-sufficient", params: inPlace,
		breakIt: func(h *history) {
			h.set(KindForbidden, "baremetal", map[string]string{FieldCount: "3",
				FieldFirst: `secrets "bmc-node-0" is forbidden: User "system:serviceaccount:upgradelab-baremetal-system:upgradelab-baremetal-manager" cannot get resource "secrets"`})
		},
		objects: []string{"ManagerForbidden/baremetal"}, message: `manager baremetal was refused 3 request(s) for want of RBAC; the first: secrets "bmc-node-0" is forbidden`},
	{name: "data lost in place", rule: "persistent-data", params: inPlace,
		breakIt: func(h *history) { h.set(KindHostData, "node-0", map[string]string{FieldMarker: "absent"}) },
		objects: []string{"HostData/node-0"}, message: "the marker written before the upgrade is absent"},
	{name: "kubeadm-config left at the old version", rule: "end-kubeadm-config", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindAddon, vocab.AddonKubeadmConfig, map[string]string{vocab.FieldVersion: "v1.35.3", vocab.FieldFeatureGates: "ControlPlaneKubeletLocalMode=true"})
		},
		objects: []string{"Addon/kubeadm-config"}, message: `kubernetesVersion "v1.35.3", not v1.36.3 (featureGates ControlPlaneKubeletLocalMode=true)`},
	{name: "kube-proxy left behind", rule: "end-kube-proxy", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindAddon, "kube-proxy", addon("registry.k8s.io/kube-proxy:v1.35.3"))
		},
		objects: []string{"Addon/kube-proxy"}, message: "the kube-proxy DaemonSet ends on registry.k8s.io/kube-proxy:v1.35.3, not the image of v1.36.3"},
	{name: "CoreDNS left behind", rule: "end-coredns", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindAddon, "coredns", addon("registry.k8s.io/coredns/coredns:v1.12.1"))
		},
		objects: []string{"Addon/coredns"}, message: "the CoreDNS Deployment ends on registry.k8s.io/coredns/coredns:v1.12.1, not v1.13.1"},
	{name: "etcd not upgraded on the node", rule: "end-etcd", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindEtcdMember, "etcd-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a", vocab.FieldImage: "registry.k8s.io/etcd:3.6.4-0"})
		},
		objects: []string{"EtcdMember/etcd-c-cp-a"}, message: `etcd member on c-cp-a ends on "registry.k8s.io/etcd:3.6.4-0", older than etcd 3.6.5-0`},
	{name: "CAPI says not done", rule: "capi-agrees", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindCluster, "c", map[string]string{vocab.FieldAvailable: "True", vocab.FieldCPUpToDate: "False", vocab.FieldWorkersUpToDate: "True"})
		},
		objects: []string{"Cluster/c"}, message: "controlPlaneMachinesUpToDate=False, workerMachinesUpToDate=True, rollingOut=absent, not that the upgrade is done, while every end rule passed"},
	{name: "the application left short", rule: "end-application", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindApp, "web", map[string]string{vocab.FieldReplicas: "1", vocab.FieldReadyCount: "0"})
		},
		objects: []string{"Deployment/web"}, message: "Deployment web ends with 0 of 1 replicas Ready"},
	{name: "a Machine not up to date at the end", rule: "end-machines-up-to-date", params: inPlace,
		breakIt: func(h *history) {
			h.set(vocab.KindMachine, "c-cp-a", machine("v1.36.3", "u1", "c-cp-a", true, "False"))
		},
		objects: []string{"Machine/c-cp-a"}, message: "ends with UpToDate False"},
}

// Each rule broken on purpose fails with the moment, the objects and a
// message that says what happened.
func TestBrokenRulesFailWithTheMomentAndTheObjects(t *testing.T) {
	for _, tc := range brokenRules {
		t.Run(tc.name, func(t *testing.T) {
			h := goodInPlace()
			tc.breakIt(h)
			var got *Result
			for _, r := range Run(h.entries, tc.params) {
				if r.Rule == tc.rule {
					got = &r
				}
			}
			if got == nil || got.Status != Fail || len(got.Violations) == 0 {
				t.Fatalf("rule %s: %+v; want it failed", tc.rule, got)
			}
			v := got.Violations[0]
			if strings.Join(v.Objects, ",") != strings.Join(tc.objects, ",") || !strings.Contains(v.Message, tc.message) || v.Time.IsZero() {
				t.Fatalf("violation %s; want objects %v and %q", v, tc.objects, tc.message)
			}
		})
	}
}

func withWorkers(p Params) Params {
	p.Workers = 1
	return p
}

func expecting(p Params, edit func(*scenario.Expect)) Params {
	edit(&p.Expect)
	return p
}

// maxSurge and maxUnavailable as percentages are read as CAPI reads them:
// of the MachineDeployment's own replicas, surge rounded up and
// unavailable down.
func TestMachineDeploymentPercentagesAreReadAsCAPIReadsThem(t *testing.T) {
	for _, tc := range []struct {
		name                string
		surge, unavailable  string
		machines, available int
		wantMax, wantMin    Status
	}{
		{name: "25% of 4 surges 1: 5 Machines are allowed", surge: "25%", unavailable: "0", machines: 5, available: 4, wantMax: Pass, wantMin: Pass},
		{name: "25% of 4 surges 1: 6 are not", surge: "25%", unavailable: "0", machines: 6, available: 4, wantMax: Fail, wantMin: Pass},
		{name: "10% of 4 still surges 1 (rounded up)", surge: "10%", unavailable: "0", machines: 5, available: 4, wantMax: Pass, wantMin: Pass},
		{name: "30% of 4 leaves 1 unavailable (rounded down): 3 available hold", surge: "0", unavailable: "30%", machines: 4, available: 3, wantMax: Pass, wantMin: Pass},
		{name: "30% of 4: 2 available break it", surge: "0", unavailable: "30%", machines: 4, available: 2, wantMax: Pass, wantMin: Fail},
		{name: "both 0% read as 1 unavailable", surge: "0%", unavailable: "0%", machines: 4, available: 3, wantMax: Pass, wantMin: Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory()
			h.set(vocab.KindMachineDeployment, "c-md", map[string]string{vocab.FieldReplicas: "4", vocab.FieldMaxSurge: tc.surge, vocab.FieldMaxUnavailable: tc.unavailable, vocab.FieldVersion: "v1.35.3"})
			worker := func(i int, available bool) {
				name := fmt.Sprintf("w%d", i)
				m := machine("v1.35.3", name, name, false, "True")
				m[vocab.FieldDeployment] = "c-md"
				if !available {
					m[vocab.FieldAvailable] = "False"
				}
				h.set(vocab.KindMachine, name, m)
			}
			for i := range 4 {
				worker(i, true)
			}
			h.step(StepUpgrade)
			for i := 4; i < tc.machines; i++ {
				worker(i, false) // surge Machines, provisioning
			}
			for i := tc.available; i < 4; i++ {
				worker(i, false)
			}
			st := statuses(Run(h.entries, Params{Strategy: scenario.Rolling, Workers: 4, ToVersion: "v1.36.3"}))
			if st["md-max-machines"] != tc.wantMax || st["md-min-available"] != tc.wantMin {
				t.Fatalf("md-max-machines %s, md-min-available %s; want %s, %s", st["md-max-machines"], st["md-min-available"], tc.wantMax, tc.wantMin)
			}
		})
	}
}

// Control-plane rules count each KCP's own Machines: two clusters'
// control planes side by side break nothing.
func TestControlPlaneRulesCountPerOwner(t *testing.T) {
	h := newHistory()
	for _, k := range []string{"a-cp", "b-cp"} {
		h.set(vocab.KindControlPlane, k, kcp("v1.35.3", "1", "1", "1"))
		for _, n := range []string{"1", "2"} {
			m := machine("v1.35.3", k+n, k+n, true, "True")
			m[vocab.FieldControlPlaneName] = k
			m[vocab.FieldDeleting] = map[string]string{"1": "true", "2": ""}[n]
			h.set(vocab.KindMachine, k+"-"+n, m)
		}
	}
	st := statuses(Run(h.entries, scaleIn))
	if st["kcp-max-machines"] != Pass || st["kcp-one-deleting"] != Pass {
		t.Fatalf("two KCPs of 2 Machines each (replicas 1 + maxSurge 1), one deleting each: kcp-max-machines %s, kcp-one-deleting %s; want pass", st["kcp-max-machines"], st["kcp-one-deleting"])
	}
	m := machine("v1.35.3", "a3", "a3", true, "True")
	m[vocab.FieldControlPlaneName] = "a-cp"
	h.set(vocab.KindMachine, "a-cp-3", m)
	if st := statuses(Run(h.entries, scaleIn)); st["kcp-max-machines"] != Fail {
		t.Fatalf("a third Machine of a-cp: kcp-max-machines %s; want fail", st["kcp-max-machines"])
	}
}

// Rules that judge deletions and deprovisioning pass only when one
// happened; a rolling run exercises them.
func TestDeletionRulesAreExercisedByARollout(t *testing.T) {
	h := goodInPlace()
	a := machine("v1.35.3", "u1", "c-cp-a", true, "True")
	a[vocab.FieldNode], a[vocab.FieldDeleting] = "c-cp-a", "true"
	h.set(vocab.KindEtcdMember, "etcd-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a", vocab.FieldRemoved: "true"})
	h.set(vocab.KindMachine, "c-cp-a", a)
	h.set(vocab.KindHost, "node-0", host("", "deprovisioning"))
	p := scaleIn
	p.HostsVisible = true
	st := statuses(Run(h.entries, p))
	for _, rule := range []string{"kcp-one-deleting", "no-wipe-under-live-machine", "etcd-member-removed-first", "deletion-order"} {
		if st[rule] != Pass {
			t.Errorf("%s: %s; want pass", rule, st[rule])
		}
	}
}

// A rolling MachineDeployment with maxUnavailable 0 that lets a Machine
// go unavailable before its replacement is available breaks its promise;
// unavailability before the upgrade (provisioning) does not count.
func TestMachineDeploymentAvailabilityCountsOnlyDuringTheUpgrade(t *testing.T) {
	md := map[string]string{vocab.FieldReplicas: "2", vocab.FieldMaxSurge: "1", vocab.FieldMaxUnavailable: "0", vocab.FieldVersion: "v1.35.3"}
	worker := func(name, available string) map[string]string {
		m := machine("v1.35.3", name, name, false, "True")
		m[vocab.FieldDeployment], m[vocab.FieldAvailable] = "c-md", available
		return m
	}
	h := newHistory()
	h.set(vocab.KindMachineDeployment, "c-md", md)
	h.set(vocab.KindMachine, "w1", worker("w1", "False")) // provisioning: fine
	h.set(vocab.KindMachine, "w1", worker("w1", "True"))
	h.set(vocab.KindMachine, "w2", worker("w2", "True"))
	h.step(StepUpgrade)
	h.set(vocab.KindMachine, "w3", worker("w3", "False"))
	h.set(vocab.KindMachine, "w1", worker("w1", "False")) // too early
	p := Params{Strategy: scenario.Rolling, Workers: 2, ToVersion: "v1.36.3"}
	st := statuses(Run(h.entries, p))
	if st["md-min-available"] != Fail {
		t.Fatalf("md-min-available %s; want fail", st["md-min-available"])
	}
	if st["md-max-machines"] != Pass {
		t.Fatalf("3 machines with replicas 2 + maxSurge 1: md-max-machines %s; want pass", st["md-max-machines"])
	}
}

// A member KCP removed before the host went is what CAPI promises.
func TestEtcdMemberRemovedBeforeTheHostGoesPasses(t *testing.T) {
	h := goodInPlace()
	a := machine("v1.36.3", "u1", "c-cp-a", true, "True")
	a[vocab.FieldNode], a[vocab.FieldDeleting] = "c-cp-a", "true"
	h.set(vocab.KindEtcdMember, "etcd-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a"})
	h.set(vocab.KindEtcdMember, "etcd-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a", vocab.FieldRemoved: "true"})
	h.set(vocab.KindMachine, "c-cp-a", a)
	h.set(vocab.KindHost, "node-0", host("", "deprovisioning"))
	if st := statuses(Run(h.entries, inPlace)); st["etcd-member-removed-first"] != Pass {
		t.Fatalf("etcd-member-removed-first %s; want pass", st["etcd-member-removed-first"])
	}
}

// An in-place update that fails its health check: the host falls back,
// CAPI reports the failed update on the Machine, the Node stays at the
// old version.
func rolledBack() *history {
	h := provisionedSingleNode()
	failUpdate(h)
	// As CAPI v1.14 reports it: the spec is up to date, the Machine (its
	// Ready counts the failed Updating) is not ready.
	h.set(vocab.KindCluster, "c", map[string]string{vocab.FieldAvailable: "True", vocab.FieldCPUpToDate: "True", vocab.FieldWorkersUpToDate: "True",
		vocab.FieldCPMachinesReady: "False", vocab.FieldWorkerMachinesReady: "True"})
	h.step(StepDone)
	h.set(KindHostData, "node-0", map[string]string{FieldMarker: "present"})
	return h
}

// failUpdate is the upgrade step and the one Machine's in-place update
// failing, the application whole.
func failUpdate(h *history) {
	h.step(StepUpgrade)
	h.set(vocab.KindControlPlane, "c-cp", kcp("v1.36.3", "1", "1", "0"))
	failed := machine("v1.36.3", "u1", "c-cp-a", true, "False")
	failed[vocab.FieldUpdateFailed] = "true"
	h.set(vocab.KindMachine, "c-cp-a", failed)
	h.set(vocab.KindApp, "web", map[string]string{vocab.FieldReplicas: "1", vocab.FieldReadyCount: "1"})
}

var rollback = func() Params {
	p := inPlace
	p.FromVersion = "v1.35.3"
	p.Expect.Outcome = scenario.RolledBack
	return p
}()

func TestARollbackIsJudgedByItsOwnEnd(t *testing.T) {
	st := statuses(Run(rolledBack().entries, rollback))
	for rule, want := range map[string]Status{"end-rolled-back": Pass, "end-nodes-ready": Pass, "capi-agrees": Pass, "same-machines": Pass,
		"persistent-data": Pass, "end-machines-up-to-date": NotApplicable, "end-control-plane": NotApplicable,
		"end-coredns": NotApplicable, "end-etcd": NotApplicable} {
		if st[rule] != want {
			t.Errorf("%s: %s, want %s", rule, st[rule], want)
		}
	}
	// The same timeline judged as an upgrade fails: nothing is up to date.
	if st := statuses(Run(rolledBack().entries, inPlace)); st["end-machines-up-to-date"] != Fail || st["end-nodes-ready"] != Fail || st["end-rolled-back"] != NotApplicable {
		t.Errorf("a rollback judged as an upgrade: %v", st)
	}
	for _, tc := range []struct {
		name, rule, message string
		breakIt             func(h *history)
	}{
		{"no failure reported", "end-rolled-back", "no Machine's Updating condition says the in-place update failed", func(h *history) {
			h.set(vocab.KindMachine, "c-cp-a", machine("v1.36.3", "u1", "c-cp-a", true, "False"))
		}},
		{"the Machine deleted on the way back", "end-rolled-back", "Machine c-cp-a is deleting after the rollback", func(h *history) {
			m := machine("v1.36.3", "u1", "c-cp-a", true, "False")
			m[vocab.FieldUpdateFailed], m[vocab.FieldDeleting] = "true", "true"
			h.set(vocab.KindMachine, "c-cp-a", m)
		}},
		{"the Node left at the new version", "end-nodes-ready", "Node c-cp-a ends Ready=True with kubelet v1.36.3", func(h *history) {
			h.set(vocab.KindNode, "c-cp-a", map[string]string{vocab.FieldReady: "True", vocab.FieldKubelet: "v1.36.3"})
		}},
		{"CAPI says everything is fine", "capi-agrees", "not that the cluster is available with machines not ready or not up to date", func(h *history) {
			fine := map[string]string{vocab.FieldCPMachinesReady: "True", vocab.FieldWorkerMachinesReady: "True"}
			for k, v := range done {
				fine[k] = v
			}
			h.set(vocab.KindCluster, "c", fine)
		}},
	} {
		h := rolledBack()
		tc.breakIt(h)
		var got *Result
		results := Run(h.entries, rollback)
		for i := range results {
			if results[i].Rule == tc.rule {
				got = &results[i]
			}
		}
		if got == nil || got.Status != Fail || len(got.Violations) == 0 || !strings.Contains(got.Violations[0].Message, tc.message) {
			t.Errorf("%s: %+v; want %s to fail with %q", tc.name, got, tc.rule, tc.message)
		}
	}
}

// Three control-plane Machines, each with its etcd member on a Ready node,
// into the upgrade.
func threeMembers() *history {
	h := newHistory()
	for _, n := range []string{"a", "b", "c"} {
		h.set(vocab.KindMachine, "c-cp-"+n, machine("v1.35.3", "u-"+n, "c-cp-"+n, true, "True"))
		h.set(vocab.KindNode, "c-cp-"+n, map[string]string{vocab.FieldReady: "True", vocab.FieldKubelet: "v1.35.3"})
		h.set(vocab.KindEtcdMember, "etcd-c-cp-"+n, map[string]string{vocab.FieldNode: "c-cp-" + n})
	}
	h.step(StepUpgrade)
	return h
}

var scaleIn = Params{Strategy: scenario.ScaleIn, ControlPlaneReplicas: 3, FromVersion: "v1.35.3", ToVersion: "v1.36.3"}

func TestEtcdQuorumAndDeletionOrder(t *testing.T) {
	results := func(h *history) map[string]Result {
		out := map[string]Result{}
		for _, r := range Run(h.entries, scaleIn) {
			out[r.Rule] = r
		}
		return out
	}
	h := threeMembers()
	notReady := map[string]string{vocab.FieldReady: "False", vocab.FieldKubelet: "v1.35.3"}
	h.set(vocab.KindNode, "c-cp-a", notReady) // one of three down: quorum kept
	h.set(vocab.KindEtcdMember, "etcd-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a", vocab.FieldRemoved: "true"})
	h.set(vocab.KindNode, "c-cp-b", notReady) // a removed member and one down of two: 1 of 2 is no majority
	got := results(h)["etcd-quorum"]
	if got.Status != Fail || len(got.Violations) != 1 || !strings.Contains(got.Violations[0].Message, "1 of 2 members on Ready nodes") ||
		strings.Join(got.Violations[0].Objects, ",") != "EtcdMember/etcd-c-cp-b" {
		t.Errorf("etcd-quorum: %+v", got)
	}
	if r := results(threeMembers().set(vocab.KindNode, "c-cp-a", notReady))["etcd-quorum"]; r.Status != Pass {
		t.Errorf("one member of three down is still a quorum: %+v", r)
	}
	if r := Run(threeMembers().entries, Params{ControlPlaneReplicas: 1}); statuses(r)["etcd-quorum"] != NotApplicable {
		t.Errorf("a single-member etcd has no quorum to keep, want n/a: %v", statuses(r))
	}

	h = threeMembers()
	h.set(vocab.KindMachine, "c-cp-d", machine("v1.36.3", "u-d", "c-cp-d", true, "True"))
	oldGoes := machine("v1.35.3", "u-a", "c-cp-a", true, "False")
	oldGoes[vocab.FieldDeleting] = "true"
	h.set(vocab.KindMachine, "c-cp-a", oldGoes)
	if r := results(h)["deletion-order"]; r.Status != Pass {
		t.Errorf("an outdated Machine deleted first: %+v", r)
	}
	newGoes := machine("v1.36.3", "u-d", "c-cp-d", true, "True")
	newGoes[vocab.FieldDeleting] = "true"
	h.set(vocab.KindMachine, "c-cp-d", newGoes)
	got = results(h)["deletion-order"]
	if got.Status != Fail || len(got.Violations) != 2 || !strings.Contains(got.Violations[0].Message, "Machine c-cp-d at v1.36.3 deleted while c-cp-b of the control plane is still at v1.35.3") {
		t.Errorf("deletion-order: %+v", got)
	}
}

func TestWorkloadDataMustSurvive(t *testing.T) {
	p := inPlace
	p.WorkloadData = true
	h := goodInPlace()
	h.set(KindWorkloadData, "ConfigMap/default/m", map[string]string{FieldMarker: "written"})
	h.set(KindWorkloadData, "ConfigMap/default/m", map[string]string{FieldMarker: "present"})
	if st := statuses(Run(h.entries, p)); st["workload-data"] != Pass {
		t.Errorf("kept object: %v", st["workload-data"])
	}
	h.set(KindWorkloadData, "ConfigMap/default/m", map[string]string{FieldMarker: "absent"})
	for _, r := range Run(h.entries, p) {
		if r.Rule == "workload-data" && (r.Status != Fail || !strings.Contains(r.Violations[0].Message, "the object written before the upgrade is absent") ||
			r.Violations[0].Objects[0] != "WorkloadData/ConfigMap/default/m") {
			t.Errorf("lost object: %+v", r)
		}
	}
	if st := statuses(Run(goodInPlace().entries, p)); st["workload-data"] != Fail {
		t.Errorf("a run that recorded no workload object: %v", st["workload-data"])
	}
}

// A deletion and a creation seen in one poll (same time) replay deletion
// first, whatever order the timeline lists them in: no phantom surge.
func TestOnePollsChangesReplayDeletionsFirst(t *testing.T) {
	h := threeMembers()
	h.set(vocab.KindControlPlane, "c-cp", kcp("v1.36.3", "3", "0", "0"))
	at := h.t.Add(time.Second)
	h.entries = append(h.entries,
		timeline.Entry{Time: at, Kind: vocab.KindMachine, Name: "c-cp-d", New: machine("v1.36.3", "u-d", "c-cp-d", true, "True")},
		timeline.Entry{Time: at, Kind: vocab.KindMachine, Name: "c-cp-a", Old: machine("v1.35.3", "u-a", "c-cp-a", true, "False")})
	if st := statuses(Run(h.entries, scaleIn)); st["kcp-max-machines"] != Pass {
		t.Errorf("kcp-max-machines: %s", st["kcp-max-machines"])
	}
	// Seen a moment apart, the same two changes are a real surge.
	h.entries[len(h.entries)-1].Time = at.Add(time.Millisecond)
	if st := statuses(Run(h.entries, scaleIn)); st["kcp-max-machines"] != Fail {
		t.Errorf("a replacement created before the deletion: kcp-max-machines %s", st["kcp-max-machines"])
	}
}

// A worker seen deleting and its replacement seen available in one poll
// (the same time): whichever order the timeline lists them in, the poll
// is judged as a whole and the MachineDeployment kept its promise. Seen
// a moment apart, deletion first, it did not.
func TestOnePollIsJudgedAsAWhole(t *testing.T) {
	md := map[string]string{vocab.FieldReplicas: "2", vocab.FieldMaxSurge: "1", vocab.FieldMaxUnavailable: "0", vocab.FieldVersion: "v1.36.3"}
	worker := func(name, version, available, deleting string) map[string]string {
		m := machine(version, name, name, false, "True")
		m[vocab.FieldDeployment], m[vocab.FieldAvailable] = "c-md", available
		if deleting != "" {
			m[vocab.FieldDeleting] = deleting
		}
		return m
	}
	h := newHistory()
	h.set(vocab.KindMachineDeployment, "c-md", md)
	h.set(vocab.KindMachine, "w-old-a", worker("w-old-a", "v1.35.3", "True", ""))
	h.set(vocab.KindMachine, "w-old-b", worker("w-old-b", "v1.35.3", "True", ""))
	h.step(StepUpgrade)
	h.set(vocab.KindMachine, "w-new-a", worker("w-new-a", "v1.36.3", "False", ""))
	at := h.t.Add(time.Second)
	h.entries = append(h.entries,
		timeline.Entry{Time: at, Kind: vocab.KindMachine, Name: "w-old-a", Old: h.last["Machine/w-old-a"], New: worker("w-old-a", "v1.35.3", "False", "true")},
		timeline.Entry{Time: at, Kind: vocab.KindMachine, Name: "w-new-a", Old: h.last["Machine/w-new-a"], New: worker("w-new-a", "v1.36.3", "True", "")})
	p := Params{Strategy: scenario.Rolling, Workers: 2, ToVersion: "v1.36.3"}
	if st := statuses(Run(h.entries, p)); st["md-min-available"] != Pass {
		t.Errorf("one poll: md-min-available %s; want pass", st["md-min-available"])
	}
	h.entries[len(h.entries)-1].Time = at.Add(time.Millisecond)
	if st := statuses(Run(h.entries, p)); st["md-min-available"] != Fail {
		t.Errorf("deleting first, replacement available 1 ms later: md-min-available %s; want fail", st["md-min-available"])
	}
}

func TestSummaryNamesWhatDidNotPass(t *testing.T) {
	got := Summary([]Result{{Rule: "a", Status: Pass}, {Rule: "b", Status: NotExercised}, {Rule: "c", Status: NotExercised}, {Rule: "d", Status: NotApplicable}, {Rule: "e", Status: ExpectedFail}})
	if want := "1 pass, 1 expected fail (e), 2 not exercised (b, c), 1 n/a"; got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
}

// reverted is an in-place update that failed, then the user's revert to
// v1.35.3 taking the same Machine back; failed says whether CAPI
// reported the failure before the revert.
func reverted(failed bool) *history {
	h := provisionedSingleNode()
	h.set(vocab.KindAddon, "kube-proxy", addon("registry.k8s.io/kube-proxy:v1.35.3"))
	h.set(vocab.KindWorkloadAPI, "api", apiUp)
	h.step(StepUpgrade)
	h.set(vocab.KindControlPlane, "c-cp", kcp("v1.36.3", "1", "1", "0"))
	h.set(vocab.KindAddon, vocab.AddonKubeadmConfig, map[string]string{vocab.FieldVersion: "v1.36.3"})
	m := updating(machine("v1.36.3", "u1", "c-cp-a", true, "False"))
	if failed {
		m[vocab.FieldUpdateFailed] = "true"
	}
	h.set(vocab.KindMachine, "c-cp-a", m)
	h.step(StepRevert)
	h.set(vocab.KindControlPlane, "c-cp", kcp("v1.35.3", "1", "1", "0"))
	// The extension points the failed update at what the KCP asks now.
	h.set(vocab.KindAddon, vocab.AddonKubeadmConfig, map[string]string{vocab.FieldVersion: "v1.35.3", vocab.FieldFeatureGates: "ControlPlaneKubeletLocalMode=true"})
	h.set(vocab.KindMachine, "c-cp-a", updating(machine("v1.35.3", "u1", "c-cp-a", true, "False")))
	h.set(vocab.KindMachine, "c-cp-a", machine("v1.35.3", "u1", "c-cp-a", true, "True"))
	h.set(vocab.KindControlPlane, "c-cp", kcp("v1.35.3", "1", "1", "1"))
	h.set(vocab.KindApp, "web", map[string]string{vocab.FieldReplicas: "1", vocab.FieldReadyCount: "1"})
	h.set(vocab.KindCluster, "c", done)
	h.step(StepDone)
	h.set(KindHostData, "node-0", map[string]string{FieldMarker: "present"})
	return h
}

var revertedParams = func() Params {
	p := inPlace
	p.FromVersion, p.ToCoreDNS, p.ToEtcd = "v1.35.3", "v1.12.1", "3.6.4-0"
	p.Expect.Outcome = scenario.Reverted
	p.Expect.SameMachines = true
	return p
}()

// A reverted run is judged whole at the version it went back to, and
// only after a failure it reverted.
func TestARevertIsJudgedAtTheOldVersion(t *testing.T) {
	st := statuses(Run(reverted(true).entries, revertedParams))
	for _, rule := range []string{"end-machines-up-to-date", "end-control-plane", "end-kubeadm-config", "end-kube-proxy", "end-coredns", "end-etcd", "end-nodes-ready", "same-machines", "reverted-after-failure", "capi-agrees"} {
		if st[rule] != Pass {
			t.Errorf("%s: %s; want pass", rule, st[rule])
		}
	}
	if st["end-rolled-back"] != NotApplicable {
		t.Errorf("end-rolled-back %s; want n/a", st["end-rolled-back"])
	}
	// kubeadm never downgrades etcd: a member the failed update moved up
	// keeps its newer etcd, and the revert is whole; an older one is not.
	for image, want := range map[string]Status{"registry.k8s.io/etcd:3.6.5-0": Pass, "registry.k8s.io/etcd:3.6.3-0": Fail} {
		h := reverted(true)
		h.set(vocab.KindEtcdMember, "etcd-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a", vocab.FieldImage: image})
		if got := statuses(Run(h.entries, revertedParams))["end-etcd"]; got != want {
			t.Errorf("a reverted member on %s: end-etcd %s, want %s", image, got, want)
		}
	}
	if st := statuses(Run(reverted(false).entries, revertedParams)); st["reverted-after-failure"] != Fail {
		t.Errorf("a revert without a failure: reverted-after-failure %s; want fail", st["reverted-after-failure"])
	}
	if st["spec-matches-host"] != Pass {
		t.Errorf("spec-matches-host %s; want pass", st["spec-matches-host"])
	}
	h := reverted(true)
	h.set(vocab.KindAddon, vocab.AddonKubeadmConfig, map[string]string{vocab.FieldVersion: "v1.36.3"})
	if st := statuses(Run(h.entries, revertedParams)); st["end-kubeadm-config"] != Fail {
		t.Errorf("kubeadm-config left at the failed version: end-kubeadm-config %s; want fail", st["end-kubeadm-config"])
	}
}

// A failed update answered done at its owner's revert, the Machine still
// saying the failed version until its owner takes it in place again,
// breaks spec-matches-host for that moment.
func TestARevertAnsweredDoneAtTheFailedVersionDoesNotMatchTheHost(t *testing.T) {
	h := provisionedSingleNode()
	h.step(StepUpgrade)
	failed := updating(machine("v1.36.3", "u1", "c-cp-a", true, "False"))
	failed[vocab.FieldUpdateFailed] = "true"
	h.set(vocab.KindMachine, "c-cp-a", failed)
	h.step(StepRevert)
	h.set(vocab.KindMachine, "c-cp-a", machine("v1.36.3", "u1", "c-cp-a", true, "False"))
	h.set(vocab.KindMachine, "c-cp-a", updating(machine("v1.35.3", "u1", "c-cp-a", true, "False")))
	h.set(vocab.KindMachine, "c-cp-a", machine("v1.35.3", "u1", "c-cp-a", true, "True"))
	h.step(StepDone)
	var got *Result
	for _, r := range Run(h.entries, revertedParams) {
		if r.Rule == "spec-matches-host" {
			got = &r
		}
	}
	if got == nil || got.Status != Fail || len(got.Violations) != 2 {
		t.Fatalf("spec-matches-host: %+v; want a failure naming the Node and the host", got)
	}
	for _, v := range got.Violations {
		if !strings.Contains(v.Message, "Machine c-cp-a says v1.36.3, not updating") {
			t.Errorf("violation %s", v)
		}
	}
}

// A host that booted a ramdisk (inspection, provisioning) runs no
// Machine's image: spec-matches-host forgets its last disk image.
func TestARamdiskBootIsNoImageOfTheMachine(t *testing.T) {
	h := provisionedSingleNode()
	h.set(timeline.KindLab, "node-0", map[string]string{vocab.FieldLabKind: "boot", vocab.FieldReason: vocab.LabOSRunning, vocab.FieldLabSource: "virtual-media", vocab.FieldKubernetesVersion: "v1.34.0"})
	h.set(vocab.KindMachine, "c-cp-a", machine("v1.35.3", "u1", "c-cp-a", true, "True"))
	if st := statuses(Run(h.entries, inPlace)); st["spec-matches-host"] != Pass {
		t.Errorf("spec-matches-host %s after a ramdisk boot; want pass", st["spec-matches-host"])
	}
}

// A Machine at the new version that a MachineHealthCheck found unhealthy
// may be deleted before the old ones: that is remediation, not a
// rollout's order.
func TestRemediationIsNotADeletionOrderViolation(t *testing.T) {
	build := func(healthChecks ...string) *history {
		h := newHistory()
		h.set(vocab.KindControlPlane, "c-cp", kcp("v1.35.3", "3", "0", "3"))
		for _, n := range []string{"a", "b"} {
			h.set(vocab.KindMachine, "c-cp-"+n, machine("v1.35.3", "u"+n, "c-cp-"+n, true, "True"))
		}
		h.set(vocab.KindMachine, "c-cp-c", machine("v1.35.3", "uc", "c-cp-c", true, "True"))
		h.step(StepUpgrade)
		c := machine("v1.36.3", "uc", "c-cp-c", true, "True")
		for _, hc := range healthChecks {
			c = maps.Clone(c)
			c[vocab.FieldHealthCheck] = hc
			h.set(vocab.KindMachine, "c-cp-c", c)
		}
		c = maps.Clone(c)
		c[vocab.FieldDeleting] = "true"
		h.set(vocab.KindMachine, "c-cp-c", c)
		return h
	}
	if st := statuses(Run(build("False").entries, scaleIn)); st["deletion-order"] != Pass {
		t.Errorf("an unhealthy Machine remediated: deletion-order %s; want pass", st["deletion-order"])
	}
	// KCP can act on the verdict after the Machine recovered.
	if st := statuses(Run(build("False", "True").entries, scaleIn)); st["deletion-order"] != Pass {
		t.Errorf("a Machine remediated on an earlier verdict: deletion-order %s; want pass", st["deletion-order"])
	}
	if st := statuses(Run(build("True").entries, scaleIn)); st["deletion-order"] != Fail {
		t.Errorf("a healthy new Machine deleted first: deletion-order %s; want fail", st["deletion-order"])
	}
}

// CAPI's cluster controller does not reconcile the Cluster when a
// control-plane Machine changes once the control plane is initialised: a
// Cluster last written before the Machine's update failed still says
// what it said before. capi-agrees could not have agreed: not exercised,
// and said so, never a pass or a failure.
func TestAClusterCAPIDidNotReconcileSinceTheFailureIsNotJudged(t *testing.T) {
	h := provisionedSingleNode()
	fine := map[string]string{vocab.FieldCPMachinesReady: "True", vocab.FieldWorkerMachinesReady: "True"}
	for k, v := range done {
		fine[k] = v
	}
	h.set(vocab.KindCluster, "c", fine)
	failUpdate(h)
	h.step(StepDone)
	h.set(KindHostData, "node-0", map[string]string{FieldMarker: "present"})
	r := result(h, rollback, "capi-agrees")
	if r.Status != NotExercised || !strings.Contains(r.Note, "was not reconciled after the last Machine change") {
		t.Fatalf("capi-agrees on a stale Cluster: %s %v, note %q", r.Status, r.Violations, r.Note)
	}
}

// A run that stopped before its upgrade reached no rule: each applicable
// one that held is "not run" with the reason, none failed. A rule that
// failed before the stop stands, before the upgrade or after it: a
// violation seen is real. One that stopped during its upgrade keeps what
// the rules saw at each moment and has the rules of its end not run. The
// stop comes to the rules in their Params, as `upgradelab check` reads
// them from params.json.
func TestAStoppedRunFailsNoRuleItNeverReached(t *testing.T) {
	why := "the plane did not start: etcd: bind: address already in use"
	stopped := inPlace
	stopped.Stopped = why
	h := provisionedSingleNode()
	h.set(vocab.KindHost, "node-1", host("c-cp-a", "provisioned")) // c-cp-a bound to two hosts before the upgrade
	for _, r := range Run(h.entries, stopped) {
		switch {
		case r.Rule == "host-bound-once" && r.Status != Fail:
			t.Errorf("host-bound-once is %q: a Machine bound to two hosts before the stop is a real failure", r.Status)
		case r.Rule != "host-bound-once" && r.Status != NotRun && r.Status != NotApplicable:
			t.Errorf("stopped before the upgrade: %s is %q, want not run", r.Rule, r.Status)
		case r.Status == NotRun && r.Note != "the run stopped before its upgrade: "+why:
			t.Errorf("%s: note %q", r.Rule, r.Note)
		}
	}
	h = provisionedSingleNode()
	h.step(StepUpgrade)
	h.set(vocab.KindMachine, "c-cp-b", machine("v1.36.3", "u2", "c-cp-b", true, "False")) // a second Machine: same-machines breaks
	h.set(KindForbidden, "capi", map[string]string{FieldCount: "1", FieldFirst: `machines is forbidden: User "system:serviceaccount:capi-system:capi-manager"`})
	st := statuses(Run(h.entries, stopped))
	for rule, want := range map[string]Status{"same-machines": Fail, "rbac-sufficient": Fail,
		"end-machines-up-to-date": NotRun, "end-nodes-ready": NotRun, "capi-agrees": NotRun, "end-control-plane": NotRun} {
		if st[rule] != want {
			t.Errorf("stopped during the upgrade: %s is %q, want %q", rule, st[rule], want)
		}
	}
	if st := statuses(Run(h.entries, inPlace)); st["end-machines-up-to-date"] != Fail {
		t.Errorf("the same timeline of a run that did not stop: end-machines-up-to-date is %q, want it judged (fail)", st["end-machines-up-to-date"])
	}
}

// The report lays the rules out by group, so each group's rules are
// together in Rules and every rule has one.
func TestEveryRuleHasAGroupAndGroupsAreTogether(t *testing.T) {
	seen := map[Group]bool{}
	var last Group
	for _, r := range Rules {
		if !slices.Contains(Groups, r.Group) {
			t.Fatalf("rule %s has group %q, not one of %v", r.Name, r.Group, Groups)
		}
		if r.Group != last && seen[r.Group] {
			t.Errorf("rule %s of group %s is apart from the rest of its group", r.Name, r.Group)
		}
		seen[r.Group], last = true, r.Group
	}
}

// A Machine that starts its update while the Cluster is paused breaks
// paused-respected, at that moment and naming it; the same update once
// the pause is lifted passes.
func TestNothingMovesWhileTheClusterIsPaused(t *testing.T) {
	paused := map[string]string{vocab.FieldPaused: "true"}
	// pausedRun inserts the pause after the upgrade step and lifts it
	// before the entry at liftBefore (-1: never).
	pausedRun := func(liftBefore int) []timeline.Entry {
		var out []timeline.Entry
		good := goodInPlace().entries
		for i, e := range good {
			if i == liftBefore {
				out = append(out, timeline.Entry{Time: e.Time.Add(-time.Millisecond), Kind: vocab.KindCluster, Name: "c", Old: paused, New: map[string]string{}})
			}
			out = append(out, e)
			if e.Kind == timeline.KindStep && e.Name == StepUpgrade {
				out = append(out, timeline.Entry{Time: e.Time.Add(time.Millisecond), Kind: vocab.KindCluster, Name: "c", New: paused})
			}
		}
		return out
	}
	result := func(entries []timeline.Entry) Result {
		for _, r := range Run(entries, inPlace) {
			if r.Rule == "paused-respected" {
				return r
			}
		}
		t.Fatal("no paused-respected result")
		return Result{}
	}
	if got := result(goodInPlace().entries); got.Status != NotExercised {
		t.Fatalf("a run whose Cluster was never paused: %s; want not exercised", got.Status)
	}
	got := result(pausedRun(-1))
	if got.Status != Fail || len(got.Violations) == 0 {
		t.Fatalf("an update while paused: %s %v; want it failed", got.Status, got.Violations)
	}
	if v := got.Violations[0]; strings.Join(v.Objects, ",") != "Machine/c-cp-a" || !strings.Contains(v.Message, "started an in-place update while its Cluster was paused") {
		t.Fatalf("violation %s", v)
	}
	firstMachineChange := slices.IndexFunc(goodInPlace().entries, func(e timeline.Entry) bool {
		return e.Kind == vocab.KindMachine && e.Old != nil && e.New[vocab.FieldVersion] == "v1.36.3"
	})
	if got := result(pausedRun(firstMachineChange)); got.Status != Pass {
		t.Fatalf("an update after the pause was lifted: %s %v; want pass", got.Status, got.Violations)
	}
}

// Where KCP ends held with a static pod crash-looping, static-pods-run's
// note says what holds it in KCP's words; otherwise the note is empty.
func TestStaticPodsRunNotesWhatHoldsKCP(t *testing.T) {
	note := func(h *history) string {
		for _, r := range Run(h.entries, inPlace) {
			if r.Rule == "static-pods-run" {
				return r.Note
			}
		}
		t.Fatal("static-pods-run not judged")
		return ""
	}
	if n := note(goodInPlace()); n != "" {
		t.Errorf("a good run's note: %q", n)
	}
	h := goodInPlace()
	held := kcp("v1.36.3", "1", "1", "0")
	held[vocab.FieldBlocked] = "Scaling down from 3 to 2 replicas is blocked because: * waiting for control plane components to become healthy"
	h.set(vocab.KindControlPlane, "c-cp", held)
	if n := note(h); n != "" {
		t.Errorf("KCP held with no static pod crash-looping: note %q", n)
	}
	h.set(vocab.KindStaticPod, "kube-apiserver-c-cp-a", map[string]string{vocab.FieldNode: "c-cp-a", vocab.FieldCrashLoop: "unrecognized feature gate: X"})
	if n := note(h); n != "KCP c-cp ends saying: "+held[vocab.FieldBlocked] {
		t.Errorf("note %q", n)
	}
}

// A poll reads Nodes before Machines: the poll in which the Machine's
// update ends can hold its Node as read a moment before the Node reported
// the new kubelet (which the extension waited for). The next poll's Node
// judges it: caught up, the rule holds; still on the old kubelet, it
// breaks, saying what the Machine said when its update ended.
func TestAnUpdatesEndIsJudgedAgainstTheNextPollsNode(t *testing.T) {
	// run records the update's end, then the runner's done step (no
	// poll: it must not judge the Node read before), then, when
	// nextPoll, a poll whose Node reads kubelet next.
	run := func(nextPoll bool, next string) *Result {
		h := provisionedSingleNode()
		h.step(StepUpgrade)
		h.set(vocab.KindMachine, "c-cp-a", updating(machine("v1.36.3", "u1", "c-cp-a", true, "False")))
		h.set(timeline.KindLab, "node-0", osRunning("v1.36.3"))
		h.set(vocab.KindMachine, "c-cp-a", machine("v1.36.3", "u1", "c-cp-a", true, "True"))
		h.step(StepDone)
		if nextPoll {
			h.set(vocab.KindNode, "c-cp-a", map[string]string{vocab.FieldReady: "True", vocab.FieldKubelet: next, "seen": "again"})
		}
		for _, r := range Run(h.entries, inPlace) {
			if r.Rule == "spec-matches-host" {
				return &r
			}
		}
		return nil
	}
	if got := run(true, "v1.36.3"); got == nil || got.Status != Pass {
		t.Errorf("the Node caught up at the next poll: %+v; want a pass", got)
	}
	want := "Machine c-cp-a says v1.36.3, not updating, while its Node c-cp-a runs kubelet v1.35.3"
	for _, c := range []struct {
		name     string
		nextPoll bool
	}{{"the Node still on the old kubelet at the next poll", true}, {"no poll after the update's end", false}} {
		got := run(c.nextPoll, "v1.35.3")
		if got == nil || got.Status != Fail || len(got.Violations) != 1 || got.Violations[0].Message != want {
			t.Errorf("%s: %+v; want that failure", c.name, got)
		}
	}
}
