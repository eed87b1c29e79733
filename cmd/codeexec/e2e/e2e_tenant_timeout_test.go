package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// A tenant's maximum timeout (--tenant-max-timeout) bounds its calls only:
// beta's timeout over it is refused with its own maximum in the message,
// and a call that gives none gets the default lowered to it; alpha keeps
// the server's maximum. Each sees its own maximum in tools/list.
func TestE2ETenantMaxTimeoutBoundsItsCalls(t *testing.T) {
	t.Parallel()
	n := startNeighbours(t, nil, "--tenant-max-timeout", "beta=3s")
	if got := listedTimeout(t, n.beta); got.Maximum != 3 || got.Default != 3 {
		t.Errorf("beta's tools/list: timeout maximum %v, default %v; want 3 and 3", got.Maximum, got.Default)
	}
	if got := listedTimeout(t, n.alpha); got.Maximum != 3600 || got.Default != 30 {
		t.Errorf("alpha's tools/list: timeout maximum %v, default %v; want the server's 3600 and 30", got.Maximum, got.Default)
	}
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

// timeoutProperty is the bounds of run_python's timeout argument.
type timeoutProperty struct {
	Maximum float64 `json:"maximum"`
	Default float64 `json:"default"`
}

// listedTimeout is run_python's timeout property as tools/list gives it.
func listedTimeout(t *testing.T, c *client.Client) (p timeoutProperty) {
	t.Helper()
	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != "run_python" {
			continue
		}
		var schema struct {
			Properties struct {
				Timeout timeoutProperty `json:"timeout"`
			} `json:"properties"`
		}
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatalf("run_python's schema: %v", err)
		}
		return schema.Properties.Timeout
	}
	t.Fatal("tools/list has no run_python")
	return p
}
