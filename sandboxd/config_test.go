package sandboxd_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
)

func TestValidateToolErrors(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{"": "", "raise": "", "return": "", "ignore": `tool errors "ignore": use "raise"`} {
		cfg := sandboxd.DefaultConfig()
		cfg.ToolErrors = v
		err := cfg.Validate()
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("ToolErrors %q: %v, want %q", v, err, want)
		}
	}
}

func TestValidateRuntime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		runtime, image, want string
		env                  string
	}{
		{"", "", "", ""},
		{"bwrap", "", "", ""},
		{"podman", "localhost/codeexec-sandbox:latest", "", ""},
		{"docker", "localhost/codeexec-sandbox:latest", "", "host"},
		{"docker", "", "", ""}, // the environment's image
		{"docker", "", "needs an image on the host's /usr (--env host): set MCP_BRIDGE_IMAGE", "host"},
		{"bwrap", "", "--env (CODEEXEC_ENV): environment name \"Bad\" is not accepted", "Bad"},

		{"lxc", "img", `runtime "lxc" is not supported: use bwrap, podman or docker`, ""},
	}
	for _, tc := range cases {
		cfg := sandboxd.DefaultConfig()
		cfg.Runtime, cfg.Image, cfg.Env = tc.runtime, tc.image, tc.env
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("runtime %q image %q: %v", tc.runtime, tc.image, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("runtime %q image %q: %v, want %q", tc.runtime, tc.image, err, tc.want)
		}
	}
}

func TestValidateLaunchSpares(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spares int
		want   string
	}{
		{0, ""},
		{2, ""},
		{16, ""},
		{-1, "launch spares -1 is out of range: set CODEEXEC_LAUNCH_SPARES (--launch-spares) to 0 to 16"},
		{17, "launch spares 17 is out of range: set CODEEXEC_LAUNCH_SPARES (--launch-spares) to 0 to 16"},
	} {
		cfg := sandboxd.DefaultConfig()
		cfg.LaunchSpares = tc.spares
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("spares %d: %v", tc.spares, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("spares %d: %v, want %q", tc.spares, err, tc.want)
		}
	}
}

// TestValidateNamesTheSetting: each setting Validate refuses is named by
// its variable and flag, with what it accepts.
func TestValidateNamesTheSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set  func(*sandboxd.Config)
		want string
	}{
		{func(c *sandboxd.Config) { c.Python = "" }, "python path is empty: set CODEEXEC_PYTHON (--python) to the interpreter inside the sandbox, e.g. /usr/bin/python3"},
		{func(c *sandboxd.Config) { c.MemoryBytes = 512 }, "memory limit 512 bytes is too small: set MCP_BRIDGE_MEMORY (--memory) to at least 32m, with its unit (e.g. 512m), or to 0 for no cap (Python needs about 10 MiB to start)"},
		{func(c *sandboxd.Config) { c.Pids = 2 }, "pids limit 2 is too small: set MCP_BRIDGE_PIDS (--pids) to at least 8 (the agent needs a few threads), or to 0 for no cap"},
		{func(c *sandboxd.Config) { c.DefaultTimeout = 5 * time.Millisecond }, "default timeout 5ms is too short: set MCP_BRIDGE_TIMEOUT (--timeout) to at least 1s, e.g. 30s"},
		{func(c *sandboxd.Config) { c.MaxTimeout = 0 }, "max timeout 0s is too short: set MCP_BRIDGE_MAX_TIMEOUT (--max-timeout) to at least 1s, e.g. 120s"},
		{func(c *sandboxd.Config) { c.OutputLimitBytes = -1 }, "output limit -1 bytes is negative: set CODEEXEC_OUTPUT_LIMIT (--output-limit) to a size, e.g. 1m, or to 0 for no cap"},
		{func(c *sandboxd.Config) { c.PoolSize = 65 }, "warm pool size 65 is out of range: set CODEEXEC_POOL_SIZE (--pool) to 0 to 64"},
		{func(c *sandboxd.Config) { c.MaxSessions = -1 }, "max sessions -1 is negative: set CODEEXEC_MAX_SESSIONS (--max-sessions) to the most live sandboxes, e.g. 64, or to 0 for no cap"},
		{func(c *sandboxd.Config) { c.SessionTTL = time.Second }, "session TTL 1s is too short: set CODEEXEC_SESSION_TTL (--session-ttl) to at least 1m (it is how long an unused session's handle stays valid; days are typical, e.g. 168h)"},
		{func(c *sandboxd.Config) { c.CheckpointBytes = 64 }, "checkpoint cap 64 bytes is out of range: set CODEEXEC_CHECKPOINT_BYTES (--checkpoint-bytes) to 1m to 1g, with its unit, e.g. 64m"},
		{func(c *sandboxd.Config) { c.ContainerUIDs = "1000-2000" }, "container uid range 1000-2000 is out of bounds: set CODEEXEC_CONTAINER_UIDS (--container-uids) to FIRST-LAST with 65536 <= FIRST <= LAST <= 2147483646, a range nothing else on the host uses, e.g. 2000000000-2000065535"},
		{func(c *sandboxd.Config) { c.ContainerUIDs = "2000000000" }, `container uid range "2000000000" is not FIRST-LAST: set CODEEXEC_CONTAINER_UIDS (--container-uids) to two uids, e.g. 2000000000-2000065535`},
		{func(c *sandboxd.Config) { c.ContainerUser = "0:0" }, `container user "0:0" is root, which is host root in a rootful container: set MCP_BRIDGE_CONTAINER_USER (--container-user) to an unprivileged uid, or leave it empty to give each sandbox a host uid of its own`},
		{func(c *sandboxd.Config) { c.ContainerUser = "65534 65534" }, `container user "65534 65534" is not UID[:GID] or NAME[:GROUP]: set MCP_BRIDGE_CONTAINER_USER (--container-user) to e.g. 65534:65534, or leave it empty to give each sandbox a host uid of its own`},
	} {
		cfg := sandboxd.DefaultConfig()
		tc.set(&cfg)
		if err := cfg.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("Validate = %v, want %q", err, tc.want)
		}
	}
}

func TestValidateLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  func(*sandboxd.Limits)
		want string
	}{
		{"zero is no cap", func(l *sandboxd.Limits) { *l = sandboxd.Limits{} }, ""},
		{"file size", func(l *sandboxd.Limits) { l.FileBytes = 1 << 20 }, ""},
		{"negative CPUs", func(l *sandboxd.Limits) { l.CPUs = -0.5 },
			"CPU limit -0.5 is negative: set MCP_BRIDGE_CPUS (--cpus) to a number of cores, e.g. 0.5, or to 0 for no cap"},
		{"negative CPU time", func(l *sandboxd.Limits) { l.CPUTime = -time.Second },
			"CPU time limit -1s is negative: set CODEEXEC_CPU_TIME (--cpu-time) to a duration, e.g. 10m, or to 0 for no cap"},
		{"negative /tmp", func(l *sandboxd.Limits) { l.TmpBytes = -1 },
			"/tmp size -1 bytes is negative: set CODEEXEC_TMP_SIZE (--tmp-size) to a size, e.g. 64m"},
		{"negative /workspace", func(l *sandboxd.Limits) { l.WorkspaceBytes = -2 },
			"/workspace size -2 bytes is negative: set CODEEXEC_WORKSPACE_SIZE (--workspace-size) to a size, e.g. 128m"},
		{"negative file size", func(l *sandboxd.Limits) { l.FileBytes = -3 },
			"file size limit -3 bytes is negative: set CODEEXEC_FILE_SIZE (--file-size) to a size, e.g. 16m, or to 0 for no cap"},
		{"negative open files", func(l *sandboxd.Limits) { l.OpenFiles = -4 },
			"open files limit -4 is negative: set CODEEXEC_OPEN_FILES (--open-files) to a count, e.g. 1024"},
		{"smallest file size", func(l *sandboxd.Limits) { l.FileBytes = 64 << 10 }, ""},
		{"file size without its unit", func(l *sandboxd.Limits) { l.FileBytes = 16 },
			"file size limit 16 bytes is too small: set CODEEXEC_FILE_SIZE (--file-size) to at least 64k, with its unit (e.g. 16m), or to 0 for no cap"},
		{"fewest open files", func(l *sandboxd.Limits) { l.OpenFiles = 32 }, ""},
		{"too few open files", func(l *sandboxd.Limits) { l.OpenFiles = 31 },
			"open files limit 31 is too small: set CODEEXEC_OPEN_FILES (--open-files) to at least 32 (the agent holds about a dozen of them itself), e.g. 1024"},
		{"most open files", func(l *sandboxd.Limits) { l.OpenFiles = 1 << 20 }, ""},
		{"too many open files", func(l *sandboxd.Limits) { l.OpenFiles = 1<<20 + 1 },
			"open files limit 1048577 is too large: set CODEEXEC_OPEN_FILES (--open-files) to at most 1048576 (the kernel's default fs.nr_open), e.g. 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := sandboxd.DefaultConfig()
			tc.set(&cfg.Limits)
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLimitsReachTheSandbox runs code under a Config with a file-size cap
// and no open-files cap, and reads both rlimits inside the sandbox: the
// cap as set, the descriptors at the default 1024 (four sessions at that
// fit any host's file table).
func TestLimitsReachTheSandbox(t *testing.T) {
	t.Parallel()
	c, _ := newService(t, func(cfg *sandboxd.Config) {
		cfg.PoolSize = 0
		cfg.FileBytes = 3 << 20
		cfg.OpenFiles = 0
		cfg.MaxSessions = 4
	})
	id := create(t, c, "")
	r, err := execute(t.Context(), c, &sandboxv1.ExecuteRequest{SessionId: id, Code: "import resource\n" +
		"print(resource.getrlimit(resource.RLIMIT_FSIZE)[0], resource.getrlimit(resource.RLIMIT_NOFILE)[0])"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "3145728 1024\n"; r.stdout != want {
		t.Fatalf("RLIMIT_FSIZE and RLIMIT_NOFILE in the sandbox: %q (stderr %q), want %q", r.stdout, r.stderr, want)
	}
}

// TestNewRefusesACapItCannotSet starts sandboxd with one open file more
// than this process's hard limit. Root on this host family lacks
// CAP_SYS_RESOURCE, so no sandbox could get that: New fails and says what
// to change, instead of every session failing later. A process with the
// capability in the host's user namespace starts.
func TestNewRefusesACapItCannotSet(t *testing.T) {
	t.Parallel()
	needsSandboxes(t)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	cfg := sandboxd.DefaultConfig()
	cfg.Runtime, cfg.PoolSize, cfg.LaunchSpares, cfg.Env = "bwrap", 0, 0, sandboxd.HostEnv
	cfg.OpenFiles = int(lim.Max) + 1
	cfg.MaxSessions, cfg.Pids = 1, 8 // within the host's file table
	svc, err := sandboxd.New(t.Context(), cfg, sandboxd.Deps{}, slog.New(slog.DiscardHandler))
	if err == nil {
		defer func() { _ = svc.Close() }()
		if !enginetest.MayRaiseLimits(t) {
			t.Fatalf("New with %d open files, over a hard limit of %d, succeeded without CAP_SYS_RESOURCE", cfg.OpenFiles, lim.Max)
		}
		return
	}
	want := fmt.Sprintf("bwrap sandboxes: the sandbox's open-files cap of %d is above this process's hard limit of %d", cfg.OpenFiles, lim.Max)
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("New: %v, want it to begin %q", err, want)
	}
}
