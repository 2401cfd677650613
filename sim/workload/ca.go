package workload

import (
	"crypto/rsa"
	"fmt"

	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
)

// CAFromSecretData reads a CA from the data of a secret CAPI generated
// (tls.crt and tls.key), so the workload cluster serves with the very
// certificates CAPI's kubeconfig secret and KCP's etcd client trust.
func CAFromSecretData(data map[string][]byte) (CA, error) {
	cert, err := certs.DecodeCertPEM(data[secret.TLSCrtDataName])
	if err != nil || cert == nil {
		return CA{}, fmt.Errorf("CA secret: %s: %w", secret.TLSCrtDataName, err)
	}
	key, err := certs.DecodePrivateKeyPEM(data[secret.TLSKeyDataName])
	if err != nil {
		return CA{}, fmt.Errorf("CA secret: %s: %w", secret.TLSKeyDataName, err)
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return CA{}, fmt.Errorf("CA secret: %s: not an RSA key (CAPI generates RSA)", secret.TLSKeyDataName)
	}
	return CA{Cert: cert, Key: rsaKey}, nil
}
