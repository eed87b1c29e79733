// Package health is `codeexec health`: it checks a gRPC service's health,
// or the gateway's /healthz, for container health checks.
package health

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpctls"
)

// Command is `codeexec health`.
type Command struct{ tls grpctls.Config }

// Bind binds the TLS flags of a client of the split services.
func (c *Command) Bind(fs *flagenv.Set, _ cli.Env) { cli.BindGRPCTLS(fs, &c.tls) }

// TakesArgs says that health takes its ADDR after the flags.
func (c *Command) TakesArgs() {}

// Run checks the health of the service at args[0], a gRPC address or an
// http:// URL.
func (c *Command) Run(ctx context.Context, args []string, e cli.Env) error {
	if len(args) != 1 {
		fmt.Fprintln(e.Stderr, "usage: codeexec health [--grpc-tls-cert F --grpc-tls-key F --grpc-tls-ca F] ADDR|http://HOST:PORT/healthz")
		return cli.ErrUsage
	}
	if isHTTPURL(args[0]) {
		return httpHealth(ctx, args[0], e.Stdout)
	}
	conn, err := cli.DialService(args[0], c.tls)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("health check of %s: %w", args[0], err)
	}
	fmt.Fprintln(e.Stdout, resp.GetStatus())
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %s", args[0], resp.GetStatus())
	}
	return nil
}

func isHTTPURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// httpHealth checks the gateway's /healthz: for its container health check.
func httpHealth(ctx context.Context, url string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health check of %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health check of %s: %s", url, resp.Status)
	}
	fmt.Fprintln(stdout, "SERVING")
	return nil
}
