package config

import (
	"strings"
	"testing"
)

func TestParseTenants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		entry   map[string]any
		want    []string
		wantErr string
	}{
		{"absent: shared", map[string]any{"command": "x"}, nil, ""},
		{"listed", map[string]any{"command": "x", "tenants": []any{"alpha", " beta "}}, []string{"alpha", "beta"}, ""},
		{"not a list", map[string]any{"command": "x", "tenants": "alpha"}, nil, `"tenants" must be a list`},
		{"empty name", map[string]any{"command": "x", "tenants": []any{""}}, nil, "non-empty strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _, err := parseEntry("srv", tc.entry, "", nil, Options{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || strings.Join(s.Tenants, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("Tenants = %q, %v; want %q", s.Tenants, err, tc.want)
			}
			for _, tenant := range []string{"alpha", "gamma"} {
				want := len(tc.want) == 0 || tenant == "alpha"
				if s.SharedWith(tenant) != want {
					t.Errorf("SharedWith(%q) = %v, want %v", tenant, !want, want)
				}
			}
		})
	}
}
