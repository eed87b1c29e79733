// Package engine starts and stops sandboxes. An Engine hides how isolation
// is done; the session layer above only sees a Process with three pipes.
// The engines live below: bwrap (the default) and container (podman,
// docker), both built on cgroup and seccomp. Select picks one; this package
// also holds what every engine shares.
package engine

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrUnavailable means the engine cannot run on this host (binary missing,
// daemon down, no permission). Its message says what to install or start.
var ErrUnavailable = errors.New("sandbox runtime unavailable")

// Limits bound one sandbox. A zero field means "no limit" except where the
// engine documents a floor.
type Limits struct {
	// MemoryBytes caps resident memory (cgroup memory limit, else RLIMIT_AS).
	MemoryBytes int64
	// Pids caps the number of processes and threads (cgroup pids, else
	// RLIMIT_NPROC).
	Pids int
	// CPUs caps CPU bandwidth in cores, e.g. 0.5 (cgroup cpu quota).
	CPUs float64
	// CPUTime caps total CPU seconds of the sandbox (RLIMIT_CPU).
	CPUTime time.Duration
	// TmpBytes and WorkspaceBytes size the /tmp and /workspace tmpfs.
	TmpBytes       int64
	WorkspaceBytes int64
	// FileBytes caps the size of one written file (RLIMIT_FSIZE).
	FileBytes int64
	// OpenFiles caps open descriptors (RLIMIT_NOFILE).
	OpenFiles int
	// PendingSignals caps the signals queued to the sandbox's processes
	// (RLIMIT_SIGPENDING) and LockedBytes its locked memory
	// (RLIMIT_MEMLOCK: mlock, SHM_LOCK). The kernel charges both to every
	// user namespace up the chain of the sandbox's, and at each level
	// checks them against the limit its creator had, so that all
	// sandboxes share the host limit of their owner: these are set inside
	// the sandbox's own user namespace, after it is made, so that each
	// sandbox has its own small share of that limit (sandboxd divides
	// it). 0 leaves the host's.
	PendingSignals int64
	LockedBytes    int64
}

// Spec describes one sandbox to start.
type Spec struct {
	// ID names the sandbox; engines use it in container names and labels.
	ID string
	// Labels are attached where the engine supports them (containers).
	Labels map[string]string
	// AgentDir is a host directory that is mounted read-only at AgentMount.
	AgentDir string
	// Argv is the command run inside the sandbox, e.g.
	// ["/usr/bin/python3", "-I", "/opt/codeexec/agent.py"].
	Argv []string
	// Env is the complete environment inside the sandbox. Nothing from the
	// host environment is passed.
	Env map[string]string
	// Limits bound the sandbox.
	Limits Limits
	// Mounts are the operator's host directories to expose (--mount).
	Mounts []Mount
	// Warm says the sandbox is for a warm pool: no caller waits on its
	// start, so the engine may take longer to start it in a way that
	// costs less CPU and memory (bwrap waits for its fork server while
	// that is starting, instead of starting the sandbox without it).
	Warm bool
}

// AgentMount is where Spec.AgentDir appears inside every sandbox.
const AgentMount = "/opt/codeexec"

// Usage is what an engine knows about a sandbox's resource use.
type Usage struct {
	// MemoryPeakBytes is the highest memory use seen, when known.
	MemoryPeakBytes int64
	// OOMKilled reports that the kernel killed a process for memory.
	OOMKilled bool
	// PidsLimitHit reports that a fork or clone was refused by the pids cap.
	PidsLimitHit bool
	// PidsCurrent is how many processes and threads the sandbox has, read
	// while it runs; 0 when unknown.
	PidsCurrent int64
}

// Process is a running sandbox. Stdin and Stdout carry the framed channel to
// the agent; Stderr carries diagnostics the agent could not frame (a crash
// before its channel was up). All three close when the sandbox exits.
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.ReadCloser
	Stderr() io.ReadCloser
	// Wait blocks until the sandbox has exited and its resources (cgroups,
	// containers) are released, and returns how it exited.
	Wait() error
	// Kill stops the sandbox at once. It is safe to call more than once and
	// after exit.
	Kill() error
	// Pause stops every process of the sandbox where it is, until Resume:
	// its code runs no further and cannot tell that it was stopped, and
	// what it is sent waits in its pipes. Kill still ends a paused
	// sandbox. An engine that cannot pause returns an error wrapping
	// errors.ErrUnsupported, and the sandbox runs on.
	Pause() error
	// Resume lets a paused sandbox run on.
	Resume() error
	// Usage reports resource use; valid before and after exit.
	Usage() Usage
	// PidsLimitHit is Usage().PidsLimitHit, read alone: sandboxd asks it
	// before and after every exec, and one cgroup file is a third of
	// Usage's reads.
	PidsLimitHit() bool
	// PID is the host PID of the outermost sandbox process, for diagnostics.
	PID() int
}

// Engine starts sandboxes.
type Engine interface {
	// Name is the runtime's name as users select it, e.g. "bwrap".
	Name() string
	// Check verifies that the engine can run here. A failure wraps
	// ErrUnavailable and says what to do.
	Check(ctx context.Context) error
	// Prepare readies agentDir, the host directory every Spec.AgentDir
	// will name, for this engine's sandboxes: it precompiles the agent
	// with python, the interpreter they run (a path inside the sandbox),
	// so that each sandbox loads bytecode instead of compiling the agent
	// again. An error only costs start-up time: sandboxes still work.
	Prepare(ctx context.Context, agentDir, python string) error
	// CheckLimits reports limits that no sandbox of this engine could get
	// here (an rlimit above a hard limit that this process may not raise),
	// saying what to change; sandboxd calls it once, at start, so that a
	// bad setting fails there instead of in every session.
	CheckLimits(lim Limits) error
	// Start launches a sandbox. ctx bounds the start only, not the life of
	// the sandbox.
	Start(ctx context.Context, spec Spec) (Process, error)
	// Close stops every sandbox the engine started and releases its
	// resources.
	Close() error
}
