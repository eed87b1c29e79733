package config

import (
	"fmt"
	"slices"
	"strings"
)

// stringList reads an optional list of non-empty strings.
func stringList(e map[string]any, key string) ([]string, error) {
	raw, ok := e[key]
	if !ok || raw == nil {
		return nil, nil
	}
	l, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("%q must be a list of strings, got %s", key, kind(raw))
	}
	out := make([]string, 0, len(l))
	for _, v := range l {
		s, ok := v.(string)
		if !ok || strings.TrimSpace(s) == "" {
			return nil, fmt.Errorf("%q must hold non-empty strings, got %s", key, kind(v))
		}
		out = append(out, strings.TrimSpace(s))
	}
	return out, nil
}

// SharedWith reports whether tenant may use the server: every tenant when
// Tenants is empty, else only those listed.
func (s Server) SharedWith(tenant string) bool {
	return len(s.Tenants) == 0 || slices.Contains(s.Tenants, tenant)
}
