package e2e

// End-to-end tests of agent behaviour that notebook users rely on.

import (
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

func TestE2EEventLoopPersists(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	harness.Code(t, c, "import asyncio\nasync def f():\n    await asyncio.sleep(0.01)\n    return 7\n")
	// The event loop persists: a task made in one call is awaited in the next.
	harness.Code(t, c, "task = asyncio.get_running_loop().create_task(f())")
	if got := harness.Joined(harness.Code(t, c, "print(await task)").Stdout()); got != "7" {
		t.Fatalf("stdout = %q, want 7", got)
	}
}

func TestE2EBackgroundOutputNeverLeaksIntoTheNextCall(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	harness.Code(t, c, `
import threading, time, subprocess
def chatter():
    for i in range(40):
        print("background", i, flush=True)
        time.sleep(0.01)
threading.Thread(target=chatter, daemon=True).start()
subprocess.Popen(["sh", "-c", "sleep 0.1; echo child-late"])
print("first")`)
	for range 5 {
		o := harness.Code(t, c, "import time; time.sleep(0.05); print('next')")
		all := harness.Joined(o.Stdout()) + harness.Joined(o.Stderr())
		if strings.Contains(all, "background") || strings.Contains(all, "child-late") {
			t.Fatalf("output of an earlier call leaked into a later one: %q", all)
		}
	}
}
