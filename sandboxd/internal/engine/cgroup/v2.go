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

// setupV2Parent makes a codeexec-<pid> parent (name) ready to hold sandbox
// cgroups with the memory, pids and cpu controllers, and returns its path.
//
// cgroup v2 forbids a cgroup that has processes from enabling controllers
// for its children ("no internal processes"), and sandboxd's own cgroup
// holds sandboxd. When enabling fails with EBUSY, sandboxd moves itself into
// own/name/sandboxd (a leaf) and retries: that works when sandboxd was the
// only process in its cgroup, which is the usual case for a systemd service
// or a container. The move is not undone (own then has controllers enabled
// and cannot take a process back), so on cgroup v2 in that case Close
// leaves own/name/sandboxd; the service manager removes it with own.
// When other processes share own (a client that started codeexec, a
// shell, a test), sandboxd moves back and makes the parent beside own
// instead, in own's parent, which hands the controllers down already; the
// sandboxes are then outside own's limits, and a warning says so. TestManagerOnCgroupV2 and TestManagerBesideABusyCgroupV2 run these
// paths in a vmtest machine.
func setupV2Parent(own, name string, logger *slog.Logger) (string, error) {
	v2Mu.Lock()
	defer v2Mu.Unlock()
	var err error
	if !v2Beside[own] {
		var dir string
		if dir, err = delegateBelow(own, name, logger); err == nil {
			return dir, nil
		}
	}
	if v2Beside[own] || errors.Is(err, syscall.EBUSY) {
		dir, besideErr := delegateBeside(own, name)
		if besideErr == nil {
			if !v2Beside[own] {
				logger.Warn("cgroup v2: other processes share sandboxd's cgroup, so the sandboxes' cgroups are made beside it, outside its limits",
					"cgroup.own", own, "cgroup.path", dir)
				v2Beside[own] = true
			}
			return dir, nil
		}
		err = errors.Join(err, besideErr)
	}
	return "", fmt.Errorf("cgroup v2: cannot delegate memory, pids and cpu below %s "+
		"(run sandboxd alone in a cgroup with those controllers, e.g. systemd Delegate=yes): %w", own, err)
}

// v2Mu serializes the choice of a parent, which may move the process, for
// the managers of one process; v2Beside keeps the cgroups found shared,
// whose later managers go beside at once.
var (
	v2Mu     sync.Mutex
	v2Beside = map[string]bool{}
)

// delegateBelow makes own/name with the controllers, moving sandboxd into
// own/name/SelfLeaf when own must hand them down and sandboxd is in it.
func delegateBelow(own, name string, logger *slog.Logger) (string, error) {
	dir := filepath.Join(own, name)
	if err := acquireParent(dir); err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		_ = releaseParent(dir)
		return "", err
	}
	err := writeFile(filepath.Join(own, "cgroup.subtree_control"), v2Controllers)
	if errors.Is(err, syscall.EBUSY) {
		leaf := filepath.Join(dir, SelfLeaf)
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return fail(err)
		}
		if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
			_ = removeCgroupDir(leaf)
			return fail(err)
		}
		err = writeFile(filepath.Join(own, "cgroup.subtree_control"), v2Controllers)
		if errors.Is(err, syscall.EBUSY) {
			// Others are in own: back to where sandboxd was.
			if back := writeFile(filepath.Join(own, "cgroup.procs"), strconv.Itoa(os.Getpid())); back != nil {
				// Not EBUSY: sandboxd is in the leaf, and must not go beside.
				return "", fmt.Errorf("others share %s (%s), and moving back into it failed: %w", own, err.Error(), back)
			}
			_ = removeCgroupDir(leaf)
			return fail(err)
		}
		if err == nil {
			logger.Info("cgroup v2: moved sandboxd into a leaf cgroup so it can delegate controllers", "cgroup.path", leaf)
		}
	}
	if err != nil {
		return fail(err)
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), v2Controllers); err != nil {
		return fail(err)
	}
	return dir, nil
}

// delegateBeside makes name in own's parent with the controllers.
func delegateBeside(own, name string) (string, error) {
	parent := filepath.Dir(own)
	if _, err := os.Stat(filepath.Join(parent, "cgroup.controllers")); err != nil {
		return "", fmt.Errorf("no cgroup above %s to make it in: %w", own, err)
	}
	dir := filepath.Join(parent, name)
	if err := acquireParent(dir); err != nil {
		return "", err
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), v2Controllers); err != nil {
		_ = releaseParent(dir)
		return "", err
	}
	return dir, nil
}
