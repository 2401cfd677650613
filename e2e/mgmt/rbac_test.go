package mgmt

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The identities read from the managers' configs are what `kustomize
// build config/default` deploys: CAPI's core manager as capi-manager in
// capi-system, bound to its aggregated role with its own role labelled
// into it; ours under our prefix, with the role CAPI's contract asks for.
func TestManagerIdentitiesFollowTheirKustomizations(t *testing.T) {
	version, err := capiVersion()
	if err != nil {
		t.Fatal(err)
	}
	capiDir, err := moduleDir(capiModule, version)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, configDir, user, binding, boundRole string
		labelled                                  map[string]string // ClusterRole name: the label it must carry
	}{
		{name: "capi", configDir: filepath.Join(capiDir, "core", "config"), user: "system:serviceaccount:capi-system:capi-manager",
			binding: "capi-manager-rolebinding", boundRole: "capi-aggregated-manager-role",
			labelled: map[string]string{"capi-manager-role": "cluster.x-k8s.io/aggregate-to-manager"}},
		{name: "kcp", configDir: filepath.Join(capiDir, "controlplane", "kubeadm", "config"),
			user:    "system:serviceaccount:capi-kubeadm-control-plane-system:capi-kubeadm-control-plane-manager",
			binding: "capi-kubeadm-control-plane-manager-rolebinding", boundRole: "capi-kubeadm-control-plane-aggregated-manager-role"},
		{name: "baremetal", configDir: "../../providers/baremetal/config", user: "system:serviceaccount:upgradelab-baremetal-system:upgradelab-baremetal-manager",
			binding: "upgradelab-baremetal-manager-rolebinding", boundRole: "upgradelab-baremetal-manager-role",
			labelled: map[string]string{"upgradelab-baremetal-capi-access": "kubeadm.controlplane.cluster.x-k8s.io/aggregate-to-manager"}},
		{name: "inplace", configDir: "../../providers/inplace/config", user: "system:serviceaccount:upgradelab-inplace-system:upgradelab-inplace-manager",
			binding: "upgradelab-inplace-manager-rolebinding", boundRole: "upgradelab-inplace-manager-role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := loadIdentity(managerSpec{name: tc.name, configDir: tc.configDir})
			if err != nil {
				t.Fatal(err)
			}
			if id.user() != tc.user {
				t.Errorf("user %s, want %s", id.user(), tc.user)
			}
			byName := map[string]client.Object{}
			for _, o := range id.objects {
				byName[o.GetName()] = o
			}
			crb, ok := byName[tc.binding].(*rbacv1.ClusterRoleBinding)
			if !ok {
				t.Fatalf("no ClusterRoleBinding %s among %v", tc.binding, names(id.objects))
			}
			if crb.RoleRef.Name != tc.boundRole || len(crb.Subjects) != 1 || "system:serviceaccount:"+crb.Subjects[0].Namespace+":"+crb.Subjects[0].Name != tc.user {
				t.Errorf("binding %s: role %s, subjects %+v; want %s bound to %s", tc.binding, crb.RoleRef.Name, crb.Subjects, tc.boundRole, tc.user)
			}
			if _, ok := byName[tc.boundRole].(*rbacv1.ClusterRole); !ok {
				t.Errorf("the bound role %s is not installed (have %v)", tc.boundRole, names(id.objects))
			}
			for role, label := range tc.labelled {
				if cr, ok := byName[role].(*rbacv1.ClusterRole); !ok || cr.Labels[label] != "true" {
					t.Errorf("ClusterRole %s without label %s: %+v", role, label, byName[role])
				}
			}
		})
	}
}

// A manager whose config has no rbac folder has no permission at all:
// an error naming the folder, before anything starts.
func TestAManagerWithoutRBACIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "crd"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := loadIdentity(managerSpec{name: "capx", configDir: dir})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "rbac")) || !strings.Contains(err.Error(), "manager capx") {
		t.Fatalf("err = %v; want one naming manager capx and %s", err, filepath.Join(dir, "rbac"))
	}
	if err := os.MkdirAll(filepath.Join(dir, "rbac"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = loadIdentity(managerSpec{name: "capx", configDir: dir})
	if err == nil || !strings.Contains(err.Error(), "declares no ServiceAccount") {
		t.Fatalf("err = %v; want no ServiceAccount", err)
	}
}

func TestForbiddenLinesAreTheAPIServersRefusals(t *testing.T) {
	log := `I1201 ok reconciled
{"level":"error","msg":"Failed to watch","error":"failed to list *v1.Secret: secrets is forbidden: User \"system:serviceaccount:x-system:x-manager\" cannot list resource \"secrets\" in API group \"\" at the cluster scope","stacktrace":"k8s.io/..."}
E1201 controller.go:1] "Reconciler error" err="baremetalhosts.metal3.io \"node-0\" is forbidden: User \"system:serviceaccount:x-system:x-manager\" cannot patch resource \"baremetalhosts\" in API group \"metal3.io\" in the namespace \"ns-1\""
E1201 some other error: forbidden by policy`
	want := []string{
		`secrets is forbidden: User "system:serviceaccount:x-system:x-manager" cannot list resource "secrets" in API group "" at the cluster scope`,
		`baremetalhosts.metal3.io "node-0" is forbidden: User "system:serviceaccount:x-system:x-manager" cannot patch resource "baremetalhosts" in API group "metal3.io" in the namespace "ns-1"`,
	}
	if got := forbiddenLines(log); !slices.Equal(got, want) {
		t.Fatalf("forbiddenLines =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRefusalsArePickedApart(t *testing.T) {
	for line, want := range map[string]authorizationv1.ResourceAttributes{
		`secrets is forbidden: User "system:serviceaccount:x:y" cannot list resource "secrets" in API group "" at the cluster scope`:                                               {Verb: "list", Resource: "secrets"},
		`baremetalhosts.metal3.io "node-0" is forbidden: User "system:serviceaccount:x:y" cannot patch resource "baremetalhosts" in API group "metal3.io" in the namespace "ns-1"`: {Name: "node-0", Verb: "patch", Resource: "baremetalhosts", Group: "metal3.io", Namespace: "ns-1"},
		`pods "web-1" is forbidden: User "system:serviceaccount:x:y" cannot create resource "pods/eviction" in API group "" in the namespace "default"`:                            {Name: "web-1", Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "default"},
	} {
		got, ok := parseRefusal(line)
		if !ok || got != want {
			t.Errorf("parseRefusal(%s) = %+v, %v; want %+v", line, got, ok, want)
		}
	}
	if _, ok := parseRefusal("forbidden by policy"); ok {
		t.Error("a line that is no refusal was parsed")
	}
}

func names(objs []client.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

// A log read again yields what was appended since, a line half written
// at one read is whole at the next, and a file replaced under the same
// name is read from its start.
func TestRefusalLogsReadWhatWasAppended(t *testing.T) {
	path := filepath.Join(t.TempDir(), "capi.log")
	refusal := func(name string) string {
		return `secrets "` + name + `" is forbidden: User "system:serviceaccount:x:y" cannot get resource "secrets" in API group "" in the namespace "ns"`
	}
	appendLog := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	var logs refusalLogs
	read := func(want ...string) {
		t.Helper()
		got, err := logs.read(path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("read =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	appendLog("I1201 ok\nE1201 err=" + refusal("a") + "\n")
	read(refusal("a"))
	half := "E1201 err=" + refusal("b")
	appendLog(half[:30])
	read(refusal("a"))
	appendLog(half[30:] + "\nI1201 ok\n")
	read(refusal("a"), refusal("b"))
	read(refusal("a"), refusal("b"))
	if err := os.WriteFile(path, []byte("E1201 err="+refusal("c")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read(refusal("c"))
}

// A run on a plane kept from an earlier run is judged on the refusals
// after its start: the earlier run's stay the earlier run's.
func TestRefusalsSinceAMarkAreTheLaterOnes(t *testing.T) {
	dir := t.TempDir()
	p := &Plane{LogDir: dir, managers: []managerSpec{{name: "capi"}}}
	refusal := func(name string) string {
		return `secrets "` + name + `" is forbidden: User "system:serviceaccount:x:y" cannot get resource "secrets" in API group "" in the namespace "ns"`
	}
	appendLog := func(s string) {
		f, err := os.OpenFile(filepath.Join(dir, "capi.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendLog("E1201 err=" + refusal("earlier-run") + "\n")
	mark := p.RefusalsSoFar()
	appendLog("E1201 err=" + refusal("this-run") + "\n")
	if denied, _ := p.ForbiddenSince(context.Background(), mark); !slices.Equal(denied["capi"], []string{refusal("this-run")}) {
		t.Errorf("refused since the mark: %q; want this run's only", denied["capi"])
	}
	if denied, _ := p.Forbidden(context.Background()); len(denied["capi"]) != 2 {
		t.Errorf("refused so far: %q; want both", denied["capi"])
	}
}
