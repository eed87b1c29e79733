package sandboxd

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What the host has one of for all sandboxes, shared out among them at
// start so that every sandbox at its limits fits: the kernel's file table,
// and the limits of queued signals and locked memory that the sandboxes'
// user namespaces all draw on (engine.Limits.PendingSignals).

// Each sandbox's share of the host-wide limits, at most.
const (
	defaultPendingSignals = 1024
	defaultLockedBytes    = 64 << 10
	// minPendingSignals is the least share a sandbox works with: Python
	// queues a few (SIGCHLD, timers).
	minPendingSignals = 16
)

// fileTableShare is the part of the host's free file table that all
// sandboxes together may hold; the rest stays the host's.
const fileTableShare = 0.9

// mappedFileBytes is what a file held only by a memory mapping (opened,
// mapped, its descriptor closed) costs a sandbox's memory cgroup: its file
// and its mapping. One sandbox of 512 MiB held 1,066,777 such files
// before it ran out of memory (docs/SANDBOX.md).
const mappedFileBytes = 440

// hostShares gives cfg's limits what the host shares out among its
// sandboxes (shareOut), and notes at start what could still fill the
// file table.
func hostShares(cfg Config, logger *slog.Logger) (Limits, error) {
	host := readHostLimits()
	lim, err := shareOut(cfg.Limits, sandboxCount(cfg), host)
	if err != nil {
		return lim, err
	}
	if w := mappedFilesWarning(lim, sandboxCount(cfg), host); w != "" {
		// A note, not a warning: hosts without systemd all have such a
		// table, and the descriptors, which a sandbox holds without
		// spending its memory, fit (shareOut).
		logger.Info("the host's file table may not hold every sandbox at its limits", "advice", w)
	}
	return lim, nil
}

// hostLimits are what the host shares out among the sandboxes.
type hostLimits struct {
	// fileMax is fs.file-max and filesInUse the files allocated at start
	// (fs.file-nr); 0 for fileMax when unknown.
	fileMax, filesInUse uint64
	// sigPending and memLock are this process's soft limits, which the
	// sandboxes' user namespaces keep as the bound of all they hold.
	sigPending, memLock uint64
}

// readHostLimits reads the host's limits now.
func readHostLimits() hostLimits {
	var h hostLimits
	if b, err := os.ReadFile("/proc/sys/fs/file-max"); err == nil {
		h.fileMax, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	if b, err := os.ReadFile("/proc/sys/fs/file-nr"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			h.filesInUse, _ = strconv.ParseUint(f[0], 10, 64)
		}
	}
	h.sigPending, h.memLock = math.MaxUint64, math.MaxUint64
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_SIGPENDING, &lim) == nil && lim.Cur != unix.RLIM_INFINITY {
		h.sigPending = lim.Cur
	}
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil && lim.Cur != unix.RLIM_INFINITY {
		h.memLock = lim.Cur
	}
	return h
}

// shareOut gives lim the host-shared limits of one of n sandboxes (n is 0
// when their number has no cap): its descriptor cap when none is set, and
// its shares of queued signals and locked memory. It refuses limits with
// which n sandboxes at their limits would not fit, saying what to change.
func shareOut(lim Limits, n int, h hostLimits) (Limits, error) {
	lim.PendingSignals, lim.LockedBytes = defaultPendingSignals, defaultLockedBytes
	if n <= 0 {
		if lim.OpenFiles == 0 {
			lim.OpenFiles = DefaultOpenFiles
		}
		return lim, nil
	}
	lim.PendingSignals = int64(min(uint64(lim.PendingSignals), h.sigPending/uint64(n)))
	lim.LockedBytes = int64(min(uint64(lim.LockedBytes), h.memLock/uint64(n)))
	if lim.PendingSignals < minPendingSignals {
		return lim, fmt.Errorf("the host's limit of %d queued signals, shared by %d sandboxes (--max-sessions plus --pool), leaves each fewer than %d: "+
			"lower CODEEXEC_MAX_SESSIONS (--max-sessions) or raise the limit where codeexec starts (ulimit -i, LimitSIGPENDING= under systemd)",
			h.sigPending, n, minPendingSignals)
	}
	return fitFileTable(lim, n, h)
}

// mappedFilesWarning says, when n sandboxes could fill the free part of the
// host's file table with files held only by memory mappings (which no
// descriptor cap counts; their memory limit bounds them), what to raise.
func mappedFilesWarning(lim Limits, n int, h hostLimits) string {
	if n <= 0 || lim.MemoryBytes <= 0 || h.fileMax == 0 || h.fileMax > math.MaxInt64/2 || h.fileMax <= h.filesInUse {
		return ""
	}
	per := uint64(lim.MemoryBytes) / mappedFileBytes
	if lim.Pids > 0 {
		per += uint64(lim.Pids) * uint64(lim.OpenFiles)
	}
	if all := per * uint64(n); all > h.fileMax-h.filesInUse {
		return fmt.Sprintf("%d sandboxes could hold %d files between them (descriptors, and files held by memory mappings up to their memory limit), more than the %d the host's file table (fs.file-max %d) has free: "+
			"raise fs.file-max (sysctl; systemd sets it to its maximum), or lower CODEEXEC_MAX_SESSIONS (--max-sessions) or MCP_BRIDGE_MEMORY (--memory)", n, all, h.fileMax-h.filesInUse, h.fileMax)
	}
	return ""
}

// fitFileTable bounds the files n sandboxes hold through descriptors: one
// table per process, Pids of them, OpenFiles each. Without a pids cap
// there is no bound, and nothing to check.
func fitFileTable(lim Limits, n int, h hostLimits) (Limits, error) {
	explicit := lim.OpenFiles != 0
	if !explicit {
		lim.OpenFiles = DefaultOpenFiles
	}
	if lim.Pids <= 0 || h.fileMax == 0 || h.fileMax > math.MaxInt64/2 {
		return lim, nil // no pids cap, or a table without a practical end (systemd sets LONG_MAX)
	}
	free := uint64(0)
	if h.fileMax > h.filesInUse {
		free = uint64(float64(h.fileMax-h.filesInUse) * fileTableShare)
	}
	fit := free / uint64(n) / uint64(lim.Pids)
	switch {
	case uint64(lim.OpenFiles) <= fit:
		return lim, nil
	case !explicit && fit >= minOpenFiles:
		lim.OpenFiles = int(min(fit, uint64(DefaultOpenFiles)))
		return lim, nil
	}
	lower := "lower MCP_BRIDGE_PIDS (--pids) or CODEEXEC_MAX_SESSIONS (--max-sessions)"
	if fit >= minOpenFiles {
		lower = fmt.Sprintf("lower CODEEXEC_OPEN_FILES (--open-files) to at most %d, MCP_BRIDGE_PIDS (--pids) or CODEEXEC_MAX_SESSIONS (--max-sessions)", fit)
	}
	return lim, fmt.Errorf("%d sandboxes (--max-sessions plus --pool) of %d processes with %d open files each could hold %d files, more than %d, %.0f%% of what the host's file table (fs.file-max %d, %d in use) has free: %s, or raise fs.file-max (sysctl)",
		n, lim.Pids, lim.OpenFiles, uint64(n)*uint64(lim.Pids)*uint64(lim.OpenFiles), free, fileTableShare*100, h.fileMax, h.filesInUse, lower)
}
