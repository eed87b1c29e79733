package e2e

import (
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// A result belongs to its call (issue 38, item 7): a thread that a call
// with no servers leaves running cannot write into a later call's result,
// nor use the server that the later call names. Before, its tool call was
// made under the later call's servers and succeeded.
func TestE2EAThreadOfAnEarlierCallStaysOutOfALaterOne(t *testing.T) {
	t.Parallel()
	n := startNeighbours(t, map[string]string{"MCP_SERVERS_CONFIG": memoryUpstream(t, "e2e-belongs")})
	beta := newBystander(t, n.beta, "print('ok')")
	harness.Code(t, n.alpha, `
import asyncio, threading, time
go, report = threading.Event(), []
def leftover():
    go.wait()
    for i in range(50):
        print("leftover", i, flush=True)
        time.sleep(0.002)
    try:
        asyncio.run(runtime.call_tool("memory", "read_graph", {}))
        report.append("called memory")
    except Exception as e:
        report.append("refused: %s" % e)
threading.Thread(target=leftover, daemon=True).start()
print("started")`)
	var o harness.Outcome
	beta.alongside(t, "alpha's leftover thread", func() {
		o = harness.RunPython(t, n.alpha, map[string]any{"code": `
go.set()
import time
for _ in range(500):
    if report:
        break
    time.sleep(0.01)
await mcp_memory.read_graph()
print("mine", report)`, "servers": []any{"memory"}})
	})
	if o.IsError {
		t.Fatalf("alpha's second call failed: %s", o.Text)
	}
	out := harness.Joined(o.Stdout())
	if strings.Contains(out, "leftover") {
		t.Errorf("the leftover thread's output is in the later call's result: %q", out)
	}
	if !strings.Contains(out, "mine ['refused:") || !strings.Contains(out, "run_python call had finished") {
		t.Errorf("the later call printed %q; want the leftover thread's call to memory refused, as made after its own call had finished", out)
	}
}
