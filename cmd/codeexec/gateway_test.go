package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/gateway"
)

func TestHTTPListenAddr(t *testing.T) {
	t.Parallel()
	tokens := gateway.HTTPAuth{TokensFile: "/etc/codeexec/tokens"}
	for _, tc := range []struct {
		addr    string
		auth    gateway.HTTPAuth
		want    string
		wantErr string
	}{
		{":8080", gateway.HTTPAuth{}, "127.0.0.1:8080", ""},
		{"127.0.0.1:8080", gateway.HTTPAuth{}, "127.0.0.1:8080", ""},
		{"[::1]:8080", gateway.HTTPAuth{}, "[::1]:8080", ""},
		{"localhost:8080", gateway.HTTPAuth{}, "localhost:8080", ""},
		{"0.0.0.0:8080", gateway.HTTPAuth{}, "", "without authentication"},
		{"[::]:8080", gateway.HTTPAuth{}, "", "--insecure-no-auth"},
		{"10.1.2.3:8080", gateway.HTTPAuth{}, "", "anyone who reaches it could run code"},
		{"mcp.example.com:8080", gateway.HTTPAuth{}, "", "without authentication"},
		{"0.0.0.0:8080", tokens, "0.0.0.0:8080", ""},
		{"0.0.0.0:8080", gateway.HTTPAuth{JWTIssuer: "https://issuer"}, "0.0.0.0:8080", ""},
		{"0.0.0.0:8080", gateway.HTTPAuth{Disabled: true}, "0.0.0.0:8080", ""},
		{"8080", gateway.HTTPAuth{}, "", "want HOST:PORT or :PORT"},
	} {
		got, err := httpListenAddr(tc.addr, tc.auth)
		if got != tc.want || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("httpListenAddr(%q, %+v) = %q, %v; want %q, error containing %q", tc.addr, tc.auth, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestTokenCommand(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"token", "add", "alpha"}, noEnv, nil, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	token := lines[len(lines)-1]
	if want := gateway.HashToken(token) + " alpha\n"; out.String() != want {
		t.Errorf("token add printed %q for token %q; want %q", out.String(), token, want)
	}
	out.Reset()
	if err := run(t.Context(), []string{"token", "hash"}, noEnv, strings.NewReader(token+"\n"), &out, &errOut); err != nil || out.String() != gateway.HashToken(token)+"\n" {
		t.Errorf("token hash = %q, %v", out.String(), err)
	}
	if err := run(t.Context(), []string{"token", "add", "bad/tenant"}, noEnv, nil, &out, &errOut); err == nil {
		t.Error("token add accepted a tenant the tokens file would refuse")
	}
	if err := run(t.Context(), []string{"token"}, noEnv, nil, &out, &errOut); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("token without arguments = %v, want usage", err)
	}
}

// noEnv is an empty environment.
func noEnv(string) string { return "" }

func TestTenantCounts(t *testing.T) {
	t.Parallel()
	got, err := tenantCounts("--tenant-max-tool-calls", []string{"alice=50", " bob = 0 "})
	if err != nil || len(got) != 2 || got["alice"] != 50 || got["bob"] != 0 {
		t.Errorf("tenantCounts = %v, %v; want alice 50 and bob 0", got, err)
	}
	for _, bad := range []string{"alice", "alice=-1", "alice=x", "=3", "a b=3"} {
		if _, err := tenantCounts("--tenant-max-tool-calls", []string{bad}); err == nil || !strings.Contains(err.Error(), "want TENANT=N") {
			t.Errorf("tenantCounts(%q) = %v, want an error saying TENANT=N", bad, err)
		}
	}
	// --tools takes only the surfaces it knows.
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"serve", "--tools", "everything"}, noEnv, nil, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `tools "everything": accepted: run_python (the default), passthrough or both`) {
		t.Errorf("serve --tools everything: %v, want the accepted values", err)
	}
}
