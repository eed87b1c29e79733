//go:build !linux

package upstream

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcAttr is a no-op where process groups are not managed.
func setProcAttr(cmd *exec.Cmd) {}

// signalGroup signals only the server process itself.
func signalGroup(pid int, sig syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil && pid > 0 {
		if sig == syscall.SIGKILL {
			_ = p.Kill()
		} else {
			_ = p.Signal(sig)
		}
	}
}
