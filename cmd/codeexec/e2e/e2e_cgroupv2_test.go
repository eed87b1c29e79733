package e2e

import (
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
	"github.com/codeexec/codeexec/services/vmtest"
)

// TestE2EOnCgroupV2 runs the end-to-end tests whose outcome the cgroup
// version decides in a vmtest machine with cgroup v2 alone, as every
// current distribution runs: codeexec serve started in a service's
// cgroup, two tenants, socket buffers counted in each sandbox's memory
// limit (in its own cgroup, which fails when sandboxes get none), the
// kernel objects counted per user.
func TestE2EOnCgroupV2(t *testing.T) {
	if vmtest.Inside() || harness.ContainerRuntime() != "" {
		return // the machine runs the tests under bwrap, its default
	}
	t.Parallel()
	vmtest.RunSelf(t, vmtest.Tests{
		// The bombs are left to TestBwrapOnCgroupV2: under emulation, on a
		// busy host, they outlast their calls' timeouts.
		Names: []string{"TestE2ESocketBuffersCountAgainstTheSandbox", "TestE2ESandboxKernelObjectsStayInTheirShare"},
		// A call waits for its end however slow the emulated machine is,
		// rather than answering "running" at the yield.
		Env: []string{"CODEEXEC_E2E_BINARY=" + harness.Binary, "CODEEXEC_YIELD=10m"},
		// The kernel's TCP memory is 3/32 of it at most: with 8 GiB,
		// 768 MiB, more than the sandbox's limit, which is the bound.
		Memory: "8G",
	})
}
