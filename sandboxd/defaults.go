package sandboxd

import (
	"errors"
	"fmt"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/container"
	"github.com/codeexec/codeexec/sandboxd/internal/environment"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
)

// The narrowest caps accepted: the agent holds about a dozen descriptors
// while a call runs (the channel, the call's output pipes, Python's own),
// which leaves user code twenty at 32; a file-size cap below 64 KiB is
// more likely a size given without its unit than meant.
const (
	minOpenFiles = 32
	minFileBytes = 64 << 10
	// maxOpenFiles is the kernel's default ceiling (fs.nr_open): above
	// it, every start fails on a host that keeps the default.
	maxOpenFiles = 1 << 20
)

// sandboxCount is how many sandboxes may run code at once, or 0 for no
// cap: the live sessions and the warm pool's.
func sandboxCount(c Config) int {
	if c.MaxSessions == 0 {
		return 0
	}
	return c.MaxSessions + c.PoolSize
}

// negativeLimit reports the first limit other than memory and pids (whose
// floors Validate checks) below zero, saying how to set it.
func negativeLimit(lim Limits) error {
	switch {
	case lim.CPUs < 0:
		return fmt.Errorf("CPU limit %g is negative: set MCP_BRIDGE_CPUS (--cpus) to a number of cores, e.g. 0.5, or to 0 for no cap", lim.CPUs)
	case lim.CPUTime < 0:
		return fmt.Errorf("CPU time limit %s is negative: set CODEEXEC_CPU_TIME (--cpu-time) to a duration, e.g. 10m, or to 0 for no cap", lim.CPUTime)
	case lim.TmpBytes < 0:
		return fmt.Errorf("/tmp size %d bytes is negative: set CODEEXEC_TMP_SIZE (--tmp-size) to a size, e.g. 64m", lim.TmpBytes)
	case lim.WorkspaceBytes < 0:
		return fmt.Errorf("/workspace size %d bytes is negative: set CODEEXEC_WORKSPACE_SIZE (--workspace-size) to a size, e.g. 128m", lim.WorkspaceBytes)
	case lim.FileBytes < 0:
		return fmt.Errorf("file size limit %d bytes is negative: set CODEEXEC_FILE_SIZE (--file-size) to a size, e.g. 16m, or to 0 for no cap", lim.FileBytes)
	case lim.OpenFiles < 0:
		return fmt.Errorf("open files limit %d is negative: set CODEEXEC_OPEN_FILES (--open-files) to a count, e.g. %d", lim.OpenFiles, DefaultOpenFiles)
	}
	return nil
}

// narrowLimit reports a file-size or open-files cap outside what a
// sandbox can start and work with.
func narrowLimit(lim Limits) error {
	switch {
	case lim.FileBytes > 0 && lim.FileBytes < minFileBytes:
		return fmt.Errorf("file size limit %d bytes is too small: set CODEEXEC_FILE_SIZE (--file-size) to at least 64k, with its unit (e.g. 16m), or to 0 for no cap", lim.FileBytes)
	case lim.OpenFiles > 0 && lim.OpenFiles < minOpenFiles:
		return fmt.Errorf("open files limit %d is too small: set CODEEXEC_OPEN_FILES (--open-files) to at least %d (the agent holds about a dozen of them itself), e.g. %d", lim.OpenFiles, minOpenFiles, DefaultOpenFiles)
	case lim.OpenFiles > maxOpenFiles:
		return fmt.Errorf("open files limit %d is too large: set CODEEXEC_OPEN_FILES (--open-files) to at most %d (the kernel's default fs.nr_open), e.g. %d", lim.OpenFiles, maxOpenFiles, DefaultOpenFiles)
	}
	return nil
}

// DefaultConfig returns upstream's defaults.
func DefaultConfig() Config {
	return Config{
		Python:        "/usr/bin/python3",
		ContainerUIDs: fmt.Sprintf("%d-%d", container.DefaultFirstUID, container.DefaultFirstUID+container.DefaultUIDCount-1),
		Limits: Limits{
			MemoryBytes: 512 << 20, Pids: 128,
			TmpBytes: 64 << 20, WorkspaceBytes: 128 << 20, // OpenFiles 0: DefaultOpenFiles
		},
		OutputLimitBytes: 256 << 10,
		// About 10k tokens: the size of result Claude Code warns about
		// (it cuts at 25k), and a tenth of a 100k-token context.
		OutputBudget: 40000,
		// Claude scales down any image whose long side is over 1568 px
		// (so more pixels cost latency and no quality), and refuses over
		// 2000 px once a request holds 20 images. Claude Desktop refuses
		// a result over 1 MiB of JSON: 640 KiB of images is 853 KiB in
		// base64, which leaves room for the 40k characters of text.
		Images:          ImageLimits{Side: 1568, Bytes: 512 << 10, CallBytes: 640 << 10, PerCall: 10},
		DefaultTimeout:  30 * time.Second,
		MaxTimeout:      time.Hour,
		StartTimeout:    30 * time.Second,
		IdleTimeout:     30 * time.Minute,
		PoolSize:        2,
		LaunchSpares:    2,
		ForkServer:      true,
		SandboxUID:      engine.DefaultHostUID,
		MaxSessions:     64,
		SessionTTL:      7 * 24 * time.Hour,
		CheckpointBytes: session.DefaultCheckpointBytes,
		// The default /workspace: all of it fits, and restoring that
		// much stays around a second (docs/PERFORMANCE.md).
		WorkspaceCheckpointBytes: 128 << 20,
	}
}

// Validate reports the first bad setting, saying what is accepted.
func (c Config) Validate() error {
	if err := negativeLimit(c.Limits); err != nil {
		return err
	}
	if err := narrowLimit(c.Limits); err != nil {
		return err
	}
	if err := c.checkContainerUsers(); err != nil {
		return err
	}
	switch {
	case c.ToolErrors != "" && c.ToolErrors != "raise" && c.ToolErrors != "return":
		return fmt.Errorf("tool errors %q: use \"raise\" (a failed tool call raises runtime.ToolError) or \"return\" (it returns the result dict, as upstream did)", c.ToolErrors)
	case c.Runtime != "" && c.Runtime != "bwrap" && c.Runtime != "podman" && c.Runtime != "docker":
		return fmt.Errorf("runtime %q is not supported: use bwrap, podman or docker, or leave it empty to detect one", c.Runtime)
	case (c.Runtime == "podman" || c.Runtime == "docker") && c.Image == "" && c.Env == environment.Host:
		return fmt.Errorf("the %s runtime needs an image on the host's /usr (--env host): set MCP_BRIDGE_IMAGE (--image), e.g. localhost/codeexec-sandbox:latest from deploy/build-images.sh, or run in an environment (--env NAME), whose image is made from its tree", c.Runtime)
	case c.Env != "" && c.Env != environment.Host && environment.CheckName(c.Env) != nil:
		return fmt.Errorf("--env (CODEEXEC_ENV): %w", environment.CheckName(c.Env))
	case c.Python == "":
		return errors.New("python path is empty: set CODEEXEC_PYTHON (--python) to the interpreter inside the sandbox, e.g. /usr/bin/python3")
	case c.MemoryBytes < 0 || (c.MemoryBytes > 0 && c.MemoryBytes < 32<<20):
		return fmt.Errorf("memory limit %d bytes is too small: set MCP_BRIDGE_MEMORY (--memory) to at least 32m, with its unit (e.g. 512m), or to 0 for no cap (Python needs about 10 MiB to start)", c.MemoryBytes)
	case c.Pids < 0 || (c.Pids > 0 && c.Pids < 8):
		return fmt.Errorf("pids limit %d is too small: set MCP_BRIDGE_PIDS (--pids) to at least 8 (the agent needs a few threads), or to 0 for no cap", c.Pids)
	case c.DefaultTimeout < time.Second:
		return fmt.Errorf("default timeout %s is too short: set MCP_BRIDGE_TIMEOUT (--timeout) to at least 1s, e.g. 30s", c.DefaultTimeout)
	case c.MaxTimeout < time.Second:
		return fmt.Errorf("max timeout %s is too short: set MCP_BRIDGE_MAX_TIMEOUT (--max-timeout) to at least 1s, e.g. 120s", c.MaxTimeout)
	case c.OutputLimitBytes < 0:
		return fmt.Errorf("output limit %d bytes is negative: set CODEEXEC_OUTPUT_LIMIT (--output-limit) to a size, e.g. 1m, or to 0 for no cap", c.OutputLimitBytes)
	case c.WorkspaceCheckpointBytes < 0 || c.WorkspaceCheckpointBytes > 1<<30:
		return fmt.Errorf("workspace checkpoint cap %d bytes is out of range: set CODEEXEC_WORKSPACE_CHECKPOINT_BYTES (--workspace-checkpoint-bytes) to 0 (files are not kept) up to 1g, with its unit, e.g. 128m", c.WorkspaceCheckpointBytes)
	case c.OutputBudget != 0 && (c.OutputBudget < 1000 || c.OutputBudget > 10_000_000):
		return fmt.Errorf("output budget %d characters is out of range: set CODEEXEC_OUTPUT_BUDGET (--output-budget) to 1000 to 10000000, or to 0 to cap output at CODEEXEC_OUTPUT_LIMIT bytes instead", c.OutputBudget)
	case c.Images.Side < 64 || c.Images.Side > 8000:
		return fmt.Errorf("image side %d px is out of range: set CODEEXEC_IMAGE_SIDE (--image-side) to 64 to 8000 (Claude refuses images over 8000 px)", c.Images.Side)
	case c.Images.Bytes < 1<<10 || c.Images.Bytes > 5<<20:
		return fmt.Errorf("image size %d bytes is out of range: set CODEEXEC_IMAGE_BYTES (--image-bytes) to 1k to 5m, with its unit (Claude refuses images over 5 MB)", c.Images.Bytes)
	case c.Images.CallBytes < c.Images.Bytes || c.Images.CallBytes > 32<<20:
		return fmt.Errorf("images per call %d bytes is out of range: set CODEEXEC_CALL_IMAGE_BYTES (--call-image-bytes) to at least --image-bytes (%d) and at most 32m", c.Images.CallBytes, c.Images.Bytes)
	case c.Images.PerCall < 1 || c.Images.PerCall > 100:
		return fmt.Errorf("images per call %d is out of range: set CODEEXEC_CALL_IMAGES (--call-images) to 1 to 100", c.Images.PerCall)
	case c.PoolSize < 0 || c.PoolSize > 64:
		return fmt.Errorf("warm pool size %d is out of range: set CODEEXEC_POOL_SIZE (--pool) to 0 to 64", c.PoolSize)
	case c.LaunchSpares < 0 || c.LaunchSpares > 16:
		return fmt.Errorf("launch spares %d is out of range: set CODEEXEC_LAUNCH_SPARES (--launch-spares) to 0 to 16", c.LaunchSpares)
	case c.SandboxUID < 0:
		return fmt.Errorf("sandbox uid %d is negative: set CODEEXEC_SANDBOX_UID (--sandbox-uid) to a host uid nothing else uses, e.g. 65533", c.SandboxUID)
	case c.MaxSessions < 0:
		return fmt.Errorf("max sessions %d is negative: set CODEEXEC_MAX_SESSIONS (--max-sessions) to the most live sandboxes, e.g. 64, or to 0 for no cap", c.MaxSessions)
	case c.SessionTTL < time.Minute:
		return fmt.Errorf("session TTL %s is too short: set CODEEXEC_SESSION_TTL (--session-ttl) to at least 1m (it is how long an unused session's handle stays valid; days are typical, e.g. 168h)", c.SessionTTL)
	case c.CheckpointBytes < 1<<20 || c.CheckpointBytes > 1<<30:
		return fmt.Errorf("checkpoint cap %d bytes is out of range: set CODEEXEC_CHECKPOINT_BYTES (--checkpoint-bytes) to 1m to 1g, with its unit, e.g. 64m", c.CheckpointBytes)
	}
	return nil
}

// checkContainerUsers refuses a container user or uid range that the
// podman and docker engines would refuse, unless bwrap is named.
func (c Config) checkContainerUsers() error {
	if c.Runtime == "bwrap" {
		return nil
	}
	if c.ContainerUIDs != "" {
		if _, _, err := container.ParseUIDRange(c.ContainerUIDs); err != nil {
			return err
		}
	}
	return container.CheckUser(c.ContainerUser)
}
