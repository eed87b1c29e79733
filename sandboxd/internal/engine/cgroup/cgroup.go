// Package cgroup gives each sandbox its own cgroup, v1 or v2: memory, pids
// and cpu caps, the usage the kernel records, and a sure way to kill every
// process in it. It knows nothing about how the sandbox is started.
package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// Group is the cgroup of one sandbox: one directory per v1 controller, or
// one v2 directory under the key "".
type Group struct {
	v2   bool
	dirs map[string]string
	// fmu orders Freeze and Kill: a freeze after a kill would leave the
	// killed processes frozen, their SIGKILL pending for good on v1.
	fmu    sync.Mutex
	killed bool
}

func (g *Group) dir(controller string) string {
	if g.v2 {
		return g.dirs[""]
	}
	return g.dirs[controller]
}

// HasMemory and HasPids report whether those caps are enforced by the cgroup
// (otherwise the engine must use rlimits).
func (g *Group) HasMemory() bool { return g != nil && g.dir("memory") != "" }

// HasPids reports whether the pids cap is enforced by the cgroup.
func (g *Group) HasPids() bool { return g != nil && g.dir("pids") != "" }

// Dirs maps each controller to the group's directory under it ("" on
// cgroup v2).
func (g *Group) Dirs() map[string]string { return maps.Clone(g.dirs) }

// ProcsFiles lists the cgroup.procs files a process must write its pid to.
func (g *Group) ProcsFiles() []string {
	var out []string
	for _, d := range g.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// SelfJoinFiles lists the files through which a single-threaded process
// joins the group itself, by writing "0" to each. On cgroup v1 that is
// each controller's tasks file: a thread that moves itself skips the
// global lock (cgroup_threadgroup_rwsem) a move by PID takes, and with it
// the RCU grace period that lock's writer waits for after a quiet moment
// (4–12 ms here, against 15–50 µs). On v2, where a domain cgroup takes
// whole processes only, it is cgroup.procs, which takes the lock.
// Whoever opens the files (root) lends its permission to the writer.
func (g *Group) SelfJoinFiles() []string {
	name := "tasks"
	if g.v2 {
		name = "cgroup.procs"
	}
	var out []string
	for _, d := range g.dirs {
		out = append(out, filepath.Join(d, name))
	}
	return out
}

// socketShare is the part of a v1 memory limit that socket buffers get
// (memory.kmem.tcp.limit_in_bytes, which caps every protocol that counts
// its buffers: TCP, UDP, SCTP); the rest is memory.limit_in_bytes.
func socketShare(limit int64) int64 { return limit / 8 }

// tcpLimitFile is cgroup v1's socket-buffer limit, which kernels without
// v1 kernel-memory accounting lack.
const tcpLimitFile = "memory.kmem.tcp.limit_in_bytes"

func (g *Group) setLimits(lim engine.Limits) error {
	type setting struct{ controller, file, value string }
	var s []setting
	if lim.MemoryBytes > 0 {
		v := strconv.FormatInt(lim.MemoryBytes, 10)
		if g.v2 {
			s = append(s, setting{"memory", "memory.max", v}, setting{"memory", "memory.swap.max", "0"})
		} else {
			// v2 counts socket buffers in memory.current; v1 counts them
			// apart, and only once a TCP limit is set: the limit is split
			// so that the two together stay within it.
			var tcp []setting
			if _, err := os.Stat(filepath.Join(g.dir("memory"), tcpLimitFile)); err == nil {
				share := socketShare(lim.MemoryBytes)
				v = strconv.FormatInt(lim.MemoryBytes-share, 10)
				tcp = append(tcp, setting{"memory", tcpLimitFile, strconv.FormatInt(share, 10)})
			}
			// memsw (memory+swap) must be set after, and be >=, the memory limit.
			s = append(s, setting{"memory", "memory.limit_in_bytes", v}, setting{"memory", "memory.memsw.limit_in_bytes", v})
			s = append(s, tcp...)
		}
	}
	if lim.Pids > 0 {
		s = append(s, setting{"pids", "pids.max", strconv.Itoa(lim.Pids)})
	}
	if lim.CPUs > 0 {
		const period = 100000
		quota := int64(lim.CPUs * period)
		if quota < 1000 {
			quota = 1000 // the kernel's minimum quota is 1ms
		}
		if g.v2 {
			s = append(s, setting{"cpu", "cpu.max", fmt.Sprintf("%d %d", quota, period)})
		} else {
			s = append(s, setting{"cpu", "cpu.cfs_period_us", strconv.Itoa(period)},
				setting{"cpu", "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)})
		}
	}
	for _, x := range s {
		d := g.dir(x.controller)
		if d == "" {
			continue
		}
		path := filepath.Join(d, x.file)
		err := writeFile(path, x.value)
		if err != nil && errors.Is(err, os.ErrNotExist) && strings.Contains(x.file, "sw") {
			continue // no swap accounting in this kernel: nothing to cap
		}
		if err != nil {
			return fmt.Errorf("set cgroup limit %s=%s: %w", x.file, x.value, err)
		}
	}
	return nil
}

// Usage reads what the kernel recorded for the cgroup.
func (g *Group) Usage() engine.Usage {
	var u engine.Usage
	if d := g.dir("memory"); d != "" {
		if g.v2 {
			u.MemoryPeakBytes = readInt(filepath.Join(d, "memory.peak"))
			u.OOMKilled = readKeyed(filepath.Join(d, "memory.events"), "oom_kill") > 0
		} else {
			u.MemoryPeakBytes = readInt(filepath.Join(d, "memory.max_usage_in_bytes"))
			u.OOMKilled = readKeyed(filepath.Join(d, "memory.oom_control"), "oom_kill") > 0
		}
	}
	u.PidsLimitHit = g.PidsLimitHit()
	if d := g.dir("pids"); d != "" {
		u.PidsCurrent = readInt(filepath.Join(d, "pids.current"))
	}
	return u
}

// PidsLimitHit reports whether a fork or clone in the group has failed at
// its pids limit (pids.events' max count), as Usage does.
func (g *Group) PidsLimitHit() bool {
	p := g.pidsEvents()
	return p != "" && readKeyed(p, "max") > 0
}

// pidsEvents is the path of the group's pids.events, or "" without a pids
// controller.
func (g *Group) pidsEvents() string {
	if d := g.dir("pids"); d != "" {
		return filepath.Join(d, "pids.events")
	}
	return ""
}

// OfPID returns the memory and pids cgroups of a host PID (a container's,
// say), or nil when they cannot be seen from here.
func OfPID(pid int) *Group {
	own, err := readSelfCgroups(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return nil
	}
	const root = "/sys/fs/cgroup"
	if dir, ok := unifiedMount(root); ok && own[""] != "" && dir == root {
		d := filepath.Join(dir, own[""])
		if _, err := os.Stat(d); err == nil {
			return &Group{v2: true, dirs: map[string]string{"": d}}
		}
		return nil
	}
	g := &Group{dirs: map[string]string{}}
	for _, ctrl := range []string{"memory", "pids"} {
		mnt, ok := v1Mount(root, ctrl)
		if !ok || own[ctrl] == "" {
			continue
		}
		d := filepath.Join(mnt, own[ctrl])
		if _, err := os.Stat(d); err == nil {
			g.dirs[ctrl] = d
		}
	}
	if len(g.dirs) == 0 {
		return nil
	}
	return g
}

// Kill sends SIGKILL to every process in the cgroup: through cgroup.kill on
// v2, else to each member, the pids controller being the authoritative
// list (threads and forks included). The group is
// then thawed, in case it was frozen: on cgroup v1 a frozen process acts
// on no signal, SIGKILL included, until it runs again; and it is not
// frozen again (Freeze fails from now on).
func (g *Group) Kill() {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	g.killed = true
	// cgroup.kill (v2, Linux 5.14+) kills every process at once, forks
	// in flight included.
	if !g.v2 || writeFile(filepath.Join(g.dir("memory"), "cgroup.kill"), "1") != nil {
		g.killEach()
	}
	if file, value, err := g.freezer(false); err == nil {
		_ = writeFile(file, value)
	}
}

// killEach sends SIGKILL to each process the group lists.
func (g *Group) killEach() {
	for _, c := range []string{"pids", "memory", "cpu"} {
		d := g.dir(c)
		if d == "" {
			continue
		}
		for _, pid := range readPids(filepath.Join(d, "cgroup.procs")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		break
	}
}

// Remove kills what is left and deletes the cgroup directories, retrying
// briefly while the kernel finishes tearing the processes down.
func (g *Group) Remove() error {
	if g == nil {
		return nil
	}
	g.Kill()
	var errs []error
	for _, d := range g.dirs {
		if err := removeCgroupDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroupDir rmdirs a cgroup, retrying for up to two seconds on EBUSY.
// bwrap exits as soon as the sandbox's PID 1 reports its status, so that
// process is usually still being torn down for a moment: the first retries
// come quickly (0.5 ms, doubling up to 50 ms).
func removeCgroupDir(dir string) error {
	deadline := time.Now().Add(2 * time.Second)
	delay := 500 * time.Microsecond
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// readKeyed returns the value of "key N" in a flat-keyed cgroup file.
func readKeyed(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return keyed(b, key)
}

// keyed returns the value of "key N" in the text of a flat-keyed cgroup
// file.
func keyed(b []byte, key string) int64 {
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// TCPAccountingV1 reports whether this host's memory cgroups are v1 with
// socket-buffer accounting, which a container runtime does not switch on.
func TCPAccountingV1() bool {
	if _, v2 := unifiedMount("/sys/fs/cgroup"); v2 {
		return false
	}
	mnt, ok := v1Mount("/sys/fs/cgroup", "memory")
	if !ok {
		return false
	}
	_, err := os.Stat(filepath.Join(mnt, tcpLimitFile))
	return err == nil
}

// ShareSockets splits a v1 memory limit of limit bytes, set by someone else
// (a container runtime), as Manager.Create does: socket buffers get their
// share and memory the rest, so that the two together stay within it. On
// v2, which counts sockets in memory already, it does nothing.
func (g *Group) ShareSockets(limit int64) error {
	d := g.dir("memory")
	if g.v2 || d == "" || limit <= 0 {
		return nil
	}
	share := socketShare(limit)
	rest := strconv.FormatInt(limit-share, 10)
	// Lower memory before memsw, which must stay >= it.
	for _, x := range [][2]string{{"memory.limit_in_bytes", rest}, {"memory.memsw.limit_in_bytes", rest}, {tcpLimitFile, strconv.FormatInt(share, 10)}} {
		err := writeFile(filepath.Join(d, x[0]), x[1])
		if err != nil && errors.Is(err, os.ErrNotExist) && strings.Contains(x[0], "sw") {
			continue
		}
		if err != nil {
			return fmt.Errorf("set cgroup limit %s=%s: %w", x[0], x[1], err)
		}
	}
	return nil
}
