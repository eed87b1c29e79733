package seccomp

import "golang.org/x/sys/unix"

const (
	seccompArch = unix.AUDIT_ARCH_AARCH64
	seccompX32  = false
)

// archSyscallNumbers: arm64 has no denied calls of its own.
var archSyscallNumbers map[string]uint32
