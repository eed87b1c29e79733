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

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/replicas"
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
	fs.String(&s.balance, "balance", string(replicas.LeastLoaded), "how new sessions pick a sandboxd replica: least-loaded or round-robin", "CODEEXEC_SANDBOX_BALANCE")
}

// client connects to sandboxd: one connection for one address, a balancer
// over the replicas otherwise. close releases it.
func (s *sandboxSettings) client(ctx context.Context, logger *slog.Logger, opts ...grpc.DialOption) (sandboxv1.SandboxServiceClient, func(), error) {
	if !replicas.IsMulti(s.addr) {
		conn, err := dial.New(s.addr, nil, opts...)
		if err != nil {
			return nil, nil, err
		}
		return sandboxv1.NewSandboxServiceClient(conn), func() { _ = conn.Close() }, nil
	}
	resolve, err := replicas.Parse(s.addr)
	if err != nil {
		return nil, nil, err
	}
	b, err := replicas.New(ctx, replicas.Config{
		Resolve: resolve,
		Dial:    func(addr string) (*grpc.ClientConn, error) { return dial.New(addr, nil, opts...) },
		Policy:  replicas.Policy(s.balance),
	}, logger.With("component", "replicas"))
	if err != nil {
		return nil, nil, err
	}
	logger.Info("balancing sessions over sandboxd replicas", "sandbox", s.addr, "balance", s.balance, "replicas", len(b.Replicas()))
	return b, func() { _ = b.Close() }, nil
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
