package e2e

// End-to-end tests of agent behaviour that notebook users rely on.

import (
	"strings"
	"testing"
)

func TestE2EEventLoopPersists(t *testing.T) {
	t.Parallel()
	c, _ := startStdio(t, nil)
	code(t, c, "import asyncio\nasync def f():\n    await asyncio.sleep(0.01)\n    return 7\n")
	// The event loop persists: a task made in one call is awaited in the next.
	code(t, c, "task = asyncio.get_running_loop().create_task(f())")
	if got := joined(code(t, c, "print(await task)").stdout()); got != "7" {
		t.Fatalf("stdout = %q, want 7", got)
	}
}

func TestE2EBackgroundOutputNeverLeaksIntoTheNextCall(t *testing.T) {
	t.Parallel()
	c, _ := startStdio(t, nil)
	code(t, c, `
import threading, time, subprocess
def chatter():
    for i in range(40):
        print("background", i, flush=True)
        time.sleep(0.01)
threading.Thread(target=chatter, daemon=True).start()
subprocess.Popen(["sh", "-c", "sleep 0.1; echo child-late"])
print("first")`)
	for range 5 {
		o := code(t, c, "import time; time.sleep(0.05); print('next')")
		all := joined(o.stdout()) + joined(o.stderr())
		if strings.Contains(all, "background") || strings.Contains(all, "child-late") {
			t.Fatalf("output of an earlier call leaked into a later one: %q", all)
		}
	}
}
