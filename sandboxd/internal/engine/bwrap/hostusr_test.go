package bwrap

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
)

// TestHostUsrDebianPackages: a sandbox on the host's /usr imports
// Debian-packaged numpy and matplotlib, which rely on /etc pieces (the
// alternatives that name libblas.so.3, matplotlibrc), runs awk and which
// (alternatives too), and finds the CA certificates; the host's other
// /etc stays hidden. scripts/install-tools.sh installs the two packages.
func TestHostUsrDebianPackages(t *testing.T) { eachStartPath(t, true, testHostUsrDebianPackages) }

func testHostUsrDebianPackages(t *testing.T, path startPath) {
	if os.Getenv("CODEEXEC_TEST_ENV_ROOT") != "" {
		t.Skip("a test of the host's /usr; CODEEXEC_TEST_ENV_ROOT runs the engine in an environment")
	}
	if out, err := exec.Command(python, "-I", "-c", "import numpy, matplotlib").CombinedOutput(); err != nil {
		t.Fatalf("the host lacks Debian's numpy or matplotlib (%s): apt-get install python3-numpy python3-matplotlib (scripts/install-tools.sh does)", strings.TrimSpace(string(out)))
	}
	e := newTestEngine(t, path.config(Config{}))
	script := `
import io, os, shutil, ssl, subprocess
import numpy as np
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
x = np.linalg.solve([[2.0, 1.0], [1.0, 3.0]], [3.0, 4.0]).round(6).tolist()
fig, ax = plt.subplots(); ax.plot([1, 2]); buf = io.BytesIO(); fig.savefig(buf, format="png")
awk = subprocess.run(["awk", "BEGIN{print 6*7}"], capture_output=True, text=True).stdout.strip()
which = subprocess.run(["which", "sh"], capture_output=True).returncode
certs = ssl.create_default_context().cert_store_stats()["x509_ca"]
print(x, buf.getvalue()[:4] == b"\x89PNG", awk, which, certs > 50, os.path.exists("/etc/ssl/private"), os.path.exists("/etc/shadow"))`
	r := enginetest.Run(t, e, enginetest.Spec(t, script), "", 60*time.Second)
	if got, want := strings.TrimSpace(r.Stdout), "[1.0, 1.0] True 42 0 True False False"; r.Err != nil || got != want {
		t.Fatalf("got %q, want %q (err %v, stderr %s)", got, want, r.Err, r.Stderr)
	}
}
