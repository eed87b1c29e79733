package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/gateway"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/flagenv"
)

// sandboxSettings say where the gateway finds sandboxd.
type sandboxSettings struct {
	addr    string
	balance string
}

func bindSandboxAddr(fs *flagenv.Set, s *sandboxSettings) {
	fs.String(&s.addr, "sandbox", "127.0.0.1:9002",
		"sandboxd address: host:port or unix:/path; several replicas as host:port,host:port or dns:///name:port (every address of name, re-resolved every 5s)",
		"CODEEXEC_SANDBOXD_ADDR")
	fs.String(&s.balance, "balance", gateway.BalanceLeastLoaded, "how new sessions pick a sandboxd replica: least-loaded or round-robin", "CODEEXEC_SANDBOX_BALANCE")
}

// client connects to sandboxd: one connection for one address, a balancer
// over the replicas otherwise. close releases it.
func (s *sandboxSettings) client(ctx context.Context, logger *slog.Logger, opts ...grpc.DialOption) (sandboxv1.SandboxServiceClient, func(), error) {
	return gateway.DialSandbox(ctx, s.addr, s.balance, logger, opts...)
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
