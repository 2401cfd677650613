package mgmt

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestPodArgsUseThePodsCredentialsAndCertificates(t *testing.T) {
	m := managerSpec{name: "capi", kubeconfig: "/x/kubeconfig-capi", gates: []string{"A=true"}, extraArgs: []string{"--poll=1s"}}
	got := m.podArgs(managerPorts{webhook: 11001, health: 11002, diagnostics: 11003})
	want := []string{"--feature-gates=A=true", "--webhook-port=11001", "--webhook-cert-dir=" + podCertDir,
		"--health-addr=:11002", "--diagnostics-address=127.0.0.1:11003", "--poll=1s"}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("args %v lack %s", got, w)
		}
	}
	for _, a := range got {
		if strings.HasPrefix(a, "--kubeconfig") {
			t.Errorf("a Pod's manager is given %s; it must use its ServiceAccount", a)
		}
	}
}

// A flag naming a file or folder of this machine gets it mounted at the
// same path; other values are left alone.
func TestPodObjectsMountTheFilesFlagsName(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	certs := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string]string{ca: "CA", filepath.Join(certs, "tls.crt"): "CRT", filepath.Join(certs, "tls.key"): "KEY"} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := managerSpec{name: "baremetal", extraArgs: []string{"--ca-file=" + ca, "--cert-dir=" + certs, "--state=/does/not/exist", "--poll=1s"}}
	objs, err := podObjects(m, "baremetal-system", "baremetal-controller-manager", "img:1", managerPorts{webhook: 1, health: 2, diagnostics: 3}, map[string][]byte{"tls.crt": []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	var files *corev1.Secret
	var deploy *appsv1.Deployment
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Secret:
			if o.Name == "baremetal-files" {
				files = o
			}
		case *appsv1.Deployment:
			deploy = o
		}
	}
	if files == nil || deploy == nil {
		t.Fatalf("objects %v", objs)
	}
	mounted := map[string]string{}
	c := deploy.Spec.Template.Spec.Containers[0]
	for _, vm := range c.VolumeMounts {
		if vm.Name == "files" {
			mounted[vm.MountPath] = string(files.Data[vm.SubPath])
		}
	}
	want := map[string]string{ca: "CA", filepath.Join(certs, "tls.crt"): "CRT", filepath.Join(certs, "tls.key"): "KEY"}
	for path, data := range want {
		if mounted[path] != data {
			t.Errorf("%s mounted with %q, want %q (mounts %v)", path, mounted[path], data, mounted)
		}
	}
	if len(mounted) != len(want) {
		t.Errorf("mounted %v, want only %v", mounted, want)
	}
	spec := deploy.Spec.Template.Spec
	if spec.ServiceAccountName != "baremetal-controller-manager" || !spec.HostNetwork || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("pod spec: sa %q hostNetwork %v pull %s", spec.ServiceAccountName, spec.HostNetwork, c.ImagePullPolicy)
	}
	if deploy.Namespace != "baremetal-system" {
		t.Errorf("namespace %s", deploy.Namespace)
	}
}
