package mgmt

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/upgradelab/upgradelab/internal/pki"
)

// webhookCerts is a CA made for one plane and a serving certificate it
// signed, written where the managers' --webhook-cert-dir points. The API
// server trusts the CA through the caBundle of every webhook and CRD
// conversion the plane installs.
type webhookCerts struct {
	dir   string
	caPEM []byte
}

func newWebhookCerts(dir string, hosts []string) (*webhookCerts, error) {
	ca, err := pki.NewCA("upgradelab management plane webhook CA")
	if err != nil {
		return nil, err
	}
	pair, err := ca.Serving("upgradelab webhooks", hosts)
	if err != nil {
		return nil, err
	}
	if err := pair.Write(dir); err != nil {
		return nil, fmt.Errorf("webhook certificates: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.PEM, 0o600); err != nil {
		return nil, err
	}
	return &webhookCerts{dir: dir, caPEM: ca.PEM}, nil
}
