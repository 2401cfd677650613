package mgmt

import (
	"os"
	"regexp"
	"testing"
)

// The Makefile builds the binaries the plane looks for; a version bumped in
// one place only would make the plane look in a folder nothing fills.
func TestMakefileBuildsTheVersionsThePlaneUses(t *testing.T) {
	data, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"KUBE_VERSION": KubeVersion, "ETCD_VERSION": EtcdVersion} {
		m := regexp.MustCompile(`(?m)^` + name + ` \?= (\S+)$`).FindSubmatch(data)
		if m == nil {
			t.Errorf("Makefile has no %q line", name+" ?= ...")
			continue
		}
		if string(m[1]) != want {
			t.Errorf("Makefile %s = %s, the plane expects %s (e2e/mgmt/assets.go)", name, m[1], want)
		}
	}
}

func TestCAPIVersionComesFromTheBuild(t *testing.T) {
	v, err := capiVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^v1\.\d+\.\d+$`).MatchString(v) {
		t.Fatalf("capiVersion() = %q, want a release version such as v1.14.2", v)
	}
}

func TestCRDsAndWebhooksFromTheCAPIModule(t *testing.T) {
	a, err := ResolveAssets(Assets{KubeDir: t.TempDir(), ManagersDir: t.TempDir()})
	if a.CAPIDir == "" {
		t.Fatalf("no CAPI module folder: %v", err)
	}
	ep := webhookEndpoint{host: "127.0.0.1", port: 9443, caBundle: []byte("ca")}
	crds, err := loadCRDs(capiManagers(a, nil)[1], ep) // kcp
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 2 {
		t.Fatalf("KCP CRDs: got %d, want KubeadmControlPlane and KubeadmControlPlaneTemplate", len(crds))
	}
	for _, crd := range crds {
		if crd.Labels["cluster.x-k8s.io/v1beta2"] != "v1beta2" {
			t.Errorf("%s: contract label cluster.x-k8s.io/v1beta2 missing, labels %v", crd.Name, crd.Labels)
		}
		conv := crd.Spec.Conversion
		if conv == nil || conv.Webhook == nil || *conv.Webhook.ClientConfig.URL != "https://127.0.0.1:9443/convert" {
			t.Errorf("%s: conversion not pointed at the KCP manager: %+v", crd.Name, conv)
		}
	}
	hooks, err := loadWebhookConfigs(capiManagers(a, nil)[1], ep)
	if err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 2 {
		t.Fatalf("KCP webhook configurations: got %d, want mutating and validating", len(hooks))
	}
	for _, h := range hooks {
		if !regexp.MustCompile(`^kcp-`).MatchString(h.GetName()) {
			t.Errorf("webhook configuration %q is not prefixed with the manager's name", h.GetName())
		}
	}
}

// capiVersion may read the api module's version; CAPI releases both
// together, so go.mod must pin them to the same version.
func TestGoModPinsCAPIAndItsAPIModuleTogether(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	core := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/cluster-api (v\S+)`).FindSubmatch(data)
	api := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/cluster-api/api (v\S+)`).FindSubmatch(data)
	if core == nil || api == nil {
		t.Fatalf("go.mod must require sigs.k8s.io/cluster-api and sigs.k8s.io/cluster-api/api")
	}
	if string(core[1]) != string(api[1]) {
		t.Fatalf("go.mod: sigs.k8s.io/cluster-api %s but sigs.k8s.io/cluster-api/api %s", core[1], api[1])
	}
}
