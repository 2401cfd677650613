package workload

import (
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/cluster-api/util/certs"
)

// certificates are what one cluster serves with and what its admin client
// presents, signed by the CAs CAPI generated for it (CABPK hands them to
// the hosts, which give them to the workload when they join).
type certificates struct {
	clusterCA CA
	apiServer *tls.Certificate
	// etcd has a serving certificate per member pod (etcd-<node>): KCP's
	// etcd client names the member it port-forwards to as the TLS server
	// name.
	etcd      map[string]*tls.Certificate
	adminCert *x509.Certificate
	adminKey  *rsa.PrivateKey
}

// servingKey is one private key for every certificate of a run: RSA key
// generation is slow, and the in-memory provider's mux makes the same
// trade (one key per process). Each certificate is still its own,
// signed by its cluster's CA for its names.
type servingKey struct {
	once sync.Once
	key  *rsa.PrivateKey
	err  error
}

func (k *servingKey) get() (*rsa.PrivateKey, error) {
	k.once.Do(func() { k.key, k.err = certs.NewPrivateKey() })
	return k.key, k.err
}

func (c *Clusters) signed(ca CA, cfg *certs.Config) (*tls.Certificate, *x509.Certificate, error) {
	key, err := c.key.get()
	if err != nil {
		return nil, nil, err
	}
	cert, err := cfg.NewSignedCert(key, ca.Cert, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	pair, err := tls.X509KeyPair(certs.EncodeCertPEM(cert), certs.EncodePrivateKeyPEM(key))
	if err != nil {
		return nil, nil, err
	}
	return &pair, cert, nil
}

var loopbackIPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}

// setClusterCA makes the API server's serving and the admin certificates
// once (every host of a cluster brings the same CA).
func (c *Clusters) setClusterCA(w *cluster, ca CA) error {
	if w.certs.apiServer != nil {
		return nil
	}
	serving, _, err := c.signed(ca, &certs.Config{CommonName: "kube-apiserver",
		AltNames: certs.AltNames{DNSNames: []string{"localhost"}, IPs: loopbackIPs},
		Usages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("workload cluster %s: API server certificate: %w", w.name, err)
	}
	_, admin, err := c.signed(ca, &certs.Config{CommonName: "kubernetes-admin", Organization: []string{"system:masters"},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return fmt.Errorf("workload cluster %s: admin certificate: %w", w.name, err)
	}
	key, _ := c.key.get()
	w.certs.clusterCA, w.certs.apiServer, w.certs.adminCert, w.certs.adminKey = ca, serving, admin, key
	return nil
}

// addEtcdServing makes the serving certificate of member pod.
func (c *Clusters) addEtcdServing(w *cluster, pod string, ca CA) error {
	if _, ok := w.certs.etcd[pod]; ok {
		return nil
	}
	serving, _, err := c.signed(ca, &certs.Config{CommonName: pod,
		AltNames: certs.AltNames{DNSNames: []string{"localhost", pod}, IPs: loopbackIPs},
		Usages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return fmt.Errorf("workload cluster %s: etcd certificate of %s: %w", w.name, pod, err)
	}
	w.certs.etcd[pod] = serving
	return nil
}

// getCertificate picks the certificate of the cluster whose VIP the
// connection reached: an etcd member's when the client names a member
// (port-forward), which fails while that member is not running, as a
// port-forward to a pod on a stopped host does; the API server's
// otherwise.
func (c *Clusters) getCertificate(info *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.byLocalAddr(info.Conn.LocalAddr())
	if w == nil {
		return nil, errors.New("no workload cluster behind this address")
	}
	if cert, ok := w.certs.etcd[info.ServerName]; ok {
		node := strings.TrimPrefix(info.ServerName, "etcd-")
		if st := w.members[node]; st != MemberRunning {
			return nil, fmt.Errorf("etcd member %s is %s", info.ServerName, st)
		}
		return cert, nil
	}
	if w.certs.apiServer == nil {
		return nil, errors.New("no API server certificate yet")
	}
	return w.certs.apiServer, nil
}

// byLocalAddr is the cluster whose VIP is addr; c.mu held.
func (c *Clusters) byLocalAddr(addr net.Addr) *cluster {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	return c.byPort[int32(tcp.Port)]
}

// resolve maps a request's host (the VIP it reached) to the cluster's
// resource group, for CAPI's in-memory handlers; it runs on every
// request.
func (c *Clusters) resolve(hostPort string) (string, error) {
	_, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("no workload cluster at %s", hostPort)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.byPort[int32(n)]; ok {
		return w.name, nil
	}
	return "", fmt.Errorf("no workload cluster at %s", hostPort)
}

// newServer is the one HTTPS server behind every VIP: etcd's gRPC (HTTP/2
// with a gRPC content type) goes to CAPI's etcd emulation, the rest to
// the API: upgradelab's subresources first, then CAPI's handler.
func (c *Clusters) newServer(api, etcd http.Handler) *http.Server {
	sub := &subresources{clusters: c, next: api}
	return &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				etcd.ServeHTTP(w, r)
				return
			}
			sub.ServeHTTP(w, r)
		}),
		TLSConfig: &tls.Config{GetCertificate: c.getCertificate, MinVersion: tls.VersionTLS12},
		// Handshakes refused for a stopped etcd member and connections
		// dropped with the VIP are the model working, not errors.
		ErrorLog: stdlog.New(io.Discard, "", 0),
	}
}
