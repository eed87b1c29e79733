package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// controllers are the cgroup v1 controllers a sandbox uses: memory and
// pids for the hard caps and for engine.Usage, cpu for the bandwidth quota,
// freezer to pause it (Group.Freeze). Only memory and pids are required.
// (v2 has cgroup.freeze in every cgroup, with no controller to enable.)
var controllers = []string{"memory", "pids", "cpu", "freezer"}

// Manager makes one cgroup per sandbox. All of them live under a
// codeexec-<pid> parent that is a child of the cgroup sandboxd itself is in
// (read from /proc/self/cgroup), so nesting works inside containers and under
// systemd, and two sandboxd processes never collide. It knows nothing about
// bwrap: any engine that starts host processes can use it.
type Manager struct {
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
	if _, err := os.Stat(filepath.Join(dir, SelfLeaf)); err == nil {
		return nil // sandboxd lives in it (cgroup v2, see setupV2Parent)
	}
	return removeCgroupDir(dir)
}

// removeStaleParents deletes codeexec-<pid> parents under dir whose sandboxd
// is gone (killed before Close). It only removes cgroups without
// processes: a sandbox there would be a live one, not debris. A sandbox
// left frozen (sandboxd died while it was paused) is thawed: the kill its
// death signal sent it waits for that.
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
				child := filepath.Join(parent, c.Name())
				if thawStale(child) {
					_ = removeCgroupDir(child) // its processes are dying
					continue
				}
				_ = syscall.Rmdir(child) // EBUSY if in use
			}
		}
		_ = syscall.Rmdir(parent)
	}
}

// thawStale thaws the cgroup dir if it is frozen, and reports whether it
// was.
func thawStale(dir string) bool {
	if b, err := os.ReadFile(filepath.Join(dir, "freezer.state")); err == nil && strings.TrimSpace(string(b)) != "THAWED" {
		return writeFile(filepath.Join(dir, "freezer.state"), "THAWED") == nil
	}
	if readInt(filepath.Join(dir, "cgroup.freeze")) == 1 {
		return writeFile(filepath.Join(dir, "cgroup.freeze"), "0") == nil
	}
	return false
}

// NewManager prepares the codeexec-<pid> parents under root (normally
// /sys/fs/cgroup). It uses cgroup v2 when the unified hierarchy has the
// memory and pids controllers, else v1. It returns an error when neither can
// be used (no permission, controllers missing); the caller then falls back to
// rlimits.
func NewManager(root string, logger *slog.Logger) (*Manager, error) {
	m, err := newManager(root, logger)
	if err == nil {
		logger.Debug("cgroups ready", "cgroup.v2", m.v2, "cgroup.parents", m.parents)
	}
	return m, err
}

func newManager(root string, logger *slog.Logger) (*Manager, error) {
	self, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("codeexec-%d", os.Getpid())
	m := &Manager{logger: logger, parents: map[string]string{}}

	if unified, ok := unifiedMount(root); ok && self[""] != "" {
		dir, err := setupV2Parent(filepath.Join(unified, self[""]), name, logger)
		if err != nil {
			return nil, err
		}
		m.v2 = true
		m.parents[""] = dir
		return m, nil
	}

	for _, c := range controllers {
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

// V2 reports whether the sandboxes' cgroups are on the unified hierarchy.
func (m *Manager) V2() bool { return m.v2 }

// Parents lists the codeexec-<pid> directories that hold the sandbox
// cgroups, one per controller (one on cgroup v2).
func (m *Manager) Parents() []string { return slices.Collect(maps.Values(m.parents)) }

// Close removes the codeexec-<pid> parents. Sandbox cgroups must already be
// gone; a parent that still has children is left and reported.
func (m *Manager) Close() error {
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
func (m *Manager) Create(id string, lim engine.Limits) (*Group, error) {
	name := cgroupName(id)
	g := &Group{v2: m.v2, dirs: map[string]string{}}
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

// cgroupName is a unique cgroup directory name that shows id.
func cgroupName(id string) string {
	return fmt.Sprintf("%s-%d", sanitizeCgroupName(id), cgroupSeq.Add(1))
}

// Rename gives the cgroup a name that shows id (a spare launcher's cgroup
// gets its sandbox's). The directories stay where they are; on error some
// may keep the old name, which is harmless. cgroup v2 cannot rename a
// cgroup (EPERM: the kernel renames on v1 only), so there the spare's
// name stays.
func (g *Group) Rename(id string) error {
	if g == nil || g.v2 {
		return nil
	}
	name := cgroupName(id)
	for c, dir := range g.dirs {
		to := filepath.Join(filepath.Dir(dir), name)
		if err := os.Rename(dir, to); err != nil {
			return fmt.Errorf("rename cgroup: %w", err)
		}
		g.dirs[c] = to
	}
	return nil
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
