package grpctls_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/grpcserver"
	"github.com/codeexec/codeexec/services/grpctls"
	"github.com/codeexec/codeexec/services/grpctls/grpctlstest"
)

// TestMutualTLS serves the health service over mutual TLS and calls it
// with the right certificate, with none, with one from another CA and in
// plaintext.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	ca := grpctlstest.NewCA(t, "suite")
	serverCreds, err := ca.Issue(t, "sandboxd").Load()
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcserver.New(slog.New(slog.DiscardHandler), nil, serverCreds.ServerOptions()...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	addr := lis.Addr().String()

	check := func(opts ...grpc.DialOption) error {
		conn, err := dial.New(addr, nil, opts...)
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	good, err := ca.Issue(t, "gateway").Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := check(good.DialOptions()...); err != nil {
		t.Fatalf("a client with a certificate from the CA: %v", err)
	}
	rogue, err := grpctlstest.NewCA(t, "rogue").Issue(t, "intruder").Load()
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	noCert := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}))
	for name, opts := range map[string][]grpc.DialOption{
		"plaintext":                     {grpc.WithTransportCredentials(insecure.NewCredentials())},
		"a certificate from another CA": rogue.DialOptions(),
		"no client certificate":         {noCert},
	} {
		if err := check(opts...); err == nil {
			t.Errorf("%s: the call succeeded", name)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	ca := grpctlstest.NewCA(t, "suite")
	good := ca.Issue(t, "memoryd")
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  grpctls.Config
		want string
	}{
		{"only a cert", grpctls.Config{CertFile: good.CertFile}, "missing --grpc-tls-key, --grpc-tls-ca"},
		{"no CA", grpctls.Config{CertFile: good.CertFile, KeyFile: good.KeyFile}, "missing --grpc-tls-ca"},
		{"key of another cert", grpctls.Config{CertFile: good.CertFile, KeyFile: ca.Issue(t, "other").KeyFile, CAFile: good.CAFile}, "load certificate"},
		{"CA file without PEM", grpctls.Config{CertFile: good.CertFile, KeyFile: good.KeyFile, CAFile: empty}, "holds no PEM certificate"},
		{"CA file missing", grpctls.Config{CertFile: good.CertFile, KeyFile: good.KeyFile, CAFile: empty + ".gone"}, "read CA bundle"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := tc.cfg.Load()
			if err == nil || c != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load() = %v, %v; want an error containing %q", c, err, tc.want)
			}
		})
	}
	if c, err := (grpctls.Config{}).Load(); c != nil || err != nil {
		t.Errorf("no files: Load() = %v, %v; want plaintext (nil, nil)", c, err)
	}
}
