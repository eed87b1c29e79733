package upstream

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group, so that stopping it
// also stops the processes it spawned (npx runs node as a child), and asks
// the kernel to kill it if discoveryd dies without cleaning up.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) {
	if pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}
