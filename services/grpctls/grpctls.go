// Package grpctls is the mutual TLS between the suite's services when they
// run as separate processes. Each process has one certificate, which it
// serves and also presents as a client, and one CA bundle that its peers'
// certificates must chain to: a gateway, sandboxd, discoveryd or memoryd
// then talks only to peers holding a certificate from that CA, and a
// stranger on the network can neither call a service nor pose as one.
package grpctls

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Config names the PEM files. All three or none must be set.
type Config struct {
	// CertFile and KeyFile are this process's certificate (with its chain)
	// and private key. A service's certificate must name the host that
	// clients dial (localhost for a unix socket) as a subject alt name.
	CertFile, KeyFile string
	// CAFile holds the certificates of the CA(s) that sign the peers'.
	CAFile string
}

// Creds are loaded TLS settings. A nil *Creds means plaintext.
type Creds struct {
	server, client *tls.Config
}

// Load reads the files. With none set it returns nil, nil: plaintext.
func (c Config) Load() (*Creds, error) {
	if c == (Config{}) {
		return nil, nil
	}
	var missing []string
	for _, f := range []struct{ name, value string }{{"--grpc-tls-cert", c.CertFile}, {"--grpc-tls-key", c.KeyFile}, {"--grpc-tls-ca", c.CAFile}} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("gRPC TLS needs a certificate, its key and a CA bundle together; missing %s", strings.Join(missing, ", "))
	}
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("gRPC TLS: load certificate %s and key %s: %w", c.CertFile, c.KeyFile, err)
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("gRPC TLS: read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("gRPC TLS: %s holds no PEM certificate", c.CAFile)
	}
	return &Creds{
		server: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{pair},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
		},
		client: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{pair},
			RootCAs:      pool,
		},
	}, nil
}

// ServerOptions make a gRPC server require client certificates from the CA.
func (c *Creds) ServerOptions() []grpc.ServerOption {
	if c == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(c.server))}
}

// DialOptions make a client verify the server and present the certificate.
func (c *Creds) DialOptions() []grpc.DialOption {
	if c == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(c.client))}
}
