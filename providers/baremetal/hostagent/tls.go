package hostagent

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// SiteTLS loads what a party that calls BMCs and host agents needs: the
// site's CA (caFile, trusted for their certificates) and its own pair
// (certDir/tls.crt, tls.key), shown as a client certificate. The errors
// name the flag a manager reads each from.
func SiteTLS(caFile, certDir string) (*tls.Config, tls.Certificate, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, tls.Certificate{}, fmt.Errorf("--ca-file %s: no PEM certificate", caFile)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("--cert-dir: %w", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, pair, nil
}

// HTTPClient is a client with cfg whose requests may last timeout (an
// image write through an agent takes the image's modelled write time).
func HTTPClient(cfg *tls.Config, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: cfg}}
}
