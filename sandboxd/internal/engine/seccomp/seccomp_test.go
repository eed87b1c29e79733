package seccomp

import (
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestSeccompFilterDecisions runs the bwrap filter in x/net/bpf's VM over
// every denied call, a few calls Python needs, a foreign architecture and
// the x32 ABI. (The isolation test runs it for real in bwrap.)
func TestSeccompFilterDecisions(t *testing.T) {
	t.Parallel()
	raw, err := Filter()
	if err != nil {
		t.Fatal(err)
	}
	if seccompArch == 0 {
		if raw != nil {
			t.Fatal("a filter without syscall numbers")
		}
		return // no filter on this architecture, and bwrap.New logs that
	}
	if len(raw)%8 != 0 {
		t.Fatalf("filter is %d bytes, not whole sock_filter entries", len(raw))
	}
	var ins []bpf.RawInstruction
	for b := raw; len(b) > 0; b = b[8:] {
		ins = append(ins, bpf.RawInstruction{Op: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])})
	}
	prog, ok := bpf.Disassemble(ins)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel loads seccomp_data in native order; the VM reads packets
	// big-endian, so the test data is big-endian.
	run := func(nr, arch uint32) uint32 {
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[seccompNrOffset:], nr)
		binary.BigEndian.PutUint32(data[seccompArchOffset:], arch)
		got, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(got)
	}
	eperm := unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	for _, name := range deniedSyscalls {
		nr, ok := syscallNumbers[name]
		if !ok {
			continue
		}
		if got := run(nr, seccompArch); got != eperm {
			t.Errorf("%s (%d): action %#x, want EPERM", name, nr, got)
		}
	}
	for name, nr := range map[string]uint32{
		"read": unix.SYS_READ, "write": unix.SYS_WRITE, "openat": unix.SYS_OPENAT, "clone": unix.SYS_CLONE,
		"clone3": unix.SYS_CLONE3, "execve": unix.SYS_EXECVE, "mmap": unix.SYS_MMAP, "futex": unix.SYS_FUTEX,
		"socket": unix.SYS_SOCKET, "wait4": unix.SYS_WAIT4, "pipe2": unix.SYS_PIPE2, "exit_group": unix.SYS_EXIT_GROUP,
	} {
		if got := run(nr, seccompArch); got != unix.SECCOMP_RET_ALLOW {
			t.Errorf("%s (%d): action %#x, want allow", name, nr, got)
		}
	}
	if got := run(unix.SYS_READ, unix.AUDIT_ARCH_I386); got != unix.SECCOMP_RET_KILL_PROCESS {
		t.Errorf("a foreign architecture: action %#x, want kill", got)
	}
	if seccompX32 {
		if got := run(x32SyscallBit|unix.SYS_READ, seccompArch); got != unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS) {
			t.Errorf("x32 read: action %#x, want ENOSYS", got)
		}
	}
	// Every name with a number is in the list, and on x86_64 every name has one.
	for name := range syscallNumbers {
		if !slices.Contains(deniedSyscalls, name) {
			t.Errorf("syscallNumbers has %q, which deniedSyscalls lacks", name)
		}
	}
	if seccompArch == unix.AUDIT_ARCH_X86_64 && len(syscallNumbers) != len(deniedSyscalls) {
		t.Errorf("%d of %d denied calls have numbers on x86_64", len(syscallNumbers), len(deniedSyscalls))
	}
}
