package durable

import (
	"strings"
	"syscall"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// makeFiles puts files in the workspace: a text file, a binary one under
// sub/ (not out/, whose files make a result without structuredContent,
// where the tests read the handle), and a 3 MiB one; readFiles prints what they hold.
const (
	makeFiles = `import os, hashlib
os.makedirs('sub', exist_ok=True)
open('keep.txt', 'w').write('kept')
open('sub/data.bin', 'wb').write(bytes(range(256)) * 4)
big = os.urandom(3 << 20)
open('big.bin', 'wb').write(big)
digest = hashlib.sha256(big).hexdigest()
del big`
	readFiles = `import hashlib
print(open('/workspace/keep.txt').read(), len(open('/workspace/sub/data.bin', 'rb').read()),
      hashlib.sha256(open('/workspace/big.bin', 'rb').read()).hexdigest() == digest)`
	wantFiles = "kept 1024 True"
)

// The workspace's files survive each way a sandbox dies, as the variables
// do: a timeout and a SIGKILL of the sandbox's own process. The dying
// call's writes are rolled back with its other effects, and the restore
// notice names the files that came back.
func TestE2EWorkspaceSurvivesEveryDeath(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	harness.Code(t, c, makeFiles)
	for _, death := range []struct{ name, code string }{
		{"timeout", "open('keep.txt', 'w').write('changed')\nimport time\ntime.sleep(60)"},
		{"kill -9", "open('keep.txt', 'w').write('changed')\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)"},
	} {
		o := harness.RunPython(t, c, map[string]any{"code": death.code, "timeout": 3})
		if !o.IsError {
			t.Fatalf("%s: the call succeeded: %s", death.name, o.Text)
		}
		after := harness.RunPython(t, c, map[string]any{"code": readFiles})
		if got := harness.Joined(after.Stdout()); got != wantFiles || after.IsError {
			t.Fatalf("after the %s: %q (%s), want %q", death.name, got, after.Text, wantFiles)
		}
		for _, s := range []string{"restored", "files", "/workspace/keep.txt", "/workspace/sub/data.bin", "/workspace/big.bin"} {
			if !strings.Contains(after.Text, s) {
				t.Errorf("after the %s the result does not mention %q: %s", death.name, s, after.Text)
			}
		}
	}
}

// Files over the workspace's checkpoint cap are named when they are not
// kept, and again when the session comes back without them.
func TestE2EWorkspaceOverItsCapIsNamed(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, map[string]string{"CODEEXEC_WORKSPACE_CHECKPOINT_BYTES": "1m"})
	harness.Code(t, c, "import os\nopen('small.txt', 'w').write('s')\nopen('huge.bin', 'wb').write(os.urandom(2 << 20))")
	o := harness.Code(t, c, "x = 1")
	if !strings.Contains(o.Text, "/workspace/huge.bin (file of 2.0 MiB)") {
		t.Errorf("the result after the checkpoint does not name the file it left out: %s", o.Text)
	}
	harness.RunPython(t, c, map[string]any{"code": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"})
	o = harness.Code(t, c, "import os\nprint(os.path.exists('small.txt'), os.path.exists('huge.bin'))")
	if got := harness.Joined(o.Stdout()); got != "True False" {
		t.Errorf("after the restore: %q", got)
	}
	for _, s := range []string{"files /workspace/small.txt", "not restored: ", "/workspace/huge.bin (file of 2.0 MiB)"} {
		if !strings.Contains(o.Text, s) {
			t.Errorf("the restore notice does not say %q: %s", s, o.Text)
		}
	}
}

// The workspace outlives the process that served it: `serve --http` is
// stopped and started again on the same state dir, and the handle brings
// the files back.
func TestE2EWorkspaceSurvivesARestart(t *testing.T) {
	t.Parallel()
	env := harness.BaseEnv(t, harness.StateEnv(t.TempDir()))
	addr := harness.FreeAddr(t)
	first, _ := harness.StartCommand(t, env, "serve", "--http", addr)
	harness.WaitHTTP(t, "http://"+addr+"/healthz")
	h := sessionOf(t, harness.SDKClient(t, modern("http://"+addr, pyCall(makeFiles, ""))), 0)
	stop(t, first, syscall.SIGTERM)

	addr = harness.FreeAddr(t)
	harness.StartProcess(t, env, "serve", "--http", addr)
	harness.WaitHTTP(t, "http://"+addr+"/healthz")
	out := harness.SDKClient(t, modern("http://"+addr, pyCall(readFiles, h)))
	if got := harness.ResultStdout(t, out, 0); got != wantFiles {
		t.Fatalf("after the restart: %q, want %q (%s)", got, wantFiles, harness.ResultText(out.Results[0]))
	}
	if text := harness.ResultText(out.Results[0]); !strings.Contains(text, "files /workspace/big.bin, /workspace/keep.txt, /workspace/sub/data.bin") {
		t.Errorf("the restore notice does not name the files: %s", text)
	}
}

// A session's files move between runtimes: made under bwrap (uid 65534
// inside), restored under the container runtime (a host uid of the
// sandbox's own) and changed there, then restored under bwrap again.
// Runs only under a container runtime (CODEEXEC_E2E_RUNTIME).
func TestE2EWorkspaceMovesBetweenRuntimes(t *testing.T) {
	t.Parallel()
	rt := harness.ContainerRuntime()
	if rt == "" {
		t.Skip("moves a session between bwrap and a container runtime: set CODEEXEC_E2E_RUNTIME=docker or podman")
	}
	state := t.TempDir()
	h := ""
	for i, step := range []struct{ runtime, code, want string }{
		{"bwrap", makeFiles + "\nprint('made')", "made"},
		{rt, readFiles + "\nn = open('/workspace/keep.txt', 'a').write(' and changed')", wantFiles},
		{"bwrap", "print(open('/workspace/keep.txt').read(), open('sub/data.bin', 'rb').read() == bytes(range(256)) * 4)", "kept and changed True"},
	} {
		vars := harness.StateEnv(state)
		vars["MCP_BRIDGE_RUNTIME"] = step.runtime
		env := harness.BaseEnv(t, vars)
		addr := harness.FreeAddr(t)
		cmd, _ := harness.StartCommand(t, env, "serve", "--http", addr)
		harness.WaitHTTP(t, "http://"+addr+"/healthz")
		out := harness.SDKClient(t, modern("http://"+addr, pyCall(step.code, h)))
		if got := harness.ResultStdout(t, out, 0); got != step.want {
			t.Fatalf("step %d under %s: %q, want %q (%s)", i, step.runtime, got, step.want, harness.ResultText(out.Results[0]))
		}
		if h == "" {
			h = sessionOf(t, out, 0)
		}
		stop(t, cmd, syscall.SIGTERM)
	}
}
