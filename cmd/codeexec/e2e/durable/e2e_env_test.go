package durable

import (
	"cmp"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// A session pinned to a second environment (CODEEXEC_E2E_ENV2, built
// with one package more than the default: CODEEXEC_E2E_ENV2_MODULE
// imports it; scripts/test-environments.sh builds it) has that package.
// A session checkpointed in the default environment and continued by a
// process in the second one comes back with its DataFrame, and the
// result says which two environments and what changed.
func TestE2EEnvironmentPinnedSession(t *testing.T) {
	t.Parallel()
	second, module := os.Getenv("CODEEXEC_E2E_ENV2"), os.Getenv("CODEEXEC_E2E_ENV2_MODULE")
	if second == "" || module == "" {
		t.Skip("a second environment is tested when one is built and named: CODEEXEC_E2E_ENV2=NAME CODEEXEC_E2E_ENV2_MODULE=MODULE (scripts/test-environments.sh builds data2 with python3-toolz)")
	}
	first := cmp.Or(os.Getenv("CODEEXEC_E2E_ENV"), "default")
	state := harness.StateEnv(t.TempDir())
	in := func(env string) []string {
		extra := map[string]string{"CODEEXEC_ENV": env}
		for k, v := range state {
			extra[k] = v
		}
		if rt := harness.ContainerRuntime(); rt != "" && env == second {
			// The second environment's own image, made ahead: its import
			// takes longer than a server may take to answer.
			extra["MCP_BRIDGE_IMAGE"] = ""
			if out, err := exec.Command(harness.Binary, "env", "image", second, rt).CombinedOutput(); err != nil {
				t.Fatalf("codeexec env image %s %s: %v: %s", second, rt, err, out)
			}
		}
		return harness.BaseEnv(t, extra)
	}

	addr := harness.FreeAddr(t)
	a, _ := harness.StartCommand(t, in(first), "serve", "--http", addr)
	harness.WaitHTTP(t, "http://"+addr+"/healthz")
	out := harness.SDKClient(t, modern("http://"+addr,
		pyCall("import pandas as pd\ndf = pd.DataFrame({'n': [1, 2, 3]})", ""),
		pyCall("try:\n    import "+module+"\n    print('has it')\nexcept ImportError:\n    print('lacks it')", "$session")))
	h := sessionOf(t, out, 0)
	if got := harness.ResultStdout(t, out, 1); got != "lacks it" {
		t.Fatalf("environment %s already has %s (%q): the test needs one that lacks it", first, module, got)
	}
	stop(t, a, syscall.SIGTERM)

	addr = harness.FreeAddr(t)
	harness.StartProcess(t, in(second), "serve", "--http", addr)
	harness.WaitHTTP(t, "http://"+addr+"/healthz")
	out = harness.SDKClient(t, modern("http://"+addr,
		pyCall("import "+module+"\nprint(int(df.n.sum()), "+module+".__name__)", h),
		pyCall("print('fresh')", "")))
	if got := harness.ResultStdout(t, out, 0); got != "6 "+module {
		t.Fatalf("in %s: %q, want the DataFrame back and %s imported (%s)", second, got, module, harness.ResultText(out.Results[0]))
	}
	text := harness.ResultText(out.Results[0])
	for _, want := range []string{"restored", "the checkpoint was made in environment " + first, "restored into " + second, "+" + module} {
		if !strings.Contains(text, want) {
			t.Errorf("the result after the move does not say %q: %s", want, text)
		}
	}
	if text := harness.ResultText(out.Results[1]); strings.Contains(text, "environment") {
		t.Errorf("a new session in %s mentions an environment change: %s", second, text)
	}
}
