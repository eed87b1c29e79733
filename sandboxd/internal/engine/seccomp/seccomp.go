// Package seccomp holds the system calls every sandbox is refused, as the
// BPF filter bwrap installs and as the profile podman and docker read.
package seccomp

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The bwrap engine adds a seccomp filter to every sandbox (bwrap --seccomp
// installs it just before it starts the command, so bwrap's own set-up is
// not filtered). It is a deny list, not an allow list: Python and whatever
// user code runs under it (compilers, numpy, subprocesses) need a wide and
// changing set of system calls, and an allow list that missed one would
// break ordinary code in ways that are hard to tell from a bug. What it
// denies are calls that no ordinary program in the sandbox needs and that
// are large or notorious kernel attack surface, the same family Docker's
// default profile refuses:
//
//   - kernel keyrings (keyctl, add_key, request_key): not namespaced;
//   - bpf, perf_event_open, userfaultfd and io_uring: large, and the
//     source of many local privilege escalations;
//   - ptrace and process_vm_readv/writev;
//   - mounts (old and new API), pivot_root, unshare and setns: bwrap has
//     set up the sandbox and --disable-userns already stops new user
//     namespaces; this closes the rest of the door;
//   - host administration: modules, kexec, reboot, swap, accounting,
//     quotas, setting the clock, raw I/O ports, file handles
//     (open_by_handle_at was a classic container escape);
//   - kernel objects the kernel counts per user, with a limit per user
//     of the host: inotify and fanotify instances and POSIX message
//     queues. Every sandbox's user namespace has the same owner (the
//     sandbox uid, docs/SANDBOX.md), and the kernel charges each object
//     up the chain of namespaces to that owner, whose host-wide limits
//     are small (128 inotify instances, 800 KiB of queues: about ten
//     queues). A sandbox's files change only by its own hand, so it has
//     nothing to watch, and Python's standard library uses neither; so
//     they are refused rather than shared out at a few each.
//
// Denied calls fail with EPERM, as they would for an unprivileged user, so
// code that probes for a feature falls back instead of crashing. A call
// made through another architecture's entry point (i386's int 0x80 on
// x86_64) kills the process, because the numbers below would not match
// it; the x32 ABI (syscall numbers with bit 30 set) gets ENOSYS.
//
// Container sandboxes get the same calls refused: their profile is
// Docker's default with these names taken out of its allow rules
// (ContainerProfile), for podman too, whose own default allows
// keyctl.
var deniedSyscalls = []string{
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"ptrace", "process_vm_readv", "process_vm_writev",
	"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr", "unshare", "setns",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "get_kernel_syms", "query_module",
	"reboot", "swapon", "swapoff", "acct", "quotactl",
	"settimeofday", "clock_settime", "clock_adjtime",
	"iopl", "ioperm", "lookup_dcookie", "name_to_handle_at", "open_by_handle_at",
	"nfsservctl", "uselib", "ustat", "sysfs", "_sysctl", "vhangup",
	"inotify_init", "inotify_init1", "fanotify_init",
	"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
}

// Denied returns the names of the calls every sandbox is refused.
func Denied() []string { return slices.Clone(deniedSyscalls) }

// seccomp_data offsets (linux/seccomp.h): the syscall number, then the arch.
const (
	seccompNrOffset   = 0
	seccompArchOffset = 4
	x32SyscallBit     = 0x40000000
)

// Filter returns the filter as bwrap --seccomp reads it: an array of
// struct sock_filter in native byte order. It returns nil on architectures
// without syscall numbers (seccompArch is 0).
func Filter() ([]byte, error) {
	if seccompArch == 0 {
		return nil, nil
	}
	var deny []uint32
	for _, name := range deniedSyscalls {
		if nr, ok := syscallNumbers[name]; ok { // some exist on x86_64 only
			deny = append(deny, nr)
		}
	}
	slices.Sort(deny)
	if len(deny) > 250 {
		return nil, fmt.Errorf("seccomp: %d denied calls do not fit one BPF jump", len(deny))
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArchOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: seccompArch, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
		bpf.LoadAbsolute{Off: seccompNrOffset, Size: 4},
	}
	if seccompX32 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)})
	}
	for i, nr := range deny {
		// Past the remaining comparisons and the allow, to the deny.
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(len(deny) - i)})
	}
	prog = append(prog,
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)})
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		out = binary.NativeEndian.AppendUint16(out, ins.Op)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.NativeEndian.AppendUint32(out, ins.K)
	}
	return out, nil
}

// ContainerProfile returns the profile for container sandboxes, in
// the JSON that `docker run --security-opt seccomp=FILE` and podman read:
// Docker's default profile (github.com/moby/profiles/seccomp) with
// deniedSyscalls removed from every rule that allows something. What the
// default refuses stays refused.
func ContainerProfile() ([]byte, error) {
	p := mobyseccomp.DefaultProfile()
	for _, rule := range p.Syscalls {
		if rule.Action != specs.ActAllow {
			continue
		}
		// The default profile names its calls in Names only (Name is the
		// deprecated one-call form of old JSON profiles).
		rule.Names = slices.DeleteFunc(rule.Names, func(n string) bool { return slices.Contains(deniedSyscalls, n) })
	}
	p.Syscalls = slices.DeleteFunc(p.Syscalls, func(r *mobyseccomp.Syscall) bool { return len(r.Names) == 0 })
	b, err := json.MarshalIndent(p, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("container seccomp profile: %w", err)
	}
	return b, nil
}
