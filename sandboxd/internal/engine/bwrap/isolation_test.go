package bwrap

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
)

// TestBwrapIsolation runs one real sandbox per property; each script prints
// "ok" or what it found instead.
func TestBwrapIsolation(t *testing.T) { eachStartPath(t, true, testBwrapIsolation) }

func testBwrapIsolation(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	hidden := t.TempDir()

	tests := []struct {
		name   string
		script string
		args   []string
	}{
		{"read-only root and usr", `
bad = []
for p in ["/x", "/usr/x", "/etc/passwd", "/opt/codeexec/agent.txt", "/opt/codeexec/new"]:
    try:
        open(p, "a").write("x")
        bad.append(p)
    except OSError:
        pass
print("ok" if not bad else "writable: %s" % bad)`, nil},
		{"uid 65534 not root", `
import os, getpass, pwd
ids = (os.getuid(), os.geteuid(), os.getgid(), os.getegid())
print("ok" if ids == (65534,)*4 and getpass.getuser() == "nobody" and pwd.getpwuid(65534).pw_dir == "/workspace" else ids)`, nil},
		{"no capabilities and no_new_privs", `
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
want = {"CapEff": "0"*16, "CapPrm": "0"*16, "CapBnd": "0"*16, "CapAmb": "0"*16, "NoNewPrivs": "1"}
got = {k: st[k].strip() for k in want}
print("ok" if got == want else got)`, nil},
		{"no nested user namespaces", `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("ok" if libc.unshare(0x10000000) != 0 else "unshare(CLONE_NEWUSER) succeeded")`, nil},
		{"host paths invisible", `
import os, sys
seen = [p for p in ["/root", "/work", "/home", "/var", "/sys", "/etc/shadow", "/etc/ssl/private", "/etc/hostname", "/etc/localtime", "/run", "/srv", "/mnt", sys.argv[1]] if os.path.exists(p)]
print("ok" if not seen else "visible: %s" % seen)`, []string{hidden}},
		{"agent dir mounted", `
print("ok" if open("/opt/codeexec/agent.txt").read() == "agent" else "bad agent dir")`, nil},
		{"only sandbox processes visible", `
import os
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("ok" if pids == [1, os.getpid()] else pids)`, nil},
		{"no inherited descriptors", `
import os
leaked = []
for fd in range(3, 64):
    try:
        os.fstat(fd)
        leaked.append(fd)
    except OSError:
        pass
print("ok" if not leaked else "leaked fds %s" % [(fd, os.readlink("/proc/self/fd/%d" % fd)) for fd in leaked])`, nil},
		{"hostname", `
import socket
print("ok" if socket.gethostname() == "sandbox" else socket.gethostname())`, nil},
		{"tmp and workspace nosuid nodev", `
opts = {l.split()[4]: l.split()[5] for l in open("/proc/self/mountinfo")}
bad = [m for m in ["/tmp", "/workspace", "/dev/shm"] if not {"nosuid", "nodev"} <= set(opts[m].split(","))]
print("ok" if not bad else opts)`, nil},
		{"tmp sized and writable", `
import errno, os
st = os.statvfs("/tmp")
size = st.f_blocks * st.f_frsize
if size != 16 << 20:
    print("tmp size", size)
else:
    try:
        with open("/tmp/big", "wb") as f:
            f.write(b"x" * (17 << 20))
        print("no ENOSPC")
    except OSError as e:
        print("ok" if e.errno == errno.ENOSPC else e)`, nil},
		{"dev shm sized, multiprocessing works", `
import os, multiprocessing
st = os.statvfs("/dev/shm")
with multiprocessing.Pool(2) as p:
    r = p.map(abs, [-1, -2])
print("ok" if st.f_blocks * st.f_frsize == 16 << 20 and r == [1, 2] else (st, r))`, nil},
		{"seccomp refuses kernel attack surface", fmt.Sprintf(`
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(256)
calls = {
    "keyctl": (%d, 0, -3, 1),                    # KEYCTL_GET_KEYRING_ID, session keyring, create
    "add_key": (%d, b"user", b"k", b"v", 1, -2),  # into the process keyring
    "io_uring_setup": (%d, 1, params),
    "ptrace": (%d, 0, 0, 0, 0),                  # PTRACE_TRACEME
    "userfaultfd": (%d, 0),
    "unshare mount ns": (%d, 0x20000),
}
got = {}
for name, (nr, *args) in calls.items():
    rc = libc.syscall(nr, *args)
    got[name] = "EPERM" if rc == -1 and ctypes.get_errno() == errno.EPERM else (rc, ctypes.get_errno())
print("ok" if set(got.values()) == {"EPERM"} else got)`, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_IO_URING_SETUP,
			unix.SYS_PTRACE, unix.SYS_USERFAULTFD, unix.SYS_UNSHARE), nil},
		{"workspace sized and cwd", `
import os
st = os.statvfs("/workspace")
print("ok" if st.f_blocks * st.f_frsize == 32 << 20 and os.getcwd() == "/workspace" else (st, os.getcwd()))`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := enginetest.Run(t, e, enginetest.Spec(t, tc.script, tc.args...), "", 30*time.Second)
			if r.Err != nil || strings.TrimSpace(r.Stdout) != "ok" {
				t.Errorf("got stdout %q, err %v, stderr %q", r.Stdout, r.Err, r.Stderr)
			}
		})
	}
}

// TestBwrapNetwork checks that a sandbox's network is its own loopback
// alone: lo is up and the sandbox reaches itself on it, but a service the
// host offers on its loopback (TCP on 127.0.0.1 and on ::1 where the host
// has IPv6, an abstract Unix socket, which is bound to the network
// namespace too) and the internet are out of reach, and the host's
// listeners accept nothing.
func TestBwrapNetwork(t *testing.T) { eachStartPath(t, true, testBwrapNetwork) }

func testBwrapNetwork(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	abstract := fmt.Sprintf("@codeexec-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	unixLn, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	listeners := []net.Listener{tcp, unixLn}
	port6 := "0" // no IPv6 on the host: the sandbox skips it
	if tcp6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		listeners = append(listeners, tcp6)
		port6 = strconv.Itoa(tcp6.Addr().(*net.TCPAddr).Port)
	}
	var accepted atomic.Int32
	for _, ln := range listeners {
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				_ = c.Close()
			}
		}()
	}
	// The host's listeners answer the host itself.
	for _, ln := range listeners {
		c, err := net.Dial(ln.Addr().Network(), ln.Addr().String())
		if err != nil {
			t.Fatalf("the host cannot reach its own %s: %v", ln.Addr(), err)
		}
		_ = c.Close()
	}
	own := int32(len(listeners))
	for deadline := time.Now().Add(10 * time.Second); accepted.Load() != own; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the host's listeners accepted %d of the host's %d connections", accepted.Load(), own)
		}
	}

	r := enginetest.Run(t, e, enginetest.Spec(t, `
import errno, json, socket, sys
port, name, port6 = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
got = {"interfaces": sorted(l.split(":")[0].strip() for l in open("/proc/self/net/dev").readlines()[2:])}
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen()
c = socket.create_connection(srv.getsockname(), timeout=3)
a, _ = srv.accept()
c.sendall(b"hi")
got["own loopback"] = a.recv(2).decode()
def attempt(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(addr)
        return "connected"
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__)
    finally:
        s.close()
got["host 127.0.0.1"] = attempt(socket.AF_INET, ("127.0.0.1", port))
got["host abstract socket"] = attempt(socket.AF_UNIX, "\0" + name)
if port6:  # refused where the sandbox's lo has ::1, unreachable where it has none
    r = attempt(socket.AF_INET6, ("::1", port6))
    got["host ::1"] = "refused or unreachable" if r in ("ECONNREFUSED", "ENETUNREACH", "EADDRNOTAVAIL") else r
got["internet"] = attempt(socket.AF_INET, ("1.1.1.1", 53))
print(json.dumps(got, sort_keys=True))`, strconv.Itoa(tcp.Addr().(*net.TCPAddr).Port), abstract[1:], port6), "", 30*time.Second)
	if r.Err != nil {
		t.Fatalf("sandbox failed: %v, stderr %q", r.Err, r.Stderr)
	}
	want := `{"host 127.0.0.1": "ECONNREFUSED", "host abstract socket": "ECONNREFUSED", "interfaces": ["lo"], "internet": "ENETUNREACH", "own loopback": "hi"}`
	if port6 != "0" {
		want = strings.Replace(want, `"host abstract socket"`, `"host ::1": "refused or unreachable", "host abstract socket"`, 1)
	}
	if got := strings.TrimSpace(r.Stdout); got != want {
		t.Errorf("network from the sandbox:\n got %s\nwant %s", got, want)
	}
	if n := accepted.Load(); n != own {
		t.Errorf("the host's listeners accepted %d connections from the sandbox", n-own)
	}
}

// TestBwrapEnvironment checks that the sandbox gets exactly engine.Spec.Env: the
// test's own environment (with a secret in it) must not leak. Not parallel:
// it uses t.Setenv.
func TestBwrapEnvironment(t *testing.T) { eachStartPath(t, false, testBwrapEnvironment) }

func testBwrapEnvironment(t *testing.T, path startPath) {
	t.Setenv("CODEEXEC_TEST_SECRET", "hunter2")
	e := newTestEngine(t, path.config(Config{}))
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"no PWD", map[string]string{"HOME": "/workspace", "A": "1", "WITH SPACE": "x y", "LANG": "C.UTF-8"}},
		{"PWD of the working directory", map[string]string{"HOME": "/workspace", "PWD": "/workspace", "A": "1"}},
		{"another PWD", map[string]string{"PWD": "/elsewhere"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := enginetest.Spec(t, `
import json
raw = open("/proc/self/environ", "rb").read().split(b"\0")
print(json.dumps(dict(kv.decode().split("=", 1) for kv in raw if kv)))`)
			spec.Env = tc.env
			r := enginetest.Run(t, e, spec, "", 30*time.Second)
			if r.Err != nil {
				t.Fatalf("sandbox failed: %v, stderr %q", r.Err, r.Stderr)
			}
			var got map[string]string
			if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil {
				t.Fatalf("bad output %q: %v", r.Stdout, err)
			}
			if !maps.Equal(got, spec.Env) {
				t.Errorf("environment = %v, want exactly %v", got, spec.Env)
			}
			if strings.Contains(r.Stdout, "hunter2") {
				t.Error("the host secret leaked into the sandbox")
			}
		})
	}
}

// TestBwrapSeparateTmp checks that two live sandboxes do not share /tmp.
func TestBwrapSeparateTmp(t *testing.T) { eachStartPath(t, true, testBwrapSeparateTmp) }

func testBwrapSeparateTmp(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	writer, err := e.Start(t.Context(), enginetest.Spec(t, `
import sys
open("/tmp/marker", "w").write("a")
print("written", flush=True)
sys.stdin.read()`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Kill(); _ = writer.Wait() })
	line, err := bufio.NewReader(writer.Stdout()).ReadString('\n')
	if err != nil || line != "written\n" {
		t.Fatalf("writer said %q, %v", line, err)
	}
	r := enginetest.Run(t, e, enginetest.Spec(t, `
import os
print("ok" if not os.path.exists("/tmp/marker") else "shared /tmp")`), "", 30*time.Second)
	if strings.TrimSpace(r.Stdout) != "ok" {
		t.Errorf("second sandbox: %q %v %q", r.Stdout, r.Err, r.Stderr)
	}
	_ = writer.Stdin().Close()
	if err := writer.Wait(); err != nil {
		t.Errorf("writer exit: %v", err)
	}
}
