// Command vminit is the init of vmtest's virtual machines. It loads the
// kernel modules the initramfs carries, makes the host's root file system
// (shared read-only over 9p) the machine's root under a tmpfs overlay,
// mounts the job's directory writable at the path it has on the host,
// mounts cgroup v2 alone, runs the job's command and powers off.
//
// Like systemd, it brings lo up, sets fs.file-max to its maximum and
// starts the job in a cgroup of its own. It is built statically
// (CGO_ENABLED=0) by vmtest and runs as PID 1; the job is the JSON file
// named by vmtest.job= on the kernel command line.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// job is what vmtest.Run writes.
type job struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
}

func main() {
	err := run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vminit: %v\n", err)
	}
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

func run() error {
	for _, m := range []struct{ src, dst, fs string }{
		{"dev", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sys", "/sys", "sysfs"},
	} {
		if err := mount(m.src, m.dst, m.fs, 0, ""); err != nil {
			return err
		}
	}
	if err := loadModules("/modules"); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	// As systemd does at boot: the file table's bound is memory.
	if err := os.WriteFile("/proc/sys/fs/file-max", []byte("9223372036854775807"), 0o644); err != nil {
		return err
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return err
	}
	jobPath := ""
	for _, f := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(f, "vmtest.job="); ok {
			jobPath = v
		}
	}
	if jobPath == "" {
		return fmt.Errorf("no vmtest.job= on the kernel command line: %s", cmdline)
	}
	jobDir := filepath.Dir(jobPath)
	if err := newRoot(jobDir); err != nil {
		return err
	}
	b, err := os.ReadFile(jobPath)
	if err != nil {
		return err
	}
	var j job
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("%s: %w", jobPath, err)
	}
	code := runJob(j, jobDir)
	return os.WriteFile(filepath.Join(jobDir, "exit"), []byte(strconv.Itoa(code)), 0o644)
}

// newRoot mounts the host's root (9p tag "host") read-only below a tmpfs
// overlay, the job's directory (tag "job") at its host path,
// fresh /dev, /proc, /sys, /run and cgroup v2, and makes it the root.
func newRoot(jobDir string) error {
	// The host's root is read-only, so caching it is safe; the job's
	// directory is not cached, so that the host sees output as it comes.
	const nine = "trans=virtio,version=9p2000.L,msize=524288"
	if err := mount("host", "/lower", "9p", unix.MS_RDONLY, nine+",cache=loose"); err != nil {
		return err
	}
	if err := mount("rw", "/rw", "tmpfs", 0, "mode=755"); err != nil {
		return err
	}
	for _, d := range []string{"/rw/upper", "/rw/work"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := mount("overlay", "/newroot", "overlay", 0, "lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work"); err != nil {
		return err
	}
	for _, m := range []struct{ src, dst, fs, data string }{
		{"dev", "/dev", "devtmpfs", ""}, {"proc", "/proc", "proc", ""}, {"sys", "/sys", "sysfs", ""},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", ""},
		{"run", "/run", "tmpfs", "mode=755"}, {"job", jobDir, "9p", nine},
	} {
		if err := mount(m.src, "/newroot"+m.dst, m.fs, 0, m.data); err != nil {
			return err
		}
	}
	// Moved over / (as switch_root does) rather than merely chrooted into:
	// the kernel refuses new user namespaces to a chrooted process.
	if err := os.Chdir("/newroot"); err != nil {
		return err
	}
	if err := mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return err
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	return os.Chdir("/")
}

// runJob runs the command with its output in the job's directory and
// returns its exit code (-1 when it could not start or was killed).
func runJob(j job, jobDir string) int {
	out, err := os.Create(filepath.Join(jobDir, "output"))
	if err != nil {
		return -1
	}
	defer out.Close()
	for _, kv := range j.Env { // so that the command is found on the job's PATH
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			_ = os.Setenv("PATH", v)
		}
	}
	cmd := exec.Command(j.Args[0], j.Args[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = j.Env, j.Dir, out, out
	// The command starts in a cgroup of its own with the controllers
	// enabled above it, as systemd starts a service.
	cg, err := serviceCgroup()
	if err != nil {
		fmt.Fprintf(out, "vminit: %v\n", err)
		return -1
	}
	defer cg.Close()
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(out, "\nvminit: %v\n", err)
		if cmd.ProcessState != nil {
			return cmd.ProcessState.ExitCode()
		}
		return -1
	}
	return 0
}

// serviceCgroup makes /sys/fs/cgroup/job.service with the memory, pids and
// cpu controllers enabled for it.
func serviceCgroup() (*os.File, error) {
	if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+memory +pids +cpu"), 0o644); err != nil {
		return nil, fmt.Errorf("enable cgroup controllers: %w", err)
	}
	dir := "/sys/fs/cgroup/job.service"
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	return os.Open(dir)
}

// loopbackUp brings lo up, the machine's only network device.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// loadModules loads the modules named in dir/order, in that order.
func loadModules(dir string) error {
	order, err := os.ReadFile(filepath.Join(dir, "order"))
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(string(order)) {
		f, err := os.Open(filepath.Join(dir, name+".ko"))
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load module %s: %w", name, err)
		}
	}
	return nil
}

// mount mounts src on dst, which it makes first when it is missing.
func mount(src, dst, fs string, flags uintptr, data string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount(src, dst, fs, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", fs, dst, err)
	}
	return nil
}
