package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// blockingCheckpoint leaves a value in the session whose unpickling
// sleeps an hour: restoring the session's checkpoint blocks.
const blockingCheckpoint = `
import time
class Sleeper:
    def __reduce__(self):
        return (time.sleep, (3600,))
stuck = Sleeper()
kept = 1
print("ready")`

// A restore is bounded by its call's timeout: one that blocks ends with
// the call's time, starts the session fresh and says so; the next call
// is not held by it again. Before, every later call of the session took
// 30 s, whatever its timeout, and failed.
func TestE2EARestoreThatBlocksStartsFreshWithinTheTimeout(t *testing.T) {
	t.Parallel()
	n := startNeighbours(t, nil)
	beta := newBystander(t, n.beta, "print('ok')")
	harness.Code(t, n.alpha, blockingCheckpoint)
	// A call that times out stops the sandbox: the next one restores.
	if o := harness.RunPython(t, n.alpha, map[string]any{"code": "while True: pass", "timeout": 1}); o.Str("status") != "timeout" {
		t.Fatalf("the spinning call: %s", o.Text)
	}
	var restored harness.Outcome
	var took time.Duration
	beta.alongside(t, "alpha's blocking restore", func() {
		start := time.Now()
		restored = harness.RunPython(t, n.alpha, map[string]any{"code": "print('after', 'kept' in globals())", "timeout": 5})
		took = time.Since(start)
	})
	t.Logf("the call after the blocking restore took %v: %s", took, restored.Text)
	if !strings.Contains(restored.Text, "started fresh") {
		t.Errorf("the call whose restore blocked said %q; want it to say the session started fresh", harness.TailOf(restored.Text, 600))
	}
	o := harness.RunPython(t, n.alpha, map[string]any{"code": "print('next', 'kept' in globals())", "timeout": 5})
	if o.IsError || harness.Joined(o.Stdout()) != "next False" {
		t.Errorf("the call after printed %q (%s); want the fresh session to go on", harness.Joined(o.Stdout()), harness.TailOf(o.Text, 400))
	}
}
