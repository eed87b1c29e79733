package e2e

import (
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// floodUnknownFrames is issue 38's item 6: the code finds the agent's
// channel (it runs in the agent's process) and sends frames of a type
// sandboxd does not know, each with a 10 KB type name. Bounded: 5000
// frames.
const floodUnknownFrames = `
import gc
chan = next(o for o in gc.get_objects() if type(o).__name__ == "Channel" and hasattr(o, "send_out"))
kind, sent = "u" * 10000, 0
try:
    for _ in range(5000):
        chan.send({"t": kind})
        sent += 1
finally:
    print("sent", sent, flush=True)
import time
time.sleep(5)`

// A sandbox that sends frames of unknown types is stopped after a bound,
// and what sandboxd logs of them is a few short lines, not one
// full-length line each; the other tenant's calls go on. Before, each
// frame gave a warning line with the whole type: 422 MiB of log in 8 s.
func TestE2EUnknownFramesStopTheSandboxAndDoNotFloodTheLog(t *testing.T) {
	t.Parallel()
	n := startNeighbours(t, nil)
	beta := newBystander(t, n.beta, "print('ok')")
	before := len(n.logs.String())
	var o harness.Outcome
	beta.alongside(t, "alpha's flood of unknown frames", func() {
		o = harness.RunPython(t, n.alpha, map[string]any{"code": floodUnknownFrames, "timeout": 60})
	})
	grew := len(n.logs.String()) - before
	t.Logf("alpha's call: %s; the log grew by %d bytes", harness.TailOf(o.Text, 300), grew)
	if !o.IsError || !strings.Contains(o.Text, "unknown type") {
		t.Errorf("alpha's flood ended %q; want its sandbox stopped for frames of unknown types", harness.TailOf(o.Text, 600))
	}
	// Beta's calls log too, a few hundred bytes each at debug level.
	if grew > 512<<10 {
		t.Errorf("the log grew by %d bytes during the flood; want a few lines about it", grew)
	}
	if strings.Contains(n.logs.String(), strings.Repeat("u", 1000)) {
		t.Error("the log holds a frame type of 1000 bytes or more; want it cut short")
	}
	// The session goes on in a new sandbox.
	harness.Code(t, n.alpha, "print('after')")
}
