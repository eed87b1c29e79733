package e2e

import "syscall"

// interruptSignal is what a service manager sends to stop codeexec.
var interruptSignal = syscall.SIGTERM
