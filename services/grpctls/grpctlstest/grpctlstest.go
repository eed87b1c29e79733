// Package grpctlstest makes throwaway CAs and certificates for tests of the
// services' mutual TLS.
package grpctlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codeexec/codeexec/services/grpctls"
)

// CA is a certificate authority whose certificate is written to CAFile.
type CA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	dir    string
	CAFile string
}

// NewCA makes a CA named name, with its files in a temp dir of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, der := certificate(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}, nil)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: t.TempDir()}
	ca.CAFile = filepath.Join(ca.dir, name+"-ca.pem")
	writePEM(t, ca.CAFile, "CERTIFICATE", der)
	return ca
}

// Issue makes a certificate for name, good for serving localhost and
// 127.0.0.1 and for client authentication, and returns the Config of a
// process that holds it and trusts this CA.
func (ca *CA) Issue(t testing.TB, name string) grpctls.Config {
	t.Helper()
	key, der := certificate(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}, ca)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := grpctls.Config{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem"), CAFile: ca.CAFile}
	writePEM(t, c.CertFile, "CERTIFICATE", der)
	writePEM(t, c.KeyFile, "EC PRIVATE KEY", keyDER)
	return c
}

// certificate makes a new key and a certificate for it from tmpl, valid
// from an hour ago for a day, signed by ca (self-signed when ca is nil).
func certificate(t testing.TB, tmpl *x509.Certificate, ca *CA) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	parent, parentKey := tmpl, key
	if ca != nil {
		parent, parentKey = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

// Args are the command-line flags that give a codeexec process c.
func Args(c grpctls.Config) []string {
	return []string{"--grpc-tls-cert", c.CertFile, "--grpc-tls-key", c.KeyFile, "--grpc-tls-ca", c.CAFile}
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
