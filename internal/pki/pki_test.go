package pki

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
)

func TestServingCertificateVerifiesOnlyAgainstItsCA(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Serving("bmc", []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pair.TLS(); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pair.CertPEM)
	cert, _ := x509.ParseCertificate(block.Bytes)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "127.0.0.1"}); err != nil {
		t.Fatalf("does not verify against its CA: %v", err)
	}
	other, _ := NewCA("other")
	if _, err := cert.Verify(x509.VerifyOptions{Roots: other.Pool(), DNSName: "127.0.0.1"}); err == nil {
		t.Fatal("verifies against another CA")
	}
	client, _ := ca.Client("agent")
	cb, _ := pem.Decode(client.CertPEM)
	cc, _ := x509.ParseCertificate(cb.Bytes)
	if _, err := cc.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate: %v", err)
	}
}
