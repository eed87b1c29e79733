package engine

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// cgroupControllers are the cgroup controllers a sandbox uses: memory and
// pids for the hard caps and for Usage, cpu for the bandwidth quota.
var cgroupControllers = []string{"memory", "pids", "cpu"}

// cgroupManager makes one cgroup per sandbox. All of them live under a
// codeexec-<pid> parent that is a child of the cgroup sandboxd itself is in
// (read from /proc/self/cgroup), so nesting works inside containers and under
// systemd, and two sandboxd processes never collide. It knows nothing about
// bwrap: any engine that starts host processes can use it.
type cgroupManager struct {
	logger *slog.Logger
	// v2 is true for the unified hierarchy; then parents has the single key "".
	v2 bool
	// parents maps a v1 controller name to its codeexec-<pid> directory.
	parents map[string]string
}

// cgroupSeq makes sandbox cgroup names unique among all managers of the
// process (they share the codeexec-<pid> parents).
var cgroupSeq atomic.Uint64

// parentRefs counts the managers using each codeexec-<pid> parent: all
// engines of one process share it, and the last Close removes it.
var (
	parentMu   sync.Mutex
	parentRefs = map[string]int{}
)

func acquireParent(dir string) error {
	parentMu.Lock()
	defer parentMu.Unlock()
	if parentRefs[dir] == 0 {
		removeStaleParents(filepath.Dir(dir))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	parentRefs[dir]++
	return nil
}

func releaseParent(dir string) error {
	parentMu.Lock()
	defer parentMu.Unlock()
	parentRefs[dir]--
	if parentRefs[dir] > 0 {
		return nil
	}
	delete(parentRefs, dir)
	return removeCgroupDir(dir)
}

// removeStaleParents deletes codeexec-<pid> parents under dir whose sandboxd
// is gone (killed before Close). It only removes cgroups without
// processes: a sandbox there would be a live one, not debris.
func removeStaleParents(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := strings.CutPrefix(e.Name(), "codeexec-")
		if !e.IsDir() || !ok {
			continue
		}
		if n, err := strconv.Atoi(pid); err != nil || n == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue // that sandboxd is alive
		}
		parent := filepath.Join(dir, e.Name())
		children, _ := os.ReadDir(parent)
		for _, c := range children {
			if c.IsDir() {
				_ = syscall.Rmdir(filepath.Join(parent, c.Name())) // EBUSY if in use
			}
		}
		_ = syscall.Rmdir(parent)
	}
}

// newCgroupManager prepares the codeexec-<pid> parents under root (normally
// /sys/fs/cgroup). It uses cgroup v2 when the unified hierarchy has the
// memory and pids controllers, else v1. It returns an error when neither can
// be used (no permission, controllers missing); the caller then falls back to
// rlimits.
func newCgroupManager(root string, logger *slog.Logger) (*cgroupManager, error) {
	self, err := readSelfCgroups("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("codeexec-%d", os.Getpid())
	m := &cgroupManager{logger: logger, parents: map[string]string{}}

	if unified, ok := unifiedMount(root); ok && self[""] != "" {
		m.v2 = true
		dir := filepath.Join(unified, self[""], name)
		if err := acquireParent(dir); err != nil {
			return nil, fmt.Errorf("create cgroup v2 parent: %w", err)
		}
		// A v2 cgroup with processes cannot delegate controllers to its
		// children ("no internal processes"); our parent holds none, so
		// enabling them here works whenever our own cgroup delegated them.
		if err := writeFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"), "+memory +pids +cpu"); err != nil {
			logger.Debug("cgroup v2: enabling controllers in own cgroup", "error", err)
		}
		if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory +pids +cpu"); err != nil {
			_ = releaseParent(dir)
			return nil, fmt.Errorf("enable cgroup v2 controllers in %s: %w", dir, err)
		}
		m.parents[""] = dir
		return m, nil
	}

	for _, c := range cgroupControllers {
		mount, ok := v1Mount(root, c)
		if !ok {
			continue
		}
		path, ok := self[c]
		if !ok {
			continue
		}
		dir := filepath.Join(mount, path, name)
		if err := acquireParent(dir); err != nil {
			m.logger.Warn("cgroup v1 controller unusable", "cgroup.controller", c, "error", err)
			continue
		}
		m.parents[c] = dir
	}
	if m.parents["memory"] == "" || m.parents["pids"] == "" {
		_ = m.Close()
		return nil, fmt.Errorf("cgroup v1 memory and pids controllers not usable under %s", root)
	}
	return m, nil
}

// readSelfCgroups parses /proc/self/cgroup into controller -> path. The v2
// entry ("0::/path") has the key "".
func readSelfCgroups(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read own cgroups: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read own cgroups: %w", err)
	}
	return out, nil
}

// unifiedMount returns the cgroup v2 mount under root when it offers the
// memory and pids controllers: root itself (pure v2) or root/unified (hybrid).
func unifiedMount(root string) (string, bool) {
	for _, dir := range []string{root, filepath.Join(root, "unified")} {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(b))
		has := func(c string) bool {
			for _, f := range fields {
				if f == c {
					return true
				}
			}
			return false
		}
		if has("memory") && has("pids") {
			return dir, true
		}
	}
	return "", false
}

// v1Mount returns where the v1 hierarchy of controller is mounted under root.
// Co-mounted controllers (cpu,cpuacct) are usually reachable both ways.
func v1Mount(root, controller string) (string, bool) {
	candidates := []string{filepath.Join(root, controller)}
	if controller == "cpu" {
		candidates = append(candidates, filepath.Join(root, "cpu,cpuacct"))
	}
	for _, dir := range candidates {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			return dir, true
		}
	}
	return "", false
}

// Close removes the codeexec-<pid> parents. Sandbox cgroups must already be
// gone; a parent that still has children is left and reported.
func (m *cgroupManager) Close() error {
	var errs []error
	for _, dir := range m.parents {
		if err := releaseParent(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Create makes the cgroup of one sandbox and writes its limits. id is only
// used to make the directory name readable.
func (m *cgroupManager) Create(id string, lim Limits) (*cgroup, error) {
	name := fmt.Sprintf("%s-%d", sanitizeCgroupName(id), cgroupSeq.Add(1))
	g := &cgroup{v2: m.v2, dirs: map[string]string{}}
	for c, parent := range m.parents {
		if c == "cpu" && lim.CPUs <= 0 {
			continue
		}
		dir := filepath.Join(parent, name)
		// MkdirAll: a parent can vanish if another sandboxd took it for
		// debris (removeStaleParents); recreating it is harmless.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			_ = g.Remove()
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
		g.dirs[c] = dir
	}
	if err := g.setLimits(lim); err != nil {
		_ = g.Remove()
		return nil, err
	}
	return g, nil
}

// sanitizeCgroupName keeps [A-Za-z0-9_.-] of id, at most 40 bytes.
func sanitizeCgroupName(id string) string {
	b := make([]byte, 0, len(id))
	for i := 0; i < len(id) && len(b) < 40; i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			b = append(b, c)
		}
	}
	if len(b) == 0 || b[0] == '.' {
		return "sandbox"
	}
	return string(b)
}

// cgroup is the cgroup of one sandbox: one directory per v1 controller, or
// one v2 directory under the key "".
type cgroup struct {
	v2   bool
	dirs map[string]string
}

func (g *cgroup) dir(controller string) string {
	if g.v2 {
		return g.dirs[""]
	}
	return g.dirs[controller]
}

// HasMemory and HasPids report whether those caps are enforced by the cgroup
// (otherwise the engine must use rlimits).
func (g *cgroup) HasMemory() bool { return g != nil && g.dir("memory") != "" }

// HasPids reports whether the pids cap is enforced by the cgroup.
func (g *cgroup) HasPids() bool { return g != nil && g.dir("pids") != "" }

// ProcsFiles lists the cgroup.procs files a process must write its pid to.
func (g *cgroup) ProcsFiles() []string {
	var out []string
	for _, d := range g.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

func (g *cgroup) setLimits(lim Limits) error {
	type setting struct{ controller, file, value string }
	var s []setting
	if lim.MemoryBytes > 0 {
		v := strconv.FormatInt(lim.MemoryBytes, 10)
		if g.v2 {
			s = append(s, setting{"memory", "memory.max", v}, setting{"memory", "memory.swap.max", "0"})
		} else {
			// memsw (memory+swap) must be set after, and be >=, the memory limit.
			s = append(s, setting{"memory", "memory.limit_in_bytes", v}, setting{"memory", "memory.memsw.limit_in_bytes", v})
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
func (g *cgroup) Usage() Usage {
	var u Usage
	if d := g.dir("memory"); d != "" {
		if g.v2 {
			u.MemoryPeakBytes = readInt(filepath.Join(d, "memory.peak"))
			u.OOMKilled = readKeyed(filepath.Join(d, "memory.events"), "oom_kill") > 0
		} else {
			u.MemoryPeakBytes = readInt(filepath.Join(d, "memory.max_usage_in_bytes"))
			u.OOMKilled = readKeyed(filepath.Join(d, "memory.oom_control"), "oom_kill") > 0
		}
	}
	if d := g.dir("pids"); d != "" {
		u.PidsLimitHit = readKeyed(filepath.Join(d, "pids.events"), "max") > 0
	}
	return u
}

// Kill sends SIGKILL to every process in the cgroup. The pids controller is
// the authoritative member list (threads and forks included).
func (g *cgroup) Kill() {
	for _, c := range []string{"pids", "memory", "cpu"} {
		d := g.dir(c)
		if d == "" {
			continue
		}
		for _, pid := range readPids(filepath.Join(d, "cgroup.procs")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return
	}
}

// Remove kills what is left and deletes the cgroup directories, retrying
// briefly while the kernel finishes tearing the processes down.
func (g *cgroup) Remove() error {
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

// removeCgroupDir rmdirs a cgroup, retrying for up to a second on EBUSY
// (exiting processes are still being released).
func removeCgroupDir(dir string) error {
	deadline := time.Now().Add(time.Second)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(10 * time.Millisecond)
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
	for _, line := range strings.Split(string(b), "\n") {
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
