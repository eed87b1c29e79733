//go:build !amd64 && !arm64

package seccomp

// No syscall numbers are kept for this architecture: bwrap sandboxes run
// without a seccomp filter (the engine logs that once). Container
// sandboxes still get the profile, which names calls instead.
const (
	seccompArch = 0
	seccompX32  = false
)

var syscallNumbers map[string]uint32
