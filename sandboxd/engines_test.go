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
		{"podman", "codeexec-sandbox:latest", ""},
		{"docker", "codeexec-sandbox:latest", ""},
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
