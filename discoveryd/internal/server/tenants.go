package server

import (
	"fmt"
	"strings"

	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
)

// defaultTenant is the tenant of requests that name none.
const defaultTenant = "default"

func tenantOr(t string) string {
	if t == "" {
		return defaultTenant
	}
	return t
}

// visible reports whether tenant may see the server name. Unknown names
// are "visible", so that the manager's own error reports them.
func (s *Server) visible(tenant, name string) bool {
	cfg, err := s.mgr.Config(name)
	return err != nil || cfg.SharedWith(tenantOr(tenant))
}

// visibleNames lists the servers tenant may see, sorted.
func (s *Server) visibleNames(tenant string) []string {
	var out []string
	for _, n := range s.mgr.Names() {
		if s.visible(tenant, n) {
			out = append(out, n)
		}
	}
	return out
}

// checkVisible returns the unknown-server error for a server hidden from
// tenant: the same error, listing only the tenant's servers, as for a name
// that is not configured at all, so nothing leaks about other tenants.
func (s *Server) checkVisible(tenant, name string) error {
	if s.visible(tenant, name) {
		return nil
	}
	names := s.visibleNames(tenant)
	if len(names) == 0 {
		return fmt.Errorf("%w %q: no MCP servers are configured for this tenant", upstream.ErrUnknownServer, name)
	}
	return fmt.Errorf("%w %q; configured servers: %s", upstream.ErrUnknownServer, name, strings.Join(names, ", "))
}
