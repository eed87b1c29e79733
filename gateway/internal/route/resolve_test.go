package route

import (
	"context"
	"strings"
	"testing"
)

func TestDNSResolver(t *testing.T) {
	t.Parallel()
	r := DNS("sandboxd", "9002", func(_ context.Context, host string) ([]string, error) {
		if host != "sandboxd" {
			t.Errorf("looked up %q", host)
		}
		return []string{"10.0.0.3", "10.0.0.2", "10.0.0.3", "fd00::1"}, nil
	})
	got, err := r(t.Context())
	want := []string{"10.0.0.2:9002", "10.0.0.3:9002", "[fd00::1]:9002"}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"a:1,b:2":                    "a:1 b:2",
		" a:1 , b:2 ,":               "a:1 b:2", //nolint:gocritic // the spaces are the input under test
		"dns:///nosuch.invalid:9002": "",
		"dns:///sandboxd":            "error: want dns:///name:port",
		"a:1,b":                      "error: want host:port",
		",":                          "error: names no replica",
	} {
		r, err := Parse(spec)
		switch {
		case strings.HasPrefix(want, "error: "):
			if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(want, "error: ")) {
				t.Errorf("Parse(%q) = %v, want an error with %q", spec, err, want)
			}
		case err != nil:
			t.Errorf("Parse(%q): %v", spec, err)
		case want != "":
			got, _ := r(t.Context())
			if strings.Join(got, " ") != want {
				t.Errorf("Parse(%q) resolves to %v, want %s", spec, got, want)
			}
		}
	}
	if !IsMulti("a:1,b:2") || !IsMulti("dns:///s:1") || IsMulti("a:1") || IsMulti("unix:/x") {
		t.Error("IsMulti")
	}
}
