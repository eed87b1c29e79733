package sandboxd_test

import (
	"strings"
	"testing"

	"github.com/codeexec/codeexec/sandboxd"
)

func TestValidateRuntime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		runtime, image, want string
	}{
		{"", "", ""},
		{"bwrap", "", ""},
		{"podman", "localhost/codeexec-sandbox:latest", ""},
		{"docker", "localhost/codeexec-sandbox:latest", ""},
		{"docker", "", "needs an image: set MCP_BRIDGE_IMAGE"},
		{"lxc", "img", `runtime "lxc" is not supported: use bwrap, podman or docker`},
	}
	for _, tc := range cases {
		cfg := sandboxd.DefaultConfig()
		cfg.Runtime, cfg.Image = tc.runtime, tc.image
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("runtime %q image %q: %v", tc.runtime, tc.image, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("runtime %q image %q: %v, want %q", tc.runtime, tc.image, err, tc.want)
		}
	}
}

func TestValidateLaunchSpares(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spares int
		want   string
	}{
		{0, ""},
		{2, ""},
		{16, ""},
		{-1, "launch spares -1 is out of range: use 0 to 16"},
		{17, "launch spares 17 is out of range: use 0 to 16"},
	} {
		cfg := sandboxd.DefaultConfig()
		cfg.LaunchSpares = tc.spares
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("spares %d: %v", tc.spares, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("spares %d: %v, want %q", tc.spares, err, tc.want)
		}
	}
}
