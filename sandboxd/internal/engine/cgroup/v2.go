package cgroup

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// v2Controllers is what sandbox cgroups need enabled in their parent's
// cgroup.subtree_control on the unified hierarchy.
const v2Controllers = "+memory +pids +cpu"

// SelfLeaf is the leaf sandboxd moves itself into, in its codeexec-<pid>
// parent, when its own cgroup must hand controllers down (see
// setupV2Parent); it stays there after Close.
const SelfLeaf = "sandboxd"

// ownCgroups is /proc/self/cgroup as it was at the first call: sandboxd may
// move itself into a leaf below on cgroup v2, and later engines must still
// find the same codeexec-<pid> parent.
var ownCgroups = sync.OnceValues(func() (map[string]string, error) { return readSelfCgroups("/proc/self/cgroup") })

// setupV2Parent makes own/name ready to hold sandbox cgroups with the
// memory, pids and cpu controllers, and returns its path.
//
// cgroup v2 forbids a cgroup that has processes from enabling controllers
// for its children ("no internal processes"), and sandboxd's own cgroup
// holds sandboxd. When enabling fails with EBUSY, sandboxd moves itself into
// own/name/sandboxd (a leaf) and retries: that works when sandboxd was the
// only process in its cgroup, which is the usual case for a systemd service
// or a container. The move is not undone (own then has controllers enabled
// and cannot take a process back), so on cgroup v2 in that case Close
// leaves own/name/sandboxd, and the next sandboxd's stale-parent cleanup
// removes it. TestManagerOnCgroupV2 runs this path in a vmtest machine.
func setupV2Parent(own, name string, logger *slog.Logger) (string, error) {
	dir := filepath.Join(own, name)
	if err := acquireParent(dir); err != nil {
		return "", fmt.Errorf("create cgroup v2 parent: %w", err)
	}
	fail := func(err error) (string, error) {
		_ = releaseParent(dir)
		return "", fmt.Errorf("cgroup v2: cannot delegate memory, pids and cpu below %s "+
			"(run sandboxd alone in a cgroup with those controllers, e.g. systemd Delegate=yes): %w", own, err)
	}
	err := writeFile(filepath.Join(own, "cgroup.subtree_control"), v2Controllers)
	if errors.Is(err, syscall.EBUSY) {
		leaf := filepath.Join(dir, SelfLeaf)
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return fail(err)
		}
		if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
			return fail(err)
		}
		logger.Info("cgroup v2: moved sandboxd into a leaf cgroup so it can delegate controllers", "cgroup.path", leaf)
		err = writeFile(filepath.Join(own, "cgroup.subtree_control"), v2Controllers)
	}
	if err != nil {
		return fail(err)
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), v2Controllers); err != nil {
		return fail(err)
	}
	return dir, nil
}
