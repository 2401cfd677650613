package mgmt

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A manager that reads its webhook certificate from under TMPDIR runs
// with a TMPDIR whose k8s-webhook-server/serving-certs is the plane's
// certificate folder, again after a restart; any other keeps its own
// environment.
func TestAManagerWithCertsUnderTMPDIRFindsThePlanesCertificates(t *testing.T) {
	dir, certs := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(certs, "tls.crt"), []byte("cert"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := managerSpec{name: "bmo", env: []string{"A=1"}, certsUnderTMPDIR: true}
	for range 2 { // start, then a restart over the same folder
		env, err := m.localEnv(certs, dir)
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "bmo-tmp")
		if !slices.Equal(env, []string{"A=1", "TMPDIR=" + tmp}) {
			t.Fatalf("env %v", env)
		}
		if b, err := os.ReadFile(filepath.Join(tmp, "k8s-webhook-server", "serving-certs", "tls.crt")); err != nil || string(b) != "cert" {
			t.Fatalf("the certificate under TMPDIR: %q, %v", b, err)
		}
	}
	if len(m.env) != 1 {
		t.Errorf("localEnv changed the manager's own environment: %v", m.env)
	}
	plain := managerSpec{name: "capi", env: []string{"B=2"}}
	if env, err := plain.localEnv(certs, dir); err != nil || !slices.Equal(env, []string{"B=2"}) {
		t.Errorf("a manager with a cert flag: %v, %v", env, err)
	}
}
