package durable

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// TestE2ECopyThatFailsSaysOnlyWhy runs `codeexec memoryd copy` from a
// mistyped file, into a missing directory, into a database a running
// memoryd holds, and from a file that is no database: each exits non-zero
// with the error alone (nothing on stdout), and leaves no file or
// directory behind; a copy that works prints its count. Before, a failed
// copy printed 'copied 0 records' as a successful one does, and one into
// a missing directory created it and succeeded.
func TestE2ECopyThatFailsSaysOnlyWhy(t *testing.T) {
	t.Parallel()
	env, state := stateWithRecords(t)
	db := filepath.Join(state, "codeexec.db")
	root, held := t.TempDir(), t.TempDir()
	sock := "unix:" + filepath.Join(held, "memoryd.sock")
	harness.StartProcess(t, env, "memoryd", "--listen", sock, "--db", filepath.Join(held, "held.db"), "--metrics", "")
	harness.WaitHealth(t, sock)
	if err := os.WriteFile(filepath.Join(root, "junk.db"), []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		from, to string // "ROOT" is root, "HELD" held
		want     string
	}{
		{"from a mistyped file", "ROOT/nodir/x.db", "ROOT/to.db",
			"no bbolt database at ROOT/nodir/x.db (the directory ROOT/nodir does not exist): --from takes an existing bbolt file or a postgres:// URL"},
		{"into a missing directory", db, "ROOT/nodir/to.db",
			"cannot create ROOT/nodir/to.db: the directory ROOT/nodir does not exist; create it first (copy creates no directory)"},
		{"into a database in use", db, "HELD/held.db", "HELD/held.db is in use by a running codeexec; stop it first, or copy into another file"},
		{"from a file that is no database", "ROOT/junk.db", "ROOT/to.db", "ROOT/junk.db: invalid database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := strings.NewReplacer("ROOT", root, "HELD", held)
			from, to, want := r.Replace(tc.from), r.Replace(tc.to), r.Replace(tc.want)
			before := listTree(t, root, state, held)
			stdout, stderr, err := runCopy(t, env, from, to)
			if err == nil || stdout != "" || !strings.Contains(stderr, want) {
				t.Errorf("copy --from %s --to %s: %v, stdout %q, stderr:\n%s\nwant only a failure saying %q", from, to, err, stdout, stderr, want)
			}
			if after := listTree(t, root, state, held); !slices.Equal(before, after) {
				t.Errorf("the failed copy changed the files:\nbefore %v\nafter  %v", before, after)
			}
		})
	}

	to := filepath.Join(root, "to.db")
	if stdout, stderr, err := runCopy(t, env, db, to); err != nil || !strings.HasPrefix(stdout, "from "+db+" to "+to+": copied 8 records\n") {
		t.Errorf("copy that works: %v, stdout %q, stderr:\n%s\nwant it to say it copied 8 records", err, stdout, stderr)
	}
}

// runCopy runs `codeexec memoryd copy --from FROM --to TO`.
func runCopy(t *testing.T, env []string, from, to string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), harness.Binary, "memoryd", "copy", "--from", from, "--to", to)
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}
