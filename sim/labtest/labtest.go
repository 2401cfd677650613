package labtest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
	"github.com/upgradelab/upgradelab/sim/workload"
)

// DeployImage is the deploy ramdisk of the shipped catalog.
const DeployImage = "deploy-ramdisk-2026.10"

// Expect reads events until one with reason arrives (for host, when host
// is not empty), failing after timeout with what it saw. Failures the
// agent reports fail at once.
func Expect(t testing.TB, events <-chan lab.Event, host, reason string, timeout time.Duration) lab.Event {
	t.Helper()
	deadline := time.After(timeout)
	var seen []string
	for {
		select {
		case e := <-events:
			if (host == "" || e.Host == host) && e.Reason == reason {
				return e
			}
			seen = append(seen, e.Host+"/"+e.Reason)
			if e.Reason == "BootstrapFailed" || e.Reason == "KubeadmFailed" {
				t.Fatalf("%s: %s: %s", e.Host, e.Reason, e.Message)
			}
		case <-deadline:
			t.Fatalf("no %s event for %q within %s; saw %v", reason, host, timeout, seen)
		}
	}
}

// Provision boots h once from the deploy media, stages imageName and
// writes userData (if any) onto the config drive, activates the image
// with 3 tries and resets the host so it boots from disk. It returns once
// the reset was issued.
func Provision(t testing.TB, l *lab.Lab, h *lab.Host, events <-chan lab.Event, imageName string, userData []byte) {
	t.Helper()
	b, err := l.Definition().Catalog.Get(imageName)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.InsertMedia(l.ImageServer().ImageURL(DeployImage)); err != nil {
		t.Fatal(err)
	}
	if err := h.SetBootOverride(lab.BootOverride{Target: lab.BootCd, Mode: lab.OverrideOnce}); err != nil {
		t.Fatal(err)
	}
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
	if e := Expect(t, events, h.Name(), "OSRunning", 30*time.Second); e.Data["source"] != string(lab.FromVirtualMedia) {
		t.Fatalf("boot override Once Cd booted %v", e.Data)
	}
	root, err := h.WriteImage(context.Background(), l.ImageServer().ImageURL(b.Name), b.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if userData != nil {
		if err := h.WriteConfigDrive(userData, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Activate(root, 3); err != nil {
		t.Fatal(err)
	}
	if err := h.EjectMedia(); err != nil {
		t.Fatal(err)
	}
	if err := h.Reset(); err != nil {
		t.Fatal(err)
	}
}

// Up brings up a shipped lab (fixtures/labs/NAME.yaml, found from the
// test's package folder two levels below the repository root) in a
// temporary state folder, and takes it down when the test ends.
func Up(t testing.TB, name string, scale timescale.Scale) *lab.Lab {
	t.Helper()
	return UpOS(t, name, "", scale)
}

// UpOS is Up with every host's OS kind set by hostOS (lab.WithHostOS;
// "" keeps the lab file's).
func UpOS(t testing.TB, name, hostOS string, scale timescale.Scale) *lab.Lab {
	t.Helper()
	def, err := lab.Load(filepath.Join("..", "..", "fixtures", "labs", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if hostOS != "" {
		if def, err = def.WithHostOS(hostOS); err != nil {
			t.Fatal(err)
		}
	}
	l, err := lab.Up(context.Background(), def, lab.Options{StateDir: t.TempDir(), Scale: scale})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Down() })
	return l
}

// Workload starts workload clusters and creates one named cluster, stopped
// when the test ends.
func Workload(t testing.TB, cluster string) (*workload.Clusters, workload.Endpoint) {
	t.Helper()
	clusters, err := workload.Start(context.Background(), workload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clusters.Stop(context.Background()) })
	ep, err := clusters.Create(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	return clusters, ep
}

// ClusterCAs are a new cluster's CA and etcd CA made the way CAPI makes
// them for a control plane (the secrets' data, read back as CABPK's
// bootstrap data hands them to a host).
func ClusterCAs(t testing.TB) (clusterCA, etcdCA workload.CA) {
	t.Helper()
	certs := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certs.Generate(); err != nil {
		t.Fatal(err)
	}
	ca := func(p secret.Purpose) workload.CA {
		kp := certs.GetByPurpose(p).KeyPair
		c, err := workload.CAFromSecretData(map[string][]byte{secret.TLSCrtDataName: kp.Cert, secret.TLSKeyDataName: kp.Key})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return ca(secret.ClusterCA), ca(secret.EtcdCA)
}
