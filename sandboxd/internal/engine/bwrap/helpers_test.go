package bwrap

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
	"github.com/codeexec/codeexec/services/testenv"
)

const python = enginetest.Python

// requireHost fails the test when the machine lacks what real sandboxes
// need: root (for cgroups), bwrap and python3. Under -short it skips
// (testenv): the fast tier runs without bubblewrap.
func requireHost(t *testing.T) {
	t.Helper()
	testenv.Sandboxes(t)
	if os.Geteuid() != 0 {
		t.Fatal("these tests need root: cgroups are created under /sys/fs/cgroup")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: apt-get install python3", python)
	}
}

// inTestEnv gives cfg the environment the tests run in: the root file
// system CODEEXEC_TEST_ENV_ROOT names (scripts/test-environments.sh runs
// the isolation, seccomp and limits tests so, in the default
// environment), else the host's /usr.
func inTestEnv(cfg Config) Config {
	if cfg.Root == "" {
		cfg.Root = os.Getenv("CODEEXEC_TEST_ENV_ROOT")
	}
	return cfg
}

// newTestEngine returns a checked engine that is closed at the end of t.
func newTestEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	requireHost(t)
	b, err := New(inTestEnv(cfg), enginetest.Logger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := b.Check(t.Context()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return b
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// survivors returns those of pids that still run 10 s on. Wait returns
// once the sandbox's outer process has exited and its cgroups are gone; a
// process of the sandbox that the kernel is still ending can show in /proc
// as running for a moment after that, and is given that moment.
func survivors(pids []int) []int {
	deadline := time.Now().Add(10 * time.Second)
	var out []int
	for _, pid := range pids {
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if processAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// startPath is one of the engine's two ways to start a sandbox. The
// isolation and limits tests run against both: bwrap itself, and the fork
// server, which must then serve every start (no falling back to bwrap).
type startPath struct {
	name   string
	config func(Config) Config
}

var startPaths = []startPath{
	{"bwrap", func(c Config) Config { return c }},
	{"fork server", func(c Config) Config { c.ForkServer, c.forkOnly = true, true; return c }},
}

// eachStartPath runs test once per start path, each in a subtest; in
// parallel (the test, then its subtests) when parallel is set.
func eachStartPath(t *testing.T, parallel bool, test func(*testing.T, startPath)) {
	if parallel {
		t.Parallel()
	}
	for _, path := range startPaths {
		t.Run(path.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			test(t, path)
		})
	}
}
