//go:build amd64 || arm64

package seccomp

import (
	"maps"

	"golang.org/x/sys/unix"
)

// syscallNumbers maps the names in deniedSyscalls that exist on this
// architecture to their numbers: the ones every architecture has, and
// arch_<arch>.go's own.
var syscallNumbers = func() map[string]uint32 {
	m := maps.Clone(commonSyscallNumbers)
	maps.Copy(m, archSyscallNumbers)
	return m
}()

// commonSyscallNumbers are the denied calls every architecture has.
var commonSyscallNumbers = map[string]uint32{
	"keyctl": unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
	"bpf": unix.SYS_BPF, "perf_event_open": unix.SYS_PERF_EVENT_OPEN, "userfaultfd": unix.SYS_USERFAULTFD,
	"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER,
	"io_uring_register": unix.SYS_IO_URING_REGISTER,
	"ptrace":            unix.SYS_PTRACE, "process_vm_readv": unix.SYS_PROCESS_VM_READV,
	"process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
	"mount":             unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT,
	"move_mount": unix.SYS_MOVE_MOUNT, "open_tree": unix.SYS_OPEN_TREE, "fsopen": unix.SYS_FSOPEN,
	"fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT, "fspick": unix.SYS_FSPICK,
	"mount_setattr": unix.SYS_MOUNT_SETATTR, "unshare": unix.SYS_UNSHARE, "setns": unix.SYS_SETNS,
	"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD,
	"init_module": unix.SYS_INIT_MODULE, "finit_module": unix.SYS_FINIT_MODULE,
	"delete_module": unix.SYS_DELETE_MODULE, "reboot": unix.SYS_REBOOT,
	"swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "acct": unix.SYS_ACCT, "quotactl": unix.SYS_QUOTACTL,
	"settimeofday": unix.SYS_SETTIMEOFDAY, "clock_settime": unix.SYS_CLOCK_SETTIME,
	"clock_adjtime": unix.SYS_CLOCK_ADJTIME, "lookup_dcookie": unix.SYS_LOOKUP_DCOOKIE,
	"name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT, "open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
	"nfsservctl": unix.SYS_NFSSERVCTL, "vhangup": unix.SYS_VHANGUP,
	"inotify_init1": unix.SYS_INOTIFY_INIT1, "fanotify_init": unix.SYS_FANOTIFY_INIT,
	"mq_open": unix.SYS_MQ_OPEN, "mq_unlink": unix.SYS_MQ_UNLINK, "mq_timedsend": unix.SYS_MQ_TIMEDSEND,
	"mq_timedreceive": unix.SYS_MQ_TIMEDRECEIVE, "mq_notify": unix.SYS_MQ_NOTIFY, "mq_getsetattr": unix.SYS_MQ_GETSETATTR,
}
