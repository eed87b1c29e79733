package engine

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestSeccompFilterDecisions runs the bwrap filter in x/net/bpf's VM over
// every denied call, a few calls Python needs, a foreign architecture and
// the x32 ABI. (The isolation test runs it for real in bwrap.)
func TestSeccompFilterDecisions(t *testing.T) {
	t.Parallel()
	raw, err := seccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	if seccompArch == 0 {
		if raw != nil {
			t.Fatal("a filter without syscall numbers")
		}
		return // no filter on this architecture, and NewBwrap logs that
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

// TestContainerSeccompProfile checks the profile container sandboxes get:
// Docker's default less the denied calls, and only when ExtraArgs do not
// bring their own.
func TestContainerSeccompProfile(t *testing.T) {
	t.Parallel()
	c, err := NewContainer(ContainerConfig{Runtime: "podman", Image: "img:1"}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	line := strings.Join(c.runArgs(Spec{ID: "cx-1", Argv: []string{"python3"}}), " ")
	if !strings.Contains(line, "--security-opt seccomp="+c.seccompProfile) || c.seccompProfile == "" {
		t.Fatalf("no seccomp profile in the run args:\n%s", line)
	}
	b, err := os.ReadFile(c.seccompProfile)
	if err != nil {
		t.Fatal(err)
	}
	var p seccomp.Seccomp
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("profile is not a Docker profile: %v", err)
	}
	if p.DefaultAction != specs.ActErrno {
		t.Errorf("default action %s, want Docker's %s", p.DefaultAction, specs.ActErrno)
	}
	allowed := map[string]bool{}
	for _, r := range p.Syscalls {
		if r.Action == specs.ActAllow {
			for _, n := range append(r.Names, r.Name) {
				allowed[n] = true
			}
		}
	}
	for _, n := range deniedSyscalls {
		if allowed[n] {
			t.Errorf("the profile allows %s", n)
		}
	}
	for _, n := range []string{"read", "write", "openat", "clone", "execve", "futex", "wait4"} {
		if !allowed[n] {
			t.Errorf("the profile does not allow %s", n)
		}
	}

	own, err := NewContainer(ContainerConfig{Runtime: "docker", Image: "img:1", ExtraArgs: []string{"--security-opt", "seccomp=unconfined"}}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Close() })
	if line := strings.Join(own.runArgs(Spec{ID: "cx-2", Argv: []string{"python3"}}), " "); strings.Count(line, "seccomp=") != 1 {
		t.Errorf("with a seccomp option in ExtraArgs, want only that one:\n%s", line)
	}
}
