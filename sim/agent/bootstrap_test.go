package agent

import (
	"maps"
	"strings"
	"testing"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	"sigs.k8s.io/cluster-api/util/secret"

	imagev1 "github.com/upgradelab/upgradelab/api/image/v1"
	"github.com/upgradelab/upgradelab/sim/workload"
)

const clusterConfiguration = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: wl
controlPlaneEndpoint: 127.0.0.1:31000
kubernetesVersion: v1.35.3
`

const initConfiguration = `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: '{{ ds.meta_data.local_hostname }}'
  kubeletExtraArgs:
  - name: provider-id
    value: upgradelab://lab/cp-0
  - name: node-labels
    value: pool=a,rack=r1
`

const joinConfiguration = `apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: 127.0.0.1:31000
    token: abcdef.0123456789abcdef
nodeRegistration:
  kubeletExtraArgs:
  - name: provider-id
    value: upgradelab://lab/worker-0
`

// cabpkInit is user data produced by CABPK's own cloud-init writer.
func cabpkInit(t *testing.T) []byte {
	t.Helper()
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.Generate(); err != nil {
		t.Fatal(err)
	}
	data, err := cloudinit.NewInitControlPlane(&cloudinit.ControlPlaneInput{
		Certificates: certs, ClusterConfiguration: clusterConfiguration, InitConfiguration: initConfiguration,
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseCABPKInit(t *testing.T) {
	b, err := ParseBootstrap(cabpkInit(t), map[string]string{"local-hostname": "cp-0"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Action != Init || b.NodeName != "cp-0" || b.ProviderID != "upgradelab://lab/cp-0" || b.Endpoint != "127.0.0.1:31000" {
		t.Fatalf("bootstrap %+v", b)
	}
	if b.Labels["pool"] != "a" || b.Labels["rack"] != "r1" {
		t.Fatalf("labels %v", b.Labels)
	}
	if b.ClusterCA == nil || b.EtcdCA == nil || b.ClusterCA.Cert.Subject.CommonName == b.EtcdCA.Cert.Subject.CommonName && b.ClusterCA.Cert.Equal(b.EtcdCA.Cert) {
		t.Fatalf("CAs: cluster %v etcd %v", b.ClusterCA, b.EtcdCA)
	}
	if !strings.Contains(b.ClusterConfiguration, "kind: ClusterConfiguration") {
		t.Fatalf("ClusterConfiguration %q", b.ClusterConfiguration)
	}
}

func TestParseCABPKWorkerJoin(t *testing.T) {
	data, err := cloudinit.NewNode(&cloudinit.NodeInput{JoinConfiguration: joinConfiguration})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseBootstrap(data, map[string]string{"local-hostname": "worker-0"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Action != JoinWorker || b.NodeName != "worker-0" || b.Endpoint != "127.0.0.1:31000" || b.ClusterCA != nil {
		t.Fatalf("bootstrap %+v", b)
	}
}

// A Metal3 user's join configuration names the node and labels it from
// the config drive's meta data, through cloud-init's jinja; a variable
// the meta data lacks renders as cloud-init renders it.
func TestParseBootstrapRendersMetaData(t *testing.T) {
	join := `apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery: {bootstrapToken: {apiServerEndpoint: 127.0.0.1:31000, token: abcdef.0123456789abcdef}}
nodeRegistration:
  name: '{{ ds.meta_data.name }}'
  kubeletExtraArgs:
  - {name: provider-id, value: 'metal3://{{ ds.meta_data.providerid }}'}
  - {name: node-labels, value: 'metal3.io/uuid={{ ds.meta_data.uuid }},host={{ v1.local_hostname }},rack={{ds.meta_data.rack}}'}
`
	data, err := cloudinit.NewNode(&cloudinit.NodeInput{JoinConfiguration: join})
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{"local-hostname": "bmh-0", "name": "md-x7k2p", "uuid": "5d3c0a4e", "providerid": "ns/bmh-0/md-x7k2p"}
	b, err := ParseBootstrap(data, meta)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"metal3.io/uuid": "5d3c0a4e", "host": "bmh-0", "rack": "CI_MISSING_JINJA_VAR/ds.meta_data.rack"}
	if b.NodeName != "md-x7k2p" || b.ProviderID != "metal3://ns/bmh-0/md-x7k2p" || !maps.Equal(b.Labels, want) {
		t.Fatalf("node %q, provider ID %q, labels %v; want md-x7k2p, metal3://ns/bmh-0/md-x7k2p, %v", b.NodeName, b.ProviderID, b.Labels, want)
	}
	if _, err := ParseBootstrap(data, map[string]string{}); err != nil {
		t.Fatalf("without meta data the node is still named by the template: %v", err)
	}
	plain, _ := cloudinit.NewNode(&cloudinit.NodeInput{JoinConfiguration: joinConfiguration})
	if _, err := ParseBootstrap(plain, nil); err == nil || !strings.Contains(err.Error(), "no node name") {
		t.Fatalf("a join naming no node without local-hostname: %v", err)
	}
}

func TestParseBootstrapErrors(t *testing.T) {
	for data, want := range map[string]string{
		"#!/bin/sh\necho hi\n":                 "not a cloud-config",
		"#cloud-config\nruncmd: ['echo hi']\n": "neither kubeadm init nor kubeadm join",
		"#cloud-config\nruncmd: ['kubeadm init --config /run/kubeadm/kubeadm.yaml']\n": "/run/kubeadm/kubeadm.yaml is not in write_files",
	} {
		if _, err := ParseBootstrap([]byte(data), map[string]string{"local-hostname": "h"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseBootstrap(%q) = %v, want %q", data, err, want)
		}
	}
}

func FuzzParseBootstrap(f *testing.F) {
	f.Add([]byte("#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n    kind: JoinConfiguration\n    discovery: {bootstrapToken: {apiServerEndpoint: a:1}}\nruncmd: ['kubeadm join']\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBootstrap(data, map[string]string{"local-hostname": "h"})
		if err == nil && (b.Endpoint == "" || b.NodeName == "") {
			t.Fatalf("accepted bootstrap without endpoint or node name: %+v", b)
		}
	})
}

// kubeadm writes the control plane at the ClusterConfiguration's
// version and etcd at the booted kubeadm's pick, never below the member's.
func TestKubeadmWritesTheConfigsVersionAndNeverDowngradesEtcd(t *testing.T) {
	v135 := imagev1.Manifest{KubernetesVersion: "v1.35.3", Etcd: "3.6.4-0"}
	v136 := imagev1.Manifest{KubernetesVersion: "v1.36.3", Etcd: "3.6.5-0"}
	for _, tc := range []struct {
		name    string
		img     imagev1.Manifest
		cc      string
		before  workload.Release
		version string
		etcd    string
	}{
		{"the config's version on the image's own minor", v136, "kubernetesVersion: v1.36.3", workload.Release{}, "v1.36.3", "3.6.5-0"},
		{"no version: the image's", v136, "clusterName: wl", workload.Release{}, "v1.36.3", "3.6.5-0"},
		{"no valid version: the image's", v136, "kubernetesVersion: stable-1", workload.Release{}, "v1.36.3", "3.6.5-0"},
		{"an older config on a newer image: etcd kept", v136, "kubernetesVersion: v1.35.3", workload.Release{Etcd: "3.6.4-0"}, "v1.35.3", "3.6.4-0"},
		{"a newer config on a fallen-back image: etcd kept", v135, "kubernetesVersion: v1.36.3", workload.Release{Etcd: "3.6.5-0"}, "v1.36.3", "3.6.5-0"},
		{"reverted on the old image: etcd not downgraded", v135, "kubernetesVersion: v1.35.3", workload.Release{Etcd: "3.6.5-0"}, "v1.35.3", "3.6.5-0"},
		{"upgraded on the new image: etcd up", v136, "kubernetesVersion: v1.36.3", workload.Release{Etcd: "3.6.4-0"}, "v1.36.3", "3.6.5-0"},
	} {
		run := kubeadmRan(tc.img, "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"+tc.cc+"\n", tc.before)
		if st := run.status(); run.pods.Kubernetes != tc.version || st.KubernetesVersion != tc.version || run.pods.Etcd != tc.etcd || run.kubelet != tc.img.KubernetesVersion {
			t.Errorf("%s: control plane %s (reported %s), etcd %s, kubelet %s; want %s, etcd %s, kubelet %s", tc.name,
				run.pods.Kubernetes, st.KubernetesVersion, run.pods.Etcd, run.kubelet, tc.version, tc.etcd, tc.img.KubernetesVersion)
		}
	}
}
