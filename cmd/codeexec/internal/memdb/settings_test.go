package memdb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/services/flagenv"
)

// TestResolve parses the state dir settings and resolves them: ~ is HOME,
// a relative path is under the working directory, and a path that would
// need a home there is not is refused, naming the setting to change. The
// state dir of a database elsewhere is not needed outside serve.
func TestResolve(t *testing.T) {
	t.Parallel()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		env           map[string]string
		inServe       bool
		dir, db, fail string
	}{
		{"default", map[string]string{"HOME": "/h"}, true, "/h/MCPs", "/h/MCPs/codeexec.db", ""},
		{"tilde", map[string]string{"HOME": "/h", "MCP_BRIDGE_STATE_DIR": "~/x"}, true, "/h/x", "/h/x/codeexec.db", ""},
		{"home itself", map[string]string{"HOME": "/h", "MCP_BRIDGE_STATE_DIR": "~"}, true, "/h", "/h/codeexec.db", ""},
		{"relative", map[string]string{"HOME": "/h", "MCP_BRIDGE_STATE_DIR": "s"}, true, filepath.Join(cwd, "s"), filepath.Join(cwd, "s", "codeexec.db"), ""},
		{"db tilde", map[string]string{"HOME": "/h", "CODEEXEC_DB": "~/m.db"}, true, "/h/MCPs", "/h/m.db", ""},
		{"db relative", map[string]string{"HOME": "/h", "CODEEXEC_DB": "m.db"}, false, "", filepath.Join(cwd, "m.db"), ""},
		{"no home", nil, false, "", "", "state directory ~/MCPs starts with ~ and HOME is not set: set MCP_BRIDGE_STATE_DIR (--state-dir)"},
		{"no home in serve", map[string]string{"CODEEXEC_DB": "/d/m.db"}, true, "", "", "set MCP_BRIDGE_STATE_DIR"},
		{"no home, db elsewhere", map[string]string{"CODEEXEC_DB": "/d/m.db"}, false, "", "/d/m.db", ""},
		{"no home, db tilde", map[string]string{"CODEEXEC_DB": "~/m.db"}, false, "", "", "memory database ~/m.db starts with ~ and HOME is not set: set CODEEXEC_DB (--db)"},
		{"tilde user", map[string]string{"HOME": "/h", "MCP_BRIDGE_STATE_DIR": "~bob/x"}, true, "", "", "~bob/x starts with ~user, which codeexec does not expand"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := flagenv.New("test", func(k string) string { return tc.env[k] })
			var s Settings
			BindStateDir(fs, &s, func(k string) string { return tc.env[k] })
			if err := fs.Parse(nil); err != nil {
				t.Fatal(err)
			}
			// The paths resolved, or the error, which must say fail.
			err := s.Resolve(tc.inServe)
			got, want := s.StateDir+" "+s.Config("test").Path, tc.dir+" "+tc.db
			if err != nil {
				got = err.Error()
			}
			if (err != nil) != (tc.fail != "") || (err == nil && got != want) || !strings.Contains(got, tc.fail) {
				t.Errorf("Resolve gave %q; want %q (state dir, database) or an error saying %q", got, want, tc.fail)
			}
		})
	}
}
