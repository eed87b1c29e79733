package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// hostDir makes a directory every sandbox uid can read, holding name with
// text.
func hostDir(t *testing.T, name, text string) string {
	t.Helper()
	d := t.TempDir()
	_ = os.Chmod(filepath.Dir(d), 0o755)
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// Over HTTP, a tenant's mounts (--tenant-mount) are in its sandboxes
// only: alpha reads its directory beside the operator's shared one, also
// in the sandbox its session is restored into after a kill, and beta sees
// the shared one and nothing of alpha's. A mount naming no tenant stops
// codeexec at start, saying what to write.
func TestE2ETenantMountsStayWithTheirTenant(t *testing.T) {
	t.Parallel()
	shared := hostDir(t, "all.txt", "for everyone")
	mine := hostDir(t, "alpha.txt", "alpha's only")
	n := startNeighbours(t, map[string]string{"CODEEXEC_MOUNTS": shared + ":/mnt/shared"},
		"--tenant-mount", "alpha="+mine+":/mnt/own")
	const look = `import os
print(open('/mnt/shared/all.txt').read(), os.path.exists('/mnt/own'), sorted(os.listdir('/mnt')))
try:
    print(open('/mnt/own/alpha.txt').read())
except OSError as e:
    print(type(e).__name__)`
	if got, want := harness.Joined(harness.Code(t, n.alpha, look).Stdout()), "for everyone True ['own', 'shared']\nalpha's only"; got != want {
		t.Errorf("alpha saw %q; want %q", got, want)
	}
	if got, want := harness.Joined(harness.Code(t, n.beta, look).Stdout()), "for everyone False ['shared']\nFileNotFoundError"; got != want {
		t.Errorf("beta saw %q; want %q", got, want)
	}
	// The same after alpha's sandbox dies and its session is restored
	// into a new one.
	if _, err := harness.CallRunPython(t.Context(), n.alpha, map[string]any{"code": "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"}); err != nil {
		t.Fatal(err)
	}
	if got, want := harness.Joined(harness.Code(t, n.alpha, look).Stdout()), "for everyone True ['own', 'shared']\nalpha's only"; got != want {
		t.Errorf("alpha, restored, saw %q; want %q", got, want)
	}

	cmd := exec.Command(harness.Binary, "serve")
	cmd.Env = harness.BaseEnv(t, map[string]string{"CODEEXEC_TENANT_MOUNTS": mine})
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "names no tenant: write TENANT=HOST_DIR") {
		t.Errorf("a tenant mount without a tenant: %v, want a refusal that says what to write:\n%s", err, harness.TailOf(string(out), 2000))
	}
}
