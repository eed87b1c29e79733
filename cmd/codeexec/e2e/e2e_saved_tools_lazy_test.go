package e2e

import (
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// saveRawTool stores a saved tool whose source has top-level statements
// of its own, as code can through the agent's channel whatever save_tool
// would have carried: a second's sleep and a line appended to
// /workspace/loads.
const saveRawTool = `
g = save_tool.__globals__
src = '''
import time
time.sleep(1)
with open("/workspace/loads", "a") as f:
    f.write("loaded\\n")
def greet(name):
    """Says hello."""
    return "hi " + name
'''
g["_chan"].call_sync(g["SAVE_TOOL"], name="greet", source=src, docstring="Says hello.")
print("saved")`

// A saved tool is definitions, loaded on first use (issue 38, item 8): its
// top-level statements run when a session first uses it, once, not at the
// start of every session of the tenant. Before, every new session of
// alpha ran them before its first call's code.
func TestE2ESavedToolsLoadOnFirstUse(t *testing.T) {
	t.Parallel()
	n := startNeighbours(t, nil)
	beta := newBystander(t, n.beta, "print('ok')")
	harness.Code(t, n.alpha, saveRawTool)
	beta.alongside(t, "alpha's new sessions with a saved tool", func() {
		a2 := tokenClient(t, n.base, "alpha-token")
		o := harness.Code(t, a2, "import os\nprint(os.path.exists('/workspace/loads'))")
		if got := harness.Joined(o.Stdout()); got != "False" {
			t.Errorf("a new session's first call found the saved tool's top-level statements run already (%q); want them run on first use only", got)
		}
		o = harness.Code(t, a2, "print(greet('x'), greet('y'), greet.__doc__)\nprint(open('/workspace/loads').read().count('loaded'))")
		if got := harness.Joined(o.Stdout()); got != "hi x hi y Says hello.\n1" {
			t.Errorf("using the saved tool twice printed %q; want it to work, loaded once", got)
		}
		o = harness.Code(t, a2, "import user_tools\nprint(user_tools.greet('z'), open('/workspace/loads').read().count('loaded'))")
		if got := harness.Joined(o.Stdout()); got != "hi z 1" {
			t.Errorf("user_tools.greet after the bare name printed %q; want the tool loaded once", got)
		}
	})
}
