// Package vmtest runs a test inside a Linux virtual machine whose only
// cgroup hierarchy is v2, as on every current distribution, where the
// development and CI hosts run cgroup v1. QEMU emulates the machine in
// software (these hosts cannot nest KVM); its kernel is Debian's, fetched
// by scripts/vm-kernel.sh, and its root file system is the host's own,
// shared read-only over 9p below a tmpfs overlay, so the machine runs the
// same binaries, Python and environments as the host (its /tmp too, where
// go test keeps the test binary), writes nothing to the host but the
// job's directory, and has no network but loopback.
package vmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"

	"github.com/codeexec/codeexec/services/testenv"
)

// InsideEnv is set in a test's environment when it runs in the machine.
const InsideEnv = "CODEEXEC_IN_VM"

// Inside reports whether this process runs in a vmtest machine.
func Inside() bool { return os.Getenv(InsideEnv) == "1" }

// Job is a command to run in a machine.
type Job struct {
	Args    []string
	Env     []string
	Dir     string        // the working directory; the job's when empty
	Memory  string        // as QEMU's -m takes it; "2G" when empty
	CPUs    int           // 2 when 0
	Timeout time.Duration // 10 minutes when 0
}

// Result is what the command printed (stdout and stderr together) and its
// exit code; Console is the kernel's console.
type Result struct {
	Exit    int
	Output  string
	Console string
}

// KernelDir is where scripts/vm-kernel.sh puts the kernel and modules:
// $CODEEXEC_VM_KERNEL, else $XDG_CACHE_HOME/codeexec/vm-kernel, else
// ~/.cache/codeexec/vm-kernel.
func KernelDir() string {
	if d := os.Getenv("CODEEXEC_VM_KERNEL"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "codeexec", "vm-kernel")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "codeexec", "vm-kernel")
}

// Tests are tests of the running test binary to run in a machine.
type Tests struct {
	Names  []string // top-level tests, each of which must pass there
	Skip   string   // passed as -test.skip when not empty
	Env    []string // added to the tests' environment
	Memory string   // the machine's, as Job.Memory
}

// RunSelf runs ts in a machine, with InsideEnv set, and fails tb unless
// each of them passed there. It returns the tests' output. Under -short
// it skips tb: a machine is a real sandbox host, as testenv.Sandboxes.
func RunSelf(tb testing.TB, ts Tests) string {
	tb.Helper()
	testenv.Sandboxes(tb)
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	j := Job{Memory: ts.Memory, Dir: wd, Timeout: jobTimeout(tb)}
	// The tests' own timeout ends first, so that they say where they hung.
	j.Args = []string{self, "-test.run=^(" + strings.Join(ts.Names, "|") + ")$", "-test.v", "-test.count=1",
		"-test.timeout=" + (j.Timeout - j.Timeout/10).String()}
	if ts.Skip != "" {
		j.Args = append(j.Args, "-test.skip="+ts.Skip)
	}
	j.Env = append([]string{InsideEnv + "=1", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "TMPDIR=/tmp"}, ts.Env...)
	r := Run(tb, dir, j)
	if r.Exit != 0 {
		tb.Fatalf("the tests in the machine exited %d:\n%s\nthe kernel's console, last lines:\n%s", r.Exit, r.Output, lastLines(r.Console, 30))
	}
	var summary []string
	for _, l := range strings.Split(r.Output, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "--- ") || strings.Contains(t, "_test.go:") && len(t) < 400 {
			summary = append(summary, l)
		}
	}
	tb.Logf("in the machine:\n%s", strings.Join(summary, "\n"))
	for _, n := range ts.Names {
		if !strings.Contains(r.Output, "--- PASS: "+n+" ") {
			tb.Errorf("%s did not pass in the machine:\n%s", n, r.Output)
		}
	}
	return r.Output
}

// jobTimeout is 10 minutes, or less when tb's own deadline comes sooner,
// keeping a minute for the machine to stop.
func jobTimeout(tb testing.TB) time.Duration {
	d := 10 * time.Minute
	if t, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := t.Deadline(); ok {
			d = min(d, time.Until(end)-time.Minute)
		}
	}
	return max(d, time.Minute)
}

// Run boots a machine, runs j in it with dir (a directory of the host's,
// shared writable at the same path) for its output, and returns what it
// printed. A machine that cannot start fails tb.
func Run(tb testing.TB, dir string, j Job) Result {
	tb.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		tb.Fatal("no qemu-system-x86_64: install it with scripts/vm-kernel.sh (Debian's qemu-system-x86)")
	}
	kdir := KernelDir()
	kernel := filepath.Join(kdir, "vmlinuz")
	if _, err := os.Stat(kernel); err != nil {
		tb.Fatalf("no kernel for the test machine at %s: fetch it with bash scripts/vm-kernel.sh", kdir)
	}
	initrd, err := buildInitramfs(tb.TempDir(), kdir)
	if err != nil {
		tb.Fatal(err)
	}
	if j.Memory == "" {
		j.Memory = "2G"
	}
	if j.CPUs == 0 {
		j.CPUs = 2
	}
	if j.Timeout == 0 {
		j.Timeout = 10 * time.Minute
	}
	if j.Dir == "" {
		j.Dir = dir
	}
	spec, err := json.Marshal(map[string]any{"args": j.Args, "env": j.Env, "dir": j.Dir})
	if err != nil {
		tb.Fatal(err)
	}
	jobFile := filepath.Join(dir, "vmtest-job.json")
	if err := os.WriteFile(jobFile, spec, 0o644); err != nil {
		tb.Fatal(err)
	}
	console := filepath.Join(tb.TempDir(), "console")
	ctx, cancel := context.WithTimeout(context.Background(), j.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu,
		"-accel", "tcg,thread=multi", "-cpu", "max", "-smp", strconv.Itoa(j.CPUs), "-m", j.Memory,
		"-display", "none", "-monitor", "none", "-serial", "file:"+console, "-nic", "none", "-no-reboot",
		"-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 cgroup_no_v1=all vmtest.job="+jobFile,
		"-virtfs", "local,path=/,mount_tag=host,security_model=passthrough,readonly=on,multidevs=remap",
		"-virtfs", "local,path="+dir+",mount_tag=job,security_model=passthrough,multidevs=remap")
	var qout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &qout, &qout
	// A test binary killed by its timeout takes the machine with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	runErr := cmd.Run()
	con, _ := os.ReadFile(console)
	out, _ := os.ReadFile(filepath.Join(dir, "output"))
	r := Result{Exit: -1, Output: string(out), Console: string(con)}
	if ctx.Err() != nil {
		tb.Fatalf("the machine did not finish in %s:\n%s\nthe kernel's console, last lines:\n%s", j.Timeout, out, lastLines(r.Console, 30))
	}
	if runErr != nil {
		tb.Fatalf("qemu: %v\n%s", runErr, qout.String())
	}
	code, err := os.ReadFile(filepath.Join(dir, "exit"))
	if err != nil {
		tb.Fatalf("the machine stopped before its command ended:\n%s\nthe kernel's console, last lines:\n%s", out, lastLines(r.Console, 30))
	}
	if r.Exit, err = strconv.Atoi(string(code)); err != nil {
		tb.Fatalf("the machine's exit file: %v", err)
	}
	tb.Logf("the machine ran %s in %s", filepath.Base(j.Args[0]), time.Since(start).Round(time.Second))
	return r
}

// buildInitramfs writes the machine's initramfs in dir: vminit (built
// statically from this module's source) as /init, and the modules.
func buildInitramfs(dir, kdir string) (string, error) {
	bin := filepath.Join(dir, "init")
	build := exec.Command("go", "build", "-o", bin, "github.com/codeexec/codeexec/services/vmtest/vminit")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build vminit: %w\n%s", err, out)
	}
	path := filepath.Join(dir, "initramfs.cpio")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := cpio.NewWriter(f)
	add := func(name string, mode cpio.FileMode, src string) error {
		if src == "" {
			return w.WriteHeader(&cpio.Header{Name: name, Mode: cpio.TypeDir | mode})
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := w.WriteHeader(&cpio.Header{Name: name, Mode: cpio.TypeReg | mode, Size: int64(len(b))}); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	mods, err := filepath.Glob(filepath.Join(kdir, "modules", "*"))
	if err != nil || len(mods) == 0 {
		return "", fmt.Errorf("no modules in %s/modules: fetch the kernel again with bash scripts/vm-kernel.sh", kdir)
	}
	err = errors.Join(add("init", 0o755, bin), add("modules", 0o755, ""))
	for _, m := range mods {
		err = errors.Join(err, add("modules/"+filepath.Base(m), 0o644, m))
	}
	if err := errors.Join(err, w.Close()); err != nil {
		return "", fmt.Errorf("write the initramfs: %w", err)
	}
	return path, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
