package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// End-to-end tests of environments (codeexec env): the sandboxes run in a
// built environment, CODEEXEC_E2E_ENV (scripts/test-environments.sh builds
// it and runs these under bwrap, the fork server, podman and docker),
// with Python 3.13 and the data stack.

// envUnderTest is the environment the suite's sandboxes run in, or the
// test is skipped, saying how to run it.
func envUnderTest(t *testing.T) {
	t.Helper()
	if name := os.Getenv("CODEEXEC_E2E_ENV"); name == "" || name == "host" {
		t.Skip("environments are tested when one is built and named: `codeexec env build`, then CODEEXEC_E2E_ENV=default (scripts/test-environments.sh does both)")
	}
}

// dataStack computes with numpy, pandas, scipy and matplotlib; wantStack
// is what it prints.
const (
	dataStack = `
import io, sys
import numpy as np, pandas as pd, matplotlib
from scipy import optimize, stats
import matplotlib.pyplot as plt
x = np.linalg.solve([[2.0, 1.0], [1.0, 3.0]], [3.0, 4.0])
df = pd.DataFrame({"x": [1, 2, 3, 4], "y": [2.0, 4.0, 6.0, 8.0]})
fit = stats.linregress(df.x, df.y)
best = optimize.minimize_scalar(lambda v: (v - 3) ** 2).x
fig, ax = plt.subplots()
ax.plot(df.x, df.y)
png = io.BytesIO()
fig.savefig(png, format="png")
plt.close(fig)  # an open figure would come back as an image too
print(sys.version_info[:2], x.round(6).tolist(), df.groupby(df.x % 2).y.sum().tolist(),
      round(fit.slope, 6), round(best, 4), png.getvalue()[:4] == b"\x89PNG", matplotlib.get_backend().lower())`
	// The backend is the agent's, whose show() sends figures back.
	wantStack = "(3, 13) [1.0, 1.0] [12.0, 8.0] 2.0 3.0 True module://codeexec_mpl"
)

func TestE2EEnvironmentDataStack(t *testing.T) {
	t.Parallel()
	envUnderTest(t)
	c, logs := harness.StartStdio(t, nil)
	defer func() {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "fork") || strings.Contains(l, "sandbox") {
				t.Log(l)
			}
		}
	}()
	if got := harness.Joined(harness.Code(t, c, dataStack).Stdout()); got != wantStack {
		t.Fatalf("the data stack printed %q, want %q", got, wantStack)
	}
	// bwrap's PID 1 is bwrap, the fork server's codeexec-init, a
	// container's its init.
	t.Logf("the sandbox's PID 1: %s", harness.Joined(harness.Code(t, c, "print(open('/proc/1/comm').read().strip())").Stdout()))
	// Command-line tools the stack shells out to, and the CA bundle.
	tools := `
import ctypes.util, shutil, ssl, subprocess
awk = subprocess.run(["awk", "BEGIN{print 6*7}"], capture_output=True, text=True).stdout.strip()
ctx = ssl.create_default_context()
print(awk, shutil.which("sh"), ctypes.util.find_library("m"), ctx.cert_store_stats()["x509_ca"] > 50)`
	if got := harness.Joined(harness.Code(t, c, tools).Stdout()); got != "42 /usr/bin/sh libm.so.6 True" {
		t.Errorf("tools and certificates: %q, want 42 /usr/bin/sh libm.so.6 True", got)
	}
}

// In a sandbox forked from the environment's fork server, the preloaded
// data stack is immortal (codeexec_forkheap.py: its pages stay shared
// with the server) and still computes as it does in a fresh interpreter.
func TestE2EEnvironmentForkedDataStack(t *testing.T) {
	t.Parallel()
	envUnderTest(t)
	if rt := harness.ContainerRuntime(); rt != "" {
		t.Skipf("the fork server is bwrap's; this run's sandboxes are %s containers", rt)
	}
	base := harness.StartHTTP(t, nil)
	var c *client.Client
	// The server preloads the stack for seconds; sessions meanwhile come
	// from bwrap itself.
	for deadline := time.Now().Add(2 * time.Minute); c == nil; time.Sleep(time.Second) {
		try := harness.HTTPClient(t, base)
		switch {
		case harness.Joined(harness.Code(t, try, "print(open('/proc/1/comm').read().strip())").Stdout()) == "codeexec-init":
			c = try
		case time.Now().After(deadline):
			t.Fatal("no session came from the fork server within 2 minutes")
		default:
			_ = try.Close()
		}
	}
	if got := harness.Joined(harness.Code(t, c, dataStack).Stdout()); got != wantStack {
		t.Fatalf("the data stack printed %q, want %q", got, wantStack)
	}
	immortal := "import sys, numpy, pandas\nprint([sys.getrefcount(o) >= 1 << 31 for o in (numpy.ndarray, pandas.DataFrame.merge, pandas)])"
	if got := harness.Joined(harness.Code(t, c, immortal).Stdout()); got != "[True, True, True]" {
		t.Errorf("the preloaded stack immortal in a forked sandbox: %s, want [True, True, True]", got)
	}
}

// The environment is read-only from inside: its Python, its packages and
// its /etc cannot be changed, by root of the sandbox's namespace or not.
func TestE2EEnvironmentIsReadOnly(t *testing.T) {
	t.Parallel()
	envUnderTest(t)
	c, _ := harness.StartStdio(t, nil)
	src := `
import errno, numpy, os
res = []
for p in [os.path.join(os.path.dirname(numpy.__file__), "x.py"), "/usr/bin/x", "/etc/x", "/x"]:
    try:
        open(p, "w").close()
        res.append("wrote " + p)
    except OSError as e:
        res.append(errno.errorcode[e.errno])
print(res)`
	got := harness.Joined(harness.Code(t, c, src).Stdout())
	if strings.Contains(got, "wrote") || strings.Count(got, "EROFS")+strings.Count(got, "EACCES") != 4 {
		t.Fatalf("writes into the environment: %s, want each refused (EROFS or EACCES)", got)
	}
}

// A session that built a DataFrame survives a kill -9 of its sandbox: the
// next call restores it, the DataFrame with it.
func TestE2EEnvironmentDataFrameSurvivesKill(t *testing.T) {
	t.Parallel()
	envUnderTest(t)
	c, _ := harness.StartStdio(t, nil)
	harness.Code(t, c, "import pandas as pd\ndf = pd.DataFrame({'city': ['a', 'b', 'a'], 'n': [1, 2, 3]})")
	o := harness.RunPython(t, c, map[string]any{"code": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "timeout": 10})
	if !o.IsError {
		t.Fatalf("the kill -9 call succeeded: %s", o.Text)
	}
	after := harness.Code(t, c, "print(df.groupby('city').n.sum().to_dict(), type(df).__module__)")
	if got := harness.Joined(after.Stdout()); got != "{'a': 4, 'b': 2} pandas.core.frame" {
		t.Fatalf("after the kill: %q (%s)", got, after.Text)
	}
	for _, s := range []string{"restored", "df", "pd"} {
		if !strings.Contains(after.Text, s) {
			t.Errorf("the result after the kill does not mention %q: %s", s, after.Text)
		}
	}
}

// Each sandbox draws its own random numbers, numpy's too, though the fork
// server imported numpy once for all of them.
func TestE2EEnvironmentOwnRandomState(t *testing.T) {
	t.Parallel()
	envUnderTest(t)
	draw := func(c *client.Client) string {
		return harness.Joined(harness.Code(t, c, "import numpy, random\nprint(numpy.random.random(), numpy.random.randint(1 << 30), random.random())").Stdout())
	}
	// Two sessions of one process: two sandboxes of one fork server.
	base := harness.StartHTTP(t, nil)
	first, second := draw(harness.HTTPClient(t, base)), draw(harness.HTTPClient(t, base))
	if first == "" || first == second {
		t.Fatalf("two sessions drew %q and %q, want different numbers", first, second)
	}
}

// Bad input to the environment commands, and to serve --env, fails at
// once, saying what was wrong and what to do; nothing is built or changed.
func TestE2EEnvironmentBadInput(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "envs")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--env", "nope", "--env-dir", dir}, `no environment "nope" in ` + dir + ` (none is built): build it with ` + "`codeexec env build nope`"},
		{[]string{"serve", "--env", "Bad/Name"}, "is not accepted: use 1 to 63 lower-case letters"},
		{[]string{"env", "build", "--env-dir", dir, "--apt", "-o=Dpkg::x", "x"}, "is not a Debian package name"},
		{[]string{"env", "build", "--env-dir", dir, "host"}, "it means the host's /usr"},
		{[]string{"env", "build", "--env-dir", dir, "--wheels", "/nonexistent", "x"}, "is not a directory"},
		{[]string{"env", "rm", "--env-dir", dir, "nope"}, `no environment "nope"`},
		{[]string{"env", "frobnicate"}, `unknown command "frobnicate"`},
	} {
		cmd := exec.Command(harness.Binary, tc.args...)
		cmd.Env = harness.BaseEnv(t, map[string]string{"CODEEXEC_ENV": ""})
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("codeexec %s: %v: %s\nwant it to fail saying %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused command made %s: %v", dir, err)
	}
}
