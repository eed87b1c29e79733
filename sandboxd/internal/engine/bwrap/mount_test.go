package bwrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
)

// An operator's --mount is readable and not writable, a :rw one is
// writable, both nosuid and nodev, and neither leads anywhere else on the
// host: not through a symbolic link inside it, not through "..", not by
// remounting it.
func TestBwrapMounts(t *testing.T) { eachStartPath(t, true, testBwrapMounts) }

func testBwrapMounts(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	top := enginetest.AgentDir(t) // readable by uid 65534
	secret := t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, "secret"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro, rw := filepath.Join(top, "ro"), filepath.Join(top, "rw")
	for _, d := range []string{ro, rw} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(rw, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "hello"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"escape": filepath.Join(secret, "secret"), "etc": "/etc/shadow", "up": "../../.."} {
		if err := os.Symlink(target, filepath.Join(ro, name)); err != nil {
			t.Fatal(err)
		}
	}
	mounts := []engine.Mount{{Host: ro, Sandbox: "/mnt/ro"}, {Host: rw, Sandbox: "/mnt/data/rw", Writable: true}}

	tests := []struct{ name, script string }{
		{"read-only mount readable, not writable", `
import errno, os
bad = []
if open("/mnt/ro/hello").read() != "hi":
    bad.append("content")
for f in (lambda: open("/mnt/ro/hello", "a"), lambda: open("/mnt/ro/new", "w"), lambda: os.chmod("/mnt/ro/hello", 0o777),
          lambda: os.mkdir("/mnt/ro/d"), lambda: os.unlink("/mnt/ro/hello"), lambda: os.symlink("/", "/mnt/ro/s")):
    try:
        f()
        bad.append("a write succeeded")
    except OSError as e:
        if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            bad.append(e)
print("ok" if not bad else bad)`},
		{"read-write mount writable", `
open("/mnt/data/rw/out.txt", "w").write("written")
print("ok" if open("/mnt/data/rw/out.txt").read() == "written" else "bad")`},
		{"nosuid nodev, read-only", `
opts = {l.split()[4]: l.split()[5] for l in open("/proc/self/mountinfo")}
ro, rw = set(opts["/mnt/ro"].split(",")), set(opts["/mnt/data/rw"].split(","))
print("ok" if {"nosuid", "nodev", "ro"} <= ro and {"nosuid", "nodev", "rw"} <= rw else opts)`},
		{"no way out", `
import os, sys
seen = []
hidden = sys.argv[1]
ways = ["/mnt/ro/escape", "/mnt/ro/etc", "/mnt/ro/up" + hidden, "/mnt/ro/../../" + hidden.lstrip("/")]
for p in ways + [hidden]:
    try:
        open(os.path.join(p, "secret") if os.path.isdir(p) else p).read()
        seen.append(p)
    except OSError:
        pass
print("ok" if not seen else "reached %s" % seen)`},
		{"no remount", `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.mount(None, b"/mnt/ro", None, 0x20 | 0x1000, None)  # MS_REMOUNT | MS_BIND, without MS_RDONLY
print("ok" if rc != 0 and not os.access("/mnt/ro/hello", os.W_OK) else "remounted read-write")`},
	}
	// After the subtests, which run in parallel once this function returns.
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(rw, "out.txt")); err != nil || string(b) != "written" {
			t.Errorf("the host does not see the sandbox's write to the :rw mount: %q, %v", b, err)
		}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := enginetest.Spec(t, tc.script, secret)
			spec.Mounts = mounts
			r := enginetest.Run(t, e, spec, "", 30*time.Second)
			if r.Err != nil || strings.TrimSpace(r.Stdout) != "ok" {
				t.Errorf("got stdout %q, err %v, stderr %q", r.Stdout, r.Err, r.Stderr)
			}
		})
	}
}
