package engine

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// StartChild starts cmd (bwrap's shim, a container CLI) so that the kernel
// kills it when sandboxd dies: its parent-death signal is SIGKILL, and it
// is forked from one OS thread that never exits.
//
// PR_SET_PDEATHSIG, which both the shim (SysProcAttr.Pdeathsig) and bwrap
// (--die-with-parent) rely on, fires when the parent *thread* exits, not the
// parent process. Go threads normally live forever, but a goroutine that
// exits while locked to its thread takes the thread with it; if a sandbox
// had been forked from that thread it would be killed at a random moment.
// Forking only from a dedicated, permanently locked thread rules that out.
//
// The child leads a process group of its own, so that the signals a
// terminal sends its foreground group (Ctrl-C, Ctrl-Z, Ctrl-\), meant for
// the MCP client that started codeexec there, never reach a sandbox:
// sandboxd stops its sandboxes itself.
func StartChild(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
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

var (
	starterOnce sync.Once
	starterReqs chan starterReq
)

type starterReq struct {
	cmd  *exec.Cmd
	done chan error
}

// systemDirs are searched after PATH: MCP clients often start servers with
// a minimal PATH, and a tool that is installed must still be found.
var systemDirs = []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"}

// LookPath is exec.LookPath with systemDirs as a fallback for bare names.
func LookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil || strings.Contains(name, "/") {
		return p, err
	}
	for _, dir := range systemDirs {
		if p, err2 := exec.LookPath(filepath.Join(dir, name)); err2 == nil {
			return p, nil
		}
	}
	return "", err
}
