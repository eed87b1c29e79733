package engine

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/codeexec/codeexec/sandboxd/internal/engine/seccomp"
)

// TestContainerSeccompProfile checks the profile container sandboxes get:
// Docker's default less the denied calls, and only when ExtraArgs do not
// bring their own.
func TestContainerSeccompProfile(t *testing.T) {
	t.Parallel()
	c, err := NewContainer(ContainerConfig{Runtime: "podman", Image: "img:1"}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	line := strings.Join(c.runArgs(Spec{ID: "cx-1", Argv: []string{"python3"}}), " ")
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
			for _, n := range append(r.Names, r.Name) {
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

	own, err := NewContainer(ContainerConfig{Runtime: "docker", Image: "img:1", ExtraArgs: []string{"--security-opt", "seccomp=unconfined"}}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Close() })
	if line := strings.Join(own.runArgs(Spec{ID: "cx-2", Argv: []string{"python3"}}), " "); strings.Count(line, "seccomp=") != 1 {
		t.Errorf("with a seccomp option in ExtraArgs, want only that one:\n%s", line)
	}
}
