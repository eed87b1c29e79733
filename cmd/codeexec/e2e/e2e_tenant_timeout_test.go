package e2e

import (
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// A tenant's maximum timeout (--tenant-max-timeout) bounds its calls only:
// beta's timeout over it is refused with its own maximum in the message,
// and a call that gives none gets the default lowered to it; alpha keeps
// the server's maximum.
func TestE2ETenantMaxTimeoutBoundsItsCalls(t *testing.T) {
	t.Parallel()
	n := startNeighbours(t, nil, "--tenant-max-timeout", "beta=3s")
	o := harness.RunPython(t, n.beta, map[string]any{"code": "print(1)", "timeout": 10})
	if !o.IsError || !strings.Contains(o.Text, "from 1 to 3 ") {
		t.Errorf("beta's timeout=10: %q; want a refusal naming its maximum, 3", o.Text)
	}
	o = harness.RunPython(t, n.alpha, map[string]any{"code": "print(1)", "timeout": 10})
	if o.IsError || harness.Joined(o.Stdout()) != "1" {
		t.Errorf("alpha's timeout=10: %q; want it run", o.Text)
	}
	o = harness.RunPython(t, n.beta, map[string]any{"code": "import time; time.sleep(20)"})
	if !o.IsError || !strings.HasPrefix(o.Text, "status: timeout\nTimeout: execution exceeded 3s\n") {
		t.Errorf("beta's call without a timeout, sleeping 20 s: %q; want it stopped at beta's 3 s", o.Text)
	}
}
