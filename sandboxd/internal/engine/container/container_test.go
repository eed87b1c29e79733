package container

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/seccomp"
)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestContainerRunArgs(t *testing.T) {
	t.Parallel()
	spec := engine.Spec{
		ID: "cx-1", AgentDir: "/srv/agent", Argv: []string{"/usr/bin/python3", "-I", "/opt/codeexec/agent.py"},
		Labels: map[string]string{"codeexec.sandbox": "cx-1"},
		Env:    map[string]string{"HOME": "/workspace", "B": "2"},
		Limits: engine.Limits{MemoryBytes: 512 << 20, Pids: 128, CPUs: 0.5, CPUTime: 1500 * time.Millisecond,
			TmpBytes: 64 << 20, WorkspaceBytes: 128 << 20, OpenFiles: 1024},
	}
	for _, tc := range []struct{ rt, user string }{{"docker", ""}, {"podman", ""}, {"docker", "65534:65534"}, {"podman", "65534:65534"}} {
		t.Run(tc.rt+" user "+cmp.Or(tc.user, "of its own"), func(t *testing.T) {
			rt := tc.rt
			c, err := New(Config{Runtime: rt, Image: "img:1", ExtraArgs: []string{"--runtime=runsc"}, User: tc.user, FilesDir: t.TempDir()}, quietLogger())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			who, err := c.claim(spec.ID)
			if err != nil {
				t.Fatal(err)
			}
			defer c.unclaim(who, false)
			user, uid := "65534:65534", "65534"
			if tc.user == "" {
				if who.uid < DefaultFirstUID || who.uid >= DefaultFirstUID+DefaultUIDCount {
					t.Fatalf("uid %d is outside the default range", who.uid)
				}
				uid = strconv.Itoa(who.uid)
				user = uid + ":" + uid
			}
			args := c.runArgs(spec, who)
			line := strings.Join(args, " ")
			wants := []string{
				"run -i --pull never --name codeexec-cx-1",
				"--label " + LabelOwner + "=" + c.Owner(), "--label codeexec.session=cx-1", "--label codeexec.sandbox=cx-1",
				"--network none --read-only --cap-drop ALL --security-opt no-new-privileges --user " + user,
				"--init", "--log-driver none", "--workdir /workspace",
				"--tmpfs /tmp:rw,noexec,nosuid,nodev,mode=1777,size=67108864",
				"--tmpfs /workspace:rw,noexec,nosuid,nodev,mode=1777,size=134217728",
				"--pids-limit 128", "--memory 536870912 --memory-swap 536870912", "--cpus 0.5",
				"--ulimit nofile=1024:1024", "--ulimit nproc=32768:32768", "--ulimit cpu=2:2",
				"--mount type=bind,src=/srv/agent,dst=/opt/codeexec,readonly",
				"--env B=2 --env HOME=/workspace",
				"--runtime=runsc img:1 /usr/bin/python3 -I /opt/codeexec/agent.py",
			}
			if tc.user == "" {
				wants = append(wants, "--mount type=bind,src="+who.passwd+",dst=/etc/passwd,readonly",
					"--mount type=bind,src="+who.group+",dst=/etc/group,readonly", "--label "+LabelUID+"="+uid)
				passwd, err := os.ReadFile(who.passwd)
				if err != nil || !strings.Contains(string(passwd), "\nsandbox:x:"+user+":sandbox:/workspace:") {
					t.Errorf("the sandbox's passwd file: %q %v", passwd, err)
				}
			} else if strings.Contains(line, "/etc/passwd") || strings.Contains(line, LabelUID) {
				t.Errorf("an operator's user gets the image's passwd and no uid label:\n%s", line)
			}
			for _, want := range wants {
				if !strings.Contains(line, want) {
					t.Errorf("run args lack %q:\n%s", want, line)
				}
			}
			if !strings.HasSuffix(line, "img:1 /usr/bin/python3 -I /opt/codeexec/agent.py") {
				t.Errorf("the image and argv must come last:\n%s", line)
			}
			// docker keeps the image's owner of /workspace unless told the
			// uid; podman refuses uid= and must not get podman-only flags
			// on docker.
			if got, want := strings.Contains(line, "uid="+uid+",gid="+uid), rt == "docker"; got != want {
				t.Errorf("uid/gid tmpfs options present = %v, want %v:\n%s", got, want, line)
			}
			if got, want := slices.Contains(args, "--read-only-tmpfs=false"), rt == "podman"; got != want {
				t.Errorf("--read-only-tmpfs=false present = %v, want %v", got, want)
			}
		})
	}
}

func TestDetectPodmanGlobals(t *testing.T) {
	t.Parallel()
	have := func(string) bool { return true }
	none := func(string) bool { return false }
	cases := []struct {
		name    string
		info    []string
		have    func(string) bool
		systemd bool
		want    []string
	}{
		{"v1 with crun and no systemd", []string{"v1", "systemd", "crun"}, have, false, []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}},
		{"v1 already runc and cgroupfs", []string{"v1", "cgroupfs", "runc"}, have, false, nil},
		{"v1 crun but runc missing", []string{"v1", "cgroupfs", "crun"}, none, false, nil},
		{"v2 with systemd", []string{"v2", "systemd", "crun"}, have, true, nil},
		{"unparsable info", []string{"?"}, have, false, nil},
	}
	for _, tc := range cases {
		if got := detectPodmanGlobals(tc.info, tc.have, tc.systemd); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestContainerOrphanRules(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Runtime: "docker", Image: "img"}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	sibling, err := New(Config{Runtime: "docker", Image: "img"}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sibling.Close() })
	now := time.Now()
	old := now.Add(-2 * staleAfter).UTC().Format(time.RFC3339Nano)
	recent := now.Add(-time.Second).UTC().Format(time.RFC3339Nano)
	dead := deadPID(t)
	// A live process that took the PID of a sandboxd that made a
	// container before it started (a busy host reuses PIDs): it is not
	// that container's owner.
	child := exec.Command("/bin/sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	reused := c.host + "/" + strconv.Itoa(child.Process.Pid) + "/abcd"
	hourAgo := now.Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	// Another host name (a compose replica) in this PID namespace, or in
	// another one, and a live process of that namespace started before
	// the container.
	elsewhere := "replica-2/"
	otherSpace := "11111111-2222-3333-4444-555555555555/4026531836"
	if c.pidSpace == "" || c.pidSpace == otherSpace {
		t.Fatalf("this process's PID space is %q: cannot test the rules that use it", c.pidSpace)
	}
	parent := strconv.Itoa(os.Getppid())
	ticks, ok := processStartTicks(os.Getppid())
	if !ok {
		t.Fatal("cannot read the start of this process's parent")
	}
	parentStart, otherStart := strconv.FormatInt(ticks, 10), strconv.FormatInt(ticks+1, 10)
	cases := []struct {
		name, owner, space, start, state, finished string
		created                                    string
		all, want                                  bool
	}{
		{"ours while running", c.Owner(), "", "", "running", "", "", false, false},
		{"ours at Close", c.Owner(), "", "", "running", "", "", true, true},
		{"earlier sandboxd on this host, gone", c.host + "/" + dead + "/abcd", "", "", "running", "", "", false, true},
		{"another engine open in this process", sibling.Owner(), "", "", "running", "", "", false, false},
		{"earlier incarnation with our PID (PID 1 in a restarted container)", c.host + "/" + strconv.Itoa(os.Getpid()) + "/abcd", "", "", "running", "", "", false, true},
		{"another live sandboxd on this host", c.host + "/1/abcd", "", "", "running", "", "", false, os.Getpid() == 1},
		{"another host, running", "elsewhere/1/abcd", "", "", "running", "", "", true, false},
		{"another host, exited long ago", "elsewhere/1/abcd", "", "", "exited", old, "", false, true},
		{"another host, exited just now", "elsewhere/1/abcd", "", "", "exited", recent, "", false, false},
		{"podman time format", "elsewhere/1/abcd", "", "", "exited", now.Add(-2 * staleAfter).Format("2006-01-02 15:04:05.999999999 -0700 MST"), "", false, true},
		{"a live process that took a gone owner's PID", reused, "", "", "exited", recent, hourAgo, false, true},
		{"the same, podman's time format", reused, "", "", "running", "", now.Add(-time.Hour).Format("2006-01-02 15:04:05.999999999 -0700 MST"), false, true},
		{"a live owner that made the container after it started", reused, "", "", "running", "", now.Add(time.Minute).UTC().Format(time.RFC3339Nano), false, false},
		{"a live owner, the container's time unreadable", reused, "", "", "exited", recent, "soon", false, false},
		{"another host name in this PID space, owner gone", elsewhere + dead + "/abcd", c.pidSpace, "1", "running", "", "", false, true},
		{"the same, paused (cut off from the store, then died)", elsewhere + dead + "/abcd", c.pidSpace, "1", "paused", "", "", false, true},
		// The owner's start in clock ticks decides, not the wall clock
		// (which may have been stepped): made "an hour ago", before the
		// owner's start as the wall clock now puts it, it is still the
		// owner's.
		{"another host name in this PID space, owner alive", elsewhere + parent + "/abcd", c.pidSpace, parentStart, "paused", "", hourAgo, false, false},
		{"another host name in this PID space, its PID another process's", elsewhere + parent + "/abcd", c.pidSpace, otherStart, "running", "", now.UTC().Format(time.RFC3339Nano), false, true},
		{"in this PID space without the start label, owner alive", elsewhere + parent + "/abcd", c.pidSpace, "", "running", "", now.UTC().Format(time.RFC3339Nano), false, false},
		{"another host name in another PID space, its PID gone here", elsewhere + dead + "/abcd", otherSpace, "1", "paused", "", "", false, false},
		{"another host name, no PID space label (an older sandboxd)", elsewhere + dead + "/abcd", "", "", "paused", "", "", false, false},
	}
	for _, tc := range cases {
		if got := c.orphan(listed{owner: tc.owner, pidSpace: tc.space, ownerStart: tc.start, state: tc.state, finished: tc.finished, created: tc.created}, tc.all, now); got != tc.want {
			t.Errorf("%s: orphan = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(cmd.Process.Pid)
}

func TestContainerCheckMissingBinary(t *testing.T) {
	t.Parallel()
	for rt, advice := range map[string]string{"docker": "apt-get install docker.io", "podman": "apt-get install podman runc"} {
		c, err := New(Config{Runtime: rt, Path: "/nonexistent/" + rt, Image: "img"}, quietLogger())
		if err != nil {
			t.Fatal(err)
		}
		err = c.Check(t.Context())
		if !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), advice) {
			t.Errorf("%s: Check = %v, want ErrUnavailable saying %q", rt, err, advice)
		}
		if _, err := c.Start(t.Context(), engine.Spec{ID: "x", Argv: []string{"true"}}); !errors.Is(err, engine.ErrUnavailable) {
			t.Errorf("%s: Start = %v, want ErrUnavailable", rt, err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("%s: Close = %v", rt, err)
		}
	}
}

func TestNewContainerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{Runtime: "lxc", Image: "img"}, quietLogger()); err == nil || !strings.Contains(err.Error(), "want podman or docker") {
		t.Errorf("unknown runtime: %v", err)
	}
	if _, err := New(Config{Runtime: "docker"}, quietLogger()); err == nil || !strings.Contains(err.Error(), "MCP_BRIDGE_IMAGE") {
		t.Errorf("no image: %v", err)
	}
}

// TestContainerSeccompProfile checks the profile container sandboxes get:
// Docker's default less the denied calls, and only when ExtraArgs do not
// bring their own.
func TestContainerSeccompProfile(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Runtime: "podman", Image: "img:1"}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	line := strings.Join(c.runArgs(engine.Spec{ID: "cx-1", Argv: []string{"python3"}}, identity{user: sharedUser}), " ")
	if !strings.Contains(line, "--security-opt seccomp="+c.seccompProfile) || c.seccompProfile == "" {
		t.Fatalf("no seccomp profile in the run args:\n%s", line)
	}
	b, err := os.ReadFile(c.seccompProfile)
	if err != nil {
		t.Fatal(err)
	}
	var p mobyseccomp.Seccomp
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("profile is not a Docker profile: %v", err)
	}
	if p.DefaultAction != specs.ActErrno {
		t.Errorf("default action %s, want Docker's %s", p.DefaultAction, specs.ActErrno)
	}
	allowed := map[string]bool{}
	for _, r := range p.Syscalls {
		if r.Action == specs.ActAllow {
			for _, n := range r.Names {
				allowed[n] = true
			}
		}
	}
	for _, n := range seccomp.Denied() {
		if allowed[n] {
			t.Errorf("the profile allows %s", n)
		}
	}
	for _, n := range []string{"read", "write", "openat", "clone", "execve", "futex", "wait4"} {
		if !allowed[n] {
			t.Errorf("the profile does not allow %s", n)
		}
	}

	own, err := New(Config{Runtime: "docker", Image: "img:1", ExtraArgs: []string{"--security-opt", "seccomp=unconfined"}}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Close() })
	if line := strings.Join(own.runArgs(engine.Spec{ID: "cx-2", Argv: []string{"python3"}}, identity{user: sharedUser}), " "); strings.Count(line, "seccomp=") != 1 {
		t.Errorf("with a seccomp option in ExtraArgs, want only that one:\n%s", line)
	}
}

func TestDecisiveLine(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"Error: image not known", "Error: image not known"},
		{"Trying to pull...\nError: short-name resolution\n", "Error: short-name resolution"},
		{"docker: Error response from daemon: Range of CPUs is from 0.01 to 2.00, as there are only 2 CPUs available.\n" +
			"Run 'docker run --help' for more information", "docker: Error response from daemon: Range of CPUs is from 0.01 to 2.00, as there are only 2 CPUs available."},
		{"docker: invalid reference format.\nSee 'docker run --help'.", "docker: invalid reference format."},
		{"Run 'docker run --help' for more information", "Run 'docker run --help' for more information"},
		{"a\n\n  \n", "a"},
		{"", ""},
	} {
		if got := decisiveLine(tt.in); got != tt.want {
			t.Errorf("decisiveLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestReapOrphansPassesOverContainersThatWent: a container removed by its
// owner between the listing and the inspection made podman inspect none,
// and reaping warned "could not inspect containers" and removed nothing.
// Against a scripted CLI that answers as podman does, the vanished one is
// dropped, the others are inspected again and the orphan among them is
// removed, with no warning; an error of another kind still warns.
func TestReapOrphansPassesOverContainersThatWent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	cli := filepath.Join(dir, "podman")
	script := `#!/bin/sh
echo "$*" >> ` + calls + `
case "$1" in
ps) echo gone0001; echo kept0002 ;;
inspect)
  for a in "$@"; do
    if [ "$a" = gone0001 ]; then echo 'Error: inspecting object: no such object: "gone0001"' >&2; exit 125; fi
    if [ "$a" = broken ]; then echo 'Error: permission denied' >&2; exit 125; fi
  done
  echo "/codeexec-kept|elsewhere/1/abcd|||exited|2000-01-01T00:00:00Z|2000-01-01T00:00:00Z|" ;;
esac
`
	if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c, err := New(Config{Runtime: "podman", Image: "img"}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.bin, c.workDir = cli, dir
	c.reapOrphans(t.Context(), false)
	got, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "\nrm -f codeexec-kept\n") || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("calls:\n%s\nlogs:\n%s\nwant codeexec-kept removed and no warning", got, logs.String())
	}
	if _, err := c.inspectExisting(t.Context(), []string{"broken"}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("inspect failing for another reason: %v, want its error", err)
	}
}
