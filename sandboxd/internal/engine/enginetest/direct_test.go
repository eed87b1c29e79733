package enginetest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The direct engine pauses and resumes a sandbox and its children, and
// Kill ends a paused one.
func TestDirectPauses(t *testing.T) {
	t.Parallel()
	CheckPause(t, NewDirect(t), Spec(t, PauseScript))
}

// The agent's mount point in Argv becomes the AgentDir, and the sandbox
// runs in a workspace of its own that HOME names.
func TestDirectRewritesTheAgentMount(t *testing.T) {
	t.Parallel()
	spec := Spec(t, `import os, sys; print(sys.argv[1]); print(os.getcwd() == os.environ["HOME"] != "/workspace")`, "/opt/codeexec/agent.py")
	r := Run(t, NewDirect(t), spec, "", time.Minute)
	want := filepath.Join(spec.AgentDir, "agent.py") + "\nTrue\n"
	if r.Err != nil || r.Stdout != want {
		t.Fatalf("stdout %q, err %v (stderr %q), want %q", r.Stdout, r.Err, strings.TrimSpace(r.Stderr), want)
	}
}
