package bwrap

import (
	"testing"

	"github.com/codeexec/codeexec/services/vmtest"
)

// TestBwrapOnCgroupV2 runs the tests that depend on cgroups in a vmtest
// machine, whose only hierarchy is v2 (this project's hosts run v1):
// limits, socket buffers in memory.max, the freezer, kills, cleanup and
// the spares' cgroups, with sandboxd started in a service's cgroup as
// systemd starts it. (The whole package passes there but for the CPU
// quota's test, which is left out: under emulation the machine's clock
// runs unevenly, so CPU time against wall time says nothing.)
func TestBwrapOnCgroupV2(t *testing.T) {
	if vmtest.Inside() {
		return
	}
	vmtest.RunSelf(t, vmtest.Tests{
		Names: []string{"TestBwrapCgroupLimits", "TestBwrapPause", "TestBwrapKill", "TestBwrapCleanup", "TestForkSpares", "TestBwrapSpareLaunchers"},
		Skip:  "TestBwrapCgroupLimits/.*/cpu_quota",
	})
}
