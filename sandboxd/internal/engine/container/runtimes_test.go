package container

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
	"github.com/codeexec/codeexec/services/randomid"
)

// Tests against real podman and docker engines. They need an engine and an
// image, so the default `go test ./...` leaves them out: set
// CODEEXEC_TEST_RUNTIMES=podman,docker (and CODEEXEC_TEST_IMAGE, default
// localhost/codeexec-sandbox:latest from deploy/build-images.sh). Once asked for, a
// runtime that does not work fails the test with Check's advice.

func testRuntimes(t *testing.T) []string {
	t.Helper()
	v := os.Getenv("CODEEXEC_TEST_RUNTIMES")
	if v == "" {
		t.Skip("container engines are tested only when asked: set CODEEXEC_TEST_RUNTIMES=podman,docker (see README, \"Container runtimes\")")
	}
	return strings.Split(v, ",")
}

func testImage() string {
	return cmp.Or(os.Getenv("CODEEXEC_TEST_IMAGE"), "localhost/codeexec-sandbox:latest")
}

// newTestContainer returns a checked engine closed at the end of t.
func newTestContainer(t *testing.T, rt string) *Engine {
	t.Helper()
	c, err := New(Config{Runtime: rt, Image: testImage(), CheckArgv: []string{enginetest.Python, "-c", "pass"}}, enginetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := c.Check(t.Context()); err != nil {
		t.Fatalf("%s Check: %v", rt, err)
	}
	return c
}

func containerSpec(t *testing.T, script string) engine.Spec {
	s := enginetest.Spec(t, script)
	s.ID = "t" + randomid.Hex(6)
	return s
}

// exists reports whether a container of that name exists.
func (c *Engine) exists(t *testing.T, name string) bool {
	t.Helper()
	_, err := c.cli(t.Context(), "inspect", "--format", "{{.Id}}", name)
	return err == nil
}

func TestContainerEngines(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			c := newTestContainer(t, rt)
			t.Run("isolation and channel", func(t *testing.T) {
				t.Parallel()
				spec := containerSpec(t, `
import os, sys
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
own = os.getuid() == os.getgid() and 2000000000 <= os.getuid() < 2000065536
print("own" if own else (os.getuid(), os.getgid()), st["CapEff"].strip(), st["NoNewPrivs"].strip(), sorted(set(os.environ) - {"HOSTNAME", "PATH", "LC_CTYPE"}) == ["HOME", "LANG", "PYTHONUNBUFFERED"], os.environ["HOME"])
print(open("/opt/codeexec/agent.txt").read(), os.getcwd())
for p in ("/opt/codeexec/x", "/x"):
    try:
        open(p, "w"); print("wrote", p)
    except OSError:
        print("denied")
print(sys.stdin.read().upper())`)
				r := enginetest.Run(t, c, spec, "ping", time.Minute)
				if r.Err != nil {
					t.Fatalf("sandbox failed: %v; stderr: %s", r.Err, r.Stderr)
				}
				// Besides engine.Spec.Env, engines set HOSTNAME, docker a default PATH,
				// and Python LC_CTYPE (PEP 538); nothing from the host.
				want := "own 0000000000000000 1 True /workspace\nagent /workspace\ndenied\ndenied\nPING\n"
				if r.Stdout != want {
					t.Fatalf("stdout = %q, want %q (stderr %q)", r.Stdout, want, r.Stderr)
				}
				if c.exists(t, containerName(spec.ID)) {
					t.Error("the container was not removed after it exited")
				}
			})
			t.Run("kill", func(t *testing.T) {
				t.Parallel()
				spec := containerSpec(t, "import sys\nprint('up', flush=True)\nsys.stdin.read()")
				p, err := c.Start(t.Context(), spec)
				if err != nil {
					t.Fatal(err)
				}
				if line, err := bufio.NewReader(p.Stdout()).ReadString('\n'); err != nil || line != "up\n" {
					t.Fatalf("sandbox did not start: %q %v", line, err)
				}
				for range 2 { // idempotent
					if err := p.Kill(); err != nil {
						t.Fatalf("Kill: %v", err)
					}
				}
				done := make(chan error, 1)
				go func() { done <- p.Wait() }()
				select {
				case err := <-done:
					t.Logf("Wait after Kill: %v", err)
				case <-time.After(30 * time.Second):
					t.Fatal("Wait did not return after Kill")
				}
				if c.exists(t, containerName(spec.ID)) {
					t.Error("the container survived Kill")
				}
				if u := p.Usage(); u.OOMKilled {
					t.Errorf("a Kill was reported as an OOM kill: %+v", u)
				}
			})
			t.Run("pause then resume then kill while paused", func(t *testing.T) {
				t.Parallel()
				spec := containerSpec(t, enginetest.PauseScript)
				enginetest.CheckPause(t, c, spec)
				if c.exists(t, containerName(spec.ID)) {
					t.Error("the container killed while paused was not removed")
				}
			})
			t.Run("memory cap is reported as an OOM kill", func(t *testing.T) {
				t.Parallel()
				spec := containerSpec(t, "b = []\nwhile True:\n    b.append(bytearray(8 << 20))")
				spec.Limits.MemoryBytes = 64 << 20
				r := enginetest.Run(t, c, spec, "", time.Minute)
				if r.Err == nil || !r.Usage.OOMKilled {
					t.Fatalf("err = %v, usage = %+v; want an OOM kill", r.Err, r.Usage)
				}
			})
			t.Run("pids cap", func(t *testing.T) {
				t.Parallel()
				spec := containerSpec(t, `
import os, sys, time
kids = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(60); os._exit(0)
        kids.append(pid)
except OSError as e:
    print("refused after", len(kids), type(e).__name__, flush=True)
sys.stdin.read()`)
				spec.Limits.Pids = 16
				p, err := c.Start(t.Context(), spec)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = p.Kill(); _ = p.Wait() }()
				line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "refused after") {
					t.Fatalf("fork was not refused: %q %v", line, err)
				}
				// The cgroup is found in the background; give it a moment.
				deadline := time.Now().Add(5 * time.Second)
				for !p.Usage().PidsLimitHit && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if !p.Usage().PidsLimitHit {
					t.Fatalf("the pids cap was hit (%s) but Usage does not say so", strings.TrimSpace(line))
				}
			})
			t.Run("extra run args", func(t *testing.T) {
				t.Parallel()
				// What --runtime=runsc does for gVisor, with a flag that
				// works on any host.
				e, err := New(Config{Runtime: rt, Image: testImage(), ExtraArgs: []string{"--hostname", "codeexec-extra"}}, enginetest.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = e.Close() })
				r := enginetest.Run(t, e, containerSpec(t, "import socket; print(socket.gethostname())"), "", time.Minute)
				if r.Err != nil || r.Stdout != "codeexec-extra\n" {
					t.Fatalf("stdout %q, err %v, stderr %q; want the hostname set by the extra args", r.Stdout, r.Err, r.Stderr)
				}
			})
			t.Run("prepare compiles with the image's interpreter", func(t *testing.T) {
				t.Parallel()
				enginetest.CheckPrepare(t, c, "t"+randomid.Hex(6))
			})
			t.Run("close removes live containers", func(t *testing.T) {
				t.Parallel()
				e := newTestContainer(t, rt)
				spec := containerSpec(t, "import sys; sys.stdin.read()")
				p, err := e.Start(t.Context(), spec)
				if err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(30 * time.Second)
				for !e.exists(t, containerName(spec.ID)) && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				_ = p.Wait()
				if e.exists(t, containerName(spec.ID)) {
					t.Error("Close left the container behind")
				}
			})
		})
	}
}

func TestContainerCheckErrors(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			c, err := New(Config{Runtime: rt, Image: "codeexec-no-such-image:1"}, enginetest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.Check(t.Context())
			if !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), "codeexec-no-such-image:1 not found locally") ||
				!strings.Contains(err.Error(), "deploy/build-images.sh") {
				t.Fatalf("Check with a missing image = %v", err)
			}
			// A Python path the image lacks is caught by the trial run.
			c2, err := New(Config{Runtime: rt, Image: testImage(), CheckArgv: []string{"/usr/local/bin/python9", "-c", "pass"}}, enginetest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			if err := c2.Check(t.Context()); !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), "lacks /usr/local/bin/python9") {
				t.Fatalf("Check with a missing interpreter = %v", err)
			}
		})
	}
}

// Not parallel: it points the docker CLI at a daemon that does not exist.
func TestContainerCheckDockerDaemonDown(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		if rt != "docker" {
			continue
		}
		t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
		c, err := New(Config{Runtime: "docker", Image: testImage()}, enginetest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = c.Check(t.Context())
		if !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), "Docker daemon is not running") ||
			!strings.Contains(err.Error(), "dockerd") {
			t.Fatalf("Check with no daemon = %v", err)
		}
	}
}

func TestContainerReapsOrphans(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			host, _ := os.Hostname()
			name := "codeexec-orphan-" + randomid.Hex(4)
			// A container left by a sandboxd of this host that is gone.
			out, err := exec.CommandContext(t.Context(), rt, "create", "--name", name,
				"--label", LabelOwner+"="+host+"/"+deadPID(t)+"/dead", testImage(), enginetest.Python, "-c", "pass").CombinedOutput()
			if err != nil {
				t.Fatalf("%s create: %v: %s", rt, err, out)
			}
			t.Cleanup(func() { _ = exec.Command(rt, "rm", "-f", name).Run() })
			// A paused one, left by a sandboxd of another host name in
			// this PID namespace (a compose replica, cut off from the
			// session store and then gone), and a paused one whose owner
			// is in another PID namespace, which must stay.
			// They are started through an engine, for the runtime's global
			// arguments and ulimits on this host.
			space := thisPIDSpace()
			paused := map[string]string{"codeexec-orphan-" + randomid.Hex(4): space, "codeexec-other-" + randomid.Hex(4): "another-boot/1"}
			starter := newTestContainer(t, rt)
			for pname, pspace := range paused {
				args := append([]string{"run", "-d", "--network", "none", "--name", pname,
					"--label", LabelOwner + "=replica-2/" + deadPID(t) + "/dead", "--label", LabelPIDSpace + "=" + pspace, "--label", LabelOwnerStart + "=1"},
					starter.ulimits(engine.Limits{})...)
				if _, err := starter.cli(t.Context(), append(args, testImage(), enginetest.Python, "-c", "import time; time.sleep(300)")...); err != nil {
					t.Fatalf("%s run: %v", rt, err)
				}
				t.Cleanup(func() { _ = exec.Command(rt, "rm", "-f", pname).Run() })
				if _, err := starter.cli(t.Context(), "pause", pname); err != nil {
					t.Fatalf("%s pause: %v", rt, err)
				}
			}
			c := newTestContainer(t, rt)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if _, err := c.cli(ctx, "inspect", "--format", "{{.Id}}", name); err == nil {
				t.Fatalf("Check did not remove the orphan %s", name)
			}
			for pname, pspace := range paused {
				_, err := c.cli(ctx, "inspect", "--format", "{{.Id}}", pname)
				if gone := err != nil; gone != (pspace == space) {
					t.Errorf("paused container %s (PID space %q, this one %q): removed %v, want %v", pname, pspace, space, gone, pspace == space)
				}
			}
		})
	}
}

// TestContainerCheckTriesTheLimits checks that Check's trial container
// runs with the limits sandboxes will get: its command exits 0 only when
// it has 777 descriptors (a command that fails and prints nothing is
// reported by its exit status), and docker refuses more CPUs than the host
// has at Check, saying which setting to lower, rather than at every start.
func TestContainerCheckTriesTheLimits(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			argv := []string{enginetest.Python, "-c",
				"import resource, sys; sys.exit(0 if resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 777 else 3)"}
			lim := engine.Limits{MemoryBytes: 256 << 20, Pids: 64, TmpBytes: 8 << 20, WorkspaceBytes: 8 << 20, OpenFiles: 777}
			check := func(lim engine.Limits) error {
				c, err := New(Config{Runtime: rt, Image: testImage(), CheckArgv: argv, Limits: lim}, enginetest.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				return c.Check(t.Context())
			}
			if err := check(lim); err != nil {
				t.Fatalf("Check with the limits its command wants: %v", err)
			}
			if err := check(engine.Limits{}); !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), "a trial "+rt+" sandbox failed (exit status 3)") {
				t.Fatalf("Check with no limits given (the trial's own, 64 descriptors) = %v, want the trial to fail with its exit status", err)
			}
			if rt != "docker" {
				return // podman takes more CPUs than the host has
			}
			lim.CPUs = float64(runtime.NumCPU() * 4)
			err := check(lim)
			if !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), "Range of CPUs") || !strings.Contains(err.Error(), "lower MCP_BRIDGE_CPUS (--cpus") {
				t.Fatalf("Check with %g CPUs on a host of %d = %v, want the trial to fail and name the setting", lim.CPUs, runtime.NumCPU(), err)
			}
		})
	}
}
