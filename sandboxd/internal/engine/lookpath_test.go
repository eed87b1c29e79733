package engine

import "testing"

// An MCP client may start codeexec with an empty PATH; installed tools are
// still found in the system directories.
func TestLookPathFallsBackToSystemDirs(t *testing.T) {
	t.Setenv("PATH", "")
	names := []string{"bwrap", "setpriv", "sh"}
	if testing.Short() {
		names = names[1:] // the fast tier runs without bubblewrap
	}
	for _, name := range names {
		p, err := LookPath(name)
		if err != nil || p == "" {
			t.Errorf("LookPath(%q) with an empty PATH = %q, %v; want the system copy", name, p, err)
		}
	}
	if p, err := LookPath("no-such-tool-codeexec"); err == nil {
		t.Errorf("LookPath of a missing tool = %q, want an error", p)
	}
	if _, err := LookPath("/nonexistent/bwrap"); err == nil {
		t.Error("an explicit missing path must not fall back")
	}
}
