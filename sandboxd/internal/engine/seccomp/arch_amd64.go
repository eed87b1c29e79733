package seccomp

import "golang.org/x/sys/unix"

const (
	seccompArch = unix.AUDIT_ARCH_X86_64
	seccompX32  = true // x32 shares the arch value; its calls have bit 30 set
)

// archSyscallNumbers are the denied calls that exist on x86_64 only.
var archSyscallNumbers = map[string]uint32{
	"iopl": unix.SYS_IOPL, "ioperm": unix.SYS_IOPERM, "uselib": unix.SYS_USELIB,
	"ustat": unix.SYS_USTAT, "sysfs": unix.SYS_SYSFS, "_sysctl": unix.SYS__SYSCTL,
	"create_module": unix.SYS_CREATE_MODULE, "get_kernel_syms": unix.SYS_GET_KERNEL_SYMS,
	"query_module": unix.SYS_QUERY_MODULE, "inotify_init": unix.SYS_INOTIFY_INIT,
}
