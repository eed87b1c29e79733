package discoveryd_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// TestTenantScopedServers: a server whose config lists tenants exists only
// for them; for any other tenant every RPC answers as for an unknown name.
func TestTenantScopedServers(t *testing.T) {
	t.Parallel()
	private := fakeServer(t)
	private["tenants"] = []any{"alpha"}
	e := start(t, map[string]any{"shared": fakeServer(t), "private": private}, nil)
	ctx := t.Context()

	names := func(tenant string) []string {
		resp, err := e.client.ListServers(ctx, &discoveryv1.ListServersRequest{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range resp.GetServers() {
			out = append(out, s.GetName())
		}
		return out
	}
	for tenant, want := range map[string]string{"alpha": "[private shared]", "beta": "[shared]", "": "[shared]"} {
		if got := fmtList(names(tenant)); got != want {
			t.Errorf("ListServers for %q = %s, want %s", tenant, got, want)
		}
	}

	hidden := []string{`"private"`, "configured servers: shared"}
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, tenant string) error
	}{
		{"ListTools", func(ctx context.Context, tenant string) error {
			_, err := e.client.ListTools(ctx, &discoveryv1.ListToolsRequest{Server: "private", Tenant: tenant})
			return err
		}},
		{"GetToolDocs", func(ctx context.Context, tenant string) error {
			_, err := e.client.GetToolDocs(ctx, &discoveryv1.GetToolDocsRequest{Server: "private", Tenant: tenant})
			return err
		}},
		{"CallTool", func(ctx context.Context, tenant string) error {
			_, err := e.client.CallTool(ctx, &discoveryv1.CallToolRequest{Server: "private", Tool: "echo", ArgumentsJson: `{"text":"x"}`, Tenant: tenant})
			return err
		}},
		{"SearchTools scoped", func(ctx context.Context, tenant string) error {
			_, err := e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "echo", Servers: []string{"private"}, Tenant: tenant})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(ctx, "alpha"); err != nil {
				t.Errorf("alpha: %v", err)
			}
			wantStatus(t, tc.call(ctx, "beta"), codes.NotFound, hidden)
		})
	}

	// An unscoped search finds the private server's tools for alpha only.
	for tenant, want := range map[string]bool{"alpha": true, "beta": false} {
		resp, err := e.client.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: "echo", Limit: 50, Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, d := range resp.GetDocs() {
			found = found || d.GetServer() == "private"
		}
		for _, u := range resp.GetUnindexedServers() {
			found = found || u == "private"
		}
		if found != want {
			t.Errorf("search for %s: private server in results = %v, want %v (%v)", tenant, found, want, resp)
		}
	}
}

func fmtList(l []string) string {
	out := "["
	for i, s := range l {
		if i > 0 {
			out += " "
		}
		out += s
	}
	return out + "]"
}
