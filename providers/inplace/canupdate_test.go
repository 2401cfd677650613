package inplace

import (
	"context"
	"errors"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/upgradelab/upgradelab/providers/baremetal/api/v1alpha1"
	"github.com/upgradelab/upgradelab/sim/image"
)

// What the extension takes on, and what it leaves for a rollout.
func TestCoverMachine(t *testing.T) {
	old := infrav1.Image{URL: "http://images/k8s-v1.35.3", Checksum: "aa"}
	next := infrav1.Image{URL: "http://images/k8s-v1.36.3", Checksum: "bb"}
	manifests := func(_ context.Context, url string) (image.Manifest, error) {
		switch url {
		case next.URL:
			return image.Manifest{KubernetesVersion: "v1.36.3"}, nil
		case old.URL:
			return image.Manifest{KubernetesVersion: "v1.35.3"}, nil
		}
		return image.Manifest{}, errors.New("404")
	}
	gates := map[string]bool{"ControlPlaneKubeletLocalMode": true}
	for _, tc := range []struct {
		name                     string
		fromVersion, toVersion   string
		fromImage, toImage       infrav1.Image
		toSelector               map[string]string
		toFirmware               *infrav1.FirmwarePackage
		wantVersion              string
		wantImage                infrav1.Image
		wantGates                map[string]bool
		wantSelectorStillDiffers bool
	}{
		{name: "version with an image that carries it", fromVersion: "v1.35.3", toVersion: "v1.36.3", fromImage: old, toImage: next,
			wantVersion: "v1.36.3", wantImage: next, wantGates: nil},
		{name: "version the image does not carry: rolled out", fromVersion: "v1.35.3", toVersion: "v1.36.3", fromImage: old, toImage: old,
			wantVersion: "v1.35.3", wantImage: old, wantGates: gates},
		{name: "a new image alone", fromVersion: "v1.35.3", toVersion: "v1.35.3", fromImage: old, toImage: infrav1.Image{URL: "http://images/k8s-v1.35.3-patched", Checksum: "cc"},
			wantVersion: "v1.35.3", wantImage: infrav1.Image{URL: "http://images/k8s-v1.35.3-patched", Checksum: "cc"}, wantGates: gates},
		{name: "NIC firmware alone", fromVersion: "v1.35.3", toVersion: "v1.35.3", fromImage: old, toImage: old, toFirmware: &infrav1.FirmwarePackage{URL: "http://firmware/x710-nvm-9.50"},
			wantVersion: "v1.35.3", wantImage: old, wantGates: gates},
		{name: "a new host selector: left different", fromVersion: "v1.35.3", toVersion: "v1.35.3", fromImage: old, toImage: old, toSelector: map[string]string{"rack": "b"},
			wantVersion: "v1.35.3", wantImage: old, wantGates: gates, wantSelectorStillDiffers: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur, des := &clusterv1.MachineSpec{Version: tc.fromVersion}, &clusterv1.MachineSpec{Version: tc.toVersion}
			curBMM := &infrav1.BareMetalMachineSpec{Image: tc.fromImage}
			desBMM := &infrav1.BareMetalMachineSpec{Image: tc.toImage, NICFirmware: tc.toFirmware, HostSelector: metav1.LabelSelector{MatchLabels: tc.toSelector}}
			curKC := &bootstrapv1.KubeadmConfigSpec{ClusterConfiguration: bootstrapv1.ClusterConfiguration{FeatureGates: gates}}
			desKC := &bootstrapv1.KubeadmConfigSpec{}
			if err := coverMachine(context.Background(), manifests, cur, des, curBMM, desBMM, curKC, desKC); err != nil {
				t.Fatal(err)
			}
			if cur.Version != tc.wantVersion || curBMM.Image != tc.wantImage || !reflect.DeepEqual(curKC.ClusterConfiguration.FeatureGates, tc.wantGates) {
				t.Fatalf("covered: version %s image %+v gates %v; want %s %+v %v", cur.Version, curBMM.Image, curKC.ClusterConfiguration.FeatureGates, tc.wantVersion, tc.wantImage, tc.wantGates)
			}
			if !reflect.DeepEqual(curBMM.NICFirmware, desBMM.NICFirmware) {
				t.Fatalf("NIC firmware %+v after covering; want %+v", curBMM.NICFirmware, desBMM.NICFirmware)
			}
			if differs := !reflect.DeepEqual(curBMM.HostSelector, desBMM.HostSelector); differs != tc.wantSelectorStillDiffers {
				t.Fatalf("host selector still differs = %v, want %v", differs, tc.wantSelectorStillDiffers)
			}
		})
	}
}

func TestPatchFromHoldsOnlyTheChange(t *testing.T) {
	a := &infrav1.BareMetalMachine{Spec: infrav1.BareMetalMachineSpec{Image: infrav1.Image{URL: "u1", Checksum: "c"}}}
	b := a.DeepCopy()
	b.Spec.Image.URL = "u2"
	p, err := patchFrom(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Patch) != `[{"op":"replace","path":"/spec/image/url","value":"u2"}]` {
		t.Fatalf("patch %s", p.Patch)
	}
}
