package e2e

import (
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// A result belongs to its call (issue 38, item 7): a thread that a call
// with no servers leaves running, or a work item it left to a thread pool
// that a later call uses too, cannot write into a later call's result,
// nor use the server that the later call names. Before, its tool call was
// made under the later call's servers and succeeded; the pool's item did
// so until work items were tagged with their call.
func TestE2EAThreadOfAnEarlierCallStaysOutOfALaterOne(t *testing.T) {
	t.Parallel()
	n := startNeighbours(t, map[string]string{"MCP_SERVERS_CONFIG": memoryUpstream(t, "e2e-belongs")})
	beta := newBystander(t, n.beta, "print('ok')")
	for _, leave := range []struct{ name, code string }{
		{"a thread", "threading.Thread(target=leftover, daemon=True).start()"},
		{"a thread pool's work item", "pool.submit(leftover)"},
	} {
		harness.Code(t, n.alpha, `
import asyncio, threading, time
from concurrent.futures import ThreadPoolExecutor
go, report = threading.Event(), []
pool = ThreadPoolExecutor(2)
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
`+leave.code+`
print("started")`)
		var o harness.Outcome
		beta.alongside(t, "alpha's leftover "+leave.name, func() {
			o = harness.RunPython(t, n.alpha, map[string]any{"code": `
go.set()
import time
for _ in range(500):
    if report:
        break
    time.sleep(0.01)
await mcp_memory.read_graph()
pool.submit(print, "pooled now").result()
print("mine", report)`, "servers": []any{"memory"}})
		})
		if o.IsError {
			t.Fatalf("%s: alpha's second call failed: %s", leave.name, o.Text)
		}
		out := harness.Joined(o.Stdout())
		if strings.Contains(out, "leftover") {
			t.Errorf("%s: its output is in the later call's result: %q", leave.name, out)
		}
		if !strings.Contains(out, "pooled now\nmine ['refused:") || !strings.Contains(out, "run_python call had finished") {
			t.Errorf("%s: the later call printed %q; want its own pooled print, and the leftover's call to memory refused, as made after its own call had finished", leave.name, out)
		}
	}
}
