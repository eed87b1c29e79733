package vmtest

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The machine has cgroup v2 alone with the controllers sandboxes use (the
// job in a cgroup of its own, as systemd runs a service), no network but
// loopback, and a root whose writes stay in the machine.
func TestMachineIsCgroupV2Only(t *testing.T) {
	if !Inside() {
		RunSelf(t, Tests{Names: []string{t.Name()}})
		if _, err := os.Stat("/vmtest-written"); err == nil {
			t.Error("a file the machine wrote to its root is on the host")
		}
		return
	}
	b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !slices.Contains(strings.Fields(string(b)), c) {
			t.Errorf("cgroup v2 controllers %q lack %s", b, c)
		}
	}
	if self, _ := os.ReadFile("/proc/self/cgroup"); strings.TrimSpace(string(self)) != "0::/job.service" {
		t.Errorf("/proc/self/cgroup: %q, want the unified hierarchy alone, the job in a service's cgroup", self)
	}
	if b, _ := os.ReadFile("/proc/net/dev"); strings.Count(string(b), ":") != 1 {
		t.Errorf("network devices: %s; want loopback alone", b)
	}
	if err := os.WriteFile("/vmtest-written", nil, 0o644); err != nil {
		t.Errorf("the machine's root is not writable: %v", err)
	}
}
