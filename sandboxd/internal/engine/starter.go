package engine

import (
	"os/exec"
	"runtime"
	"sync"
)

// Sandboxes are started from one OS thread that never exits.
//
// PR_SET_PDEATHSIG, which both the shim (SysProcAttr.Pdeathsig) and bwrap
// (--die-with-parent) rely on, fires when the parent *thread* exits, not the
// parent process. Go threads normally live forever, but a goroutine that
// exits while locked to its thread takes the thread with it; if a sandbox
// had been forked from that thread it would be killed at a random moment.
// Forking only from a dedicated, permanently locked thread rules that out.
var (
	starterOnce sync.Once
	starterReqs chan starterReq
)

type starterReq struct {
	cmd  *exec.Cmd
	done chan error
}

// startOnStarterThread runs cmd.Start on the dedicated thread.
func startOnStarterThread(cmd *exec.Cmd) error {
	starterOnce.Do(func() {
		starterReqs = make(chan starterReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range starterReqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	starterReqs <- starterReq{cmd: cmd, done: done}
	return <-done
}
