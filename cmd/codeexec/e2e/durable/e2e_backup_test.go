package durable

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/dial"
)

// End-to-end tests of `codeexec memoryd backup FILE`: the real binary on a
// real bbolt file, with a real running memoryd where one holds it.

// TestE2EBackupRefusesADatabaseInUse backs up onto the database that a
// running memoryd holds: by its path, through a symlink and a hard link,
// and through that memoryd (--memory), where the backup knows no path and
// finds the file locked; and onto another memoryd's database. Each is
// refused, naming the file and what to pass instead, with nothing written
// or renamed; a record saved after them survives the memoryd's restart.
// Before, the backup was renamed over the file: the memoryd went on
// writing to a file no longer there, and lost those writes when it
// restarted.
func TestE2EBackupRefusesADatabaseInUse(t *testing.T) {
	t.Parallel()
	dir, other := t.TempDir(), t.TempDir()
	env := harness.BaseEnv(t, nil)
	live, sock := filepath.Join(dir, "codeexec.db"), "unix:"+filepath.Join(dir, "memoryd.sock")
	md, _ := harness.StartCommand(t, env, "memoryd", "--listen", sock, "--state-dir", dir, "--metrics", "")
	harness.WaitHealth(t, sock)
	otherSock := "unix:" + filepath.Join(other, "memoryd.sock")
	harness.StartProcess(t, env, "memoryd", "--listen", otherSock, "--db", filepath.Join(other, "other.db"), "--metrics", "")
	harness.WaitHealth(t, otherSock)
	save(t, sock, "before", "1")

	links := t.TempDir()
	symlink, hardlink := filepath.Join(links, "sym.db"), filepath.Join(links, "hard.db")
	if err := os.Symlink(live, symlink); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(live, hardlink); err != nil {
		t.Fatal(err)
	}
	liveInfo, err := os.Stat(live)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		target string
		want   []string
	}{
		{"its path", []string{"--state-dir", dir}, live,
			[]string{live + " is the memory database being backed up", "nothing was written: name another file, e.g. " + filepath.Join(dir, "codeexec-backup.db")}},
		{"a symlink to it", []string{"--state-dir", dir}, symlink, []string{symlink + " (the same file as " + live + ") is the memory database being backed up"}},
		{"a hard link to it", []string{"--db", live}, hardlink, []string{hardlink + " (the same file as " + live + ") is the memory database being backed up"}},
		{"its path, through the memoryd", []string{"--memory", sock}, live,
			[]string{live + " is a database in use: pid ", "nothing was written: name a file that no process holds"}},
		{"another memoryd's database", []string{"--state-dir", dir}, filepath.Join(other, "other.db"), []string{filepath.Join(other, "other.db") + " is a database in use: pid "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := listTree(t, dir, links, other)
			stdout, stderr, err := runBackup(t, env, tc.args, tc.target)
			if err == nil || stdout != "" {
				t.Fatalf("backup onto %s: %v, stdout %q; want a refusal", tc.target, err, stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("backup onto %s says:\n%s\nwant it to say %q", tc.target, stderr, w)
				}
			}
			if after := listTree(t, dir, links, other); !slices.Equal(before, after) {
				t.Errorf("the refused backup changed the files:\nbefore %v\nafter  %v", before, after)
			}
			if fi, err := os.Stat(live); err != nil || !os.SameFile(fi, liveInfo) {
				t.Errorf("the database is no longer the file the memoryd opened: %v", err)
			}
		})
	}

	save(t, sock, "after", "2")
	if err := md.Process.Signal(harness.InterruptSignal); err != nil {
		t.Fatal(err)
	}
	if err := md.Wait(); err != nil {
		t.Fatalf("memoryd stopped with %v", err)
	}
	again := "unix:" + filepath.Join(dir, "again.sock")
	harness.StartProcess(t, env, "memoryd", "--listen", again, "--state-dir", dir, "--metrics", "")
	harness.WaitHealth(t, again)
	for _, key := range []string{"before", "after"} {
		conn := dialMemoryd(t, again)
		if _, err := memoryv1.NewMemoryServiceClient(conn).GetMemory(t.Context(), &memoryv1.GetMemoryRequest{Key: key}); err != nil {
			t.Errorf("after a restart, the record %q saved while the backups were refused is gone: %v", key, err)
		}
	}
}

// TestE2EBackupWritesThroughSymlinks backs up to a symlink to an old
// backup in another directory, and to a symlink to a file not yet there:
// the backup is the file the link points to, and the link stays. Before,
// the rename replaced the link with a file of its own.
func TestE2EBackupWritesThroughSymlinks(t *testing.T) {
	t.Parallel()
	env, state := stateWithRecords(t)
	links, backups := t.TempDir(), t.TempDir()
	old := filepath.Join(backups, "old.db")
	if err := os.WriteFile(old, []byte("an old backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, link, points string }{
		{"to an old backup", filepath.Join(links, "latest.db"), old},
		{"to a new file", filepath.Join(links, "next.db"), filepath.Join(backups, "new.db")},
		{"relative, to a new file", filepath.Join(links, "rel.db"), filepath.Join("..", filepath.Base(backups), "rel.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Symlink(tc.points, tc.link); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, err := runBackup(t, env, []string{"--state-dir", state}, tc.link)
			if err != nil || !strings.Contains(stdout, "backed up ") {
				t.Fatalf("backup to %s: %v\n%s%s", tc.link, err, stdout, stderr)
			}
			if got, err := os.Readlink(tc.link); err != nil || got != tc.points {
				t.Errorf("after the backup the link is %q, %v; want it still pointing to %s", got, err, tc.points)
			}
			points := tc.points
			if !filepath.IsAbs(points) {
				points = filepath.Join(links, points)
			}
			checkBackup(t, env, points)
		})
	}
}

// TestE2EBackupStreamsToPipes backs up to a FIFO and to /dev/fd/1, a
// pipe: the backup streams into them, the line that says so goes to
// stderr, and what the reader got is a whole database. Before, the backup
// went to a temporary file renamed over the FIFO, or failed to create one
// in /dev/fd. (Not /dev/stdout itself: a binary without this fix, run as
// root, creates the file in /dev and renames it over /dev/stdout.)
func TestE2EBackupStreamsToPipes(t *testing.T) {
	t.Parallel()
	env, state := stateWithRecords(t)

	t.Run("a FIFO", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		// The test holds both ends before the backup starts: the read end
		// gets whatever is written to the FIFO, and the write end keeps
		// it from ending before the backup has run, whatever the backup
		// does with the path.
		r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(r)
			got <- b
		}()
		stdout, stderr, err := runBackup(t, env, []string{"--state-dir", state}, fifo)
		_ = w.Close()
		b := <-got
		if err != nil || stdout != "" || !strings.Contains(stderr, "backed up ") {
			t.Fatalf("backup to a FIFO: %v, stdout %q, stderr:\n%s", err, stdout, stderr)
		}
		if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
			t.Errorf("after the backup %s is not the FIFO: %v", fifo, describe(fi, err))
		}
		checkBackupBytes(t, env, b)
	})

	t.Run("/dev/fd/1", func(t *testing.T) {
		cmd := exec.CommandContext(t.Context(), harness.Binary, "memoryd", "backup", "--state-dir", state, "/dev/fd/1")
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr // a pipe each
		if err := cmd.Run(); err != nil || !strings.Contains(stderr.String(), "backed up ") {
			t.Fatalf("backup to /dev/fd/1: %v\n%s", err, stderr.String())
		}
		checkBackupBytes(t, env, stdout.Bytes())
	})
}

// TestE2EBackupFromOrToAMissingPlaceCreatesNothing runs backups from a
// mistyped state dir or --db, from a state dir that holds no database,
// and into a directory that does not exist: each fails naming what is
// missing, prints nothing on stdout, and leaves no file or directory
// behind. Before, the backup created the state dir and an empty database
// in it, and reported success; and into a missing directory it named
// only the temporary file it could not create.
func TestE2EBackupFromOrToAMissingPlaceCreatesNothing(t *testing.T) {
	t.Parallel()
	env, state := stateWithRecords(t)
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string // "ROOT" is root
		want string
	}{
		{"a mistyped state dir", []string{"--state-dir", "ROOT/stat", "ROOT/out.db"},
			"no memory database at ROOT/stat/codeexec.db: the state dir ROOT/stat (--state-dir, MCP_BRIDGE_STATE_DIR) does not exist; name the state dir that holds codeexec.db"},
		{"a state dir without a database", []string{"--state-dir", "ROOT/empty", "ROOT/out.db"},
			"no memory database at ROOT/empty/codeexec.db: the state dir ROOT/empty (--state-dir, MCP_BRIDGE_STATE_DIR) holds no codeexec.db"},
		{"a mistyped --db", []string{"--db", "ROOT/nodb/x.db", "ROOT/out.db"}, "no memory database at ROOT/nodb/x.db (--db, CODEEXEC_DB)"},
		{"into a missing directory", []string{"--state-dir", state, "ROOT/nodir/out.db"},
			"cannot write ROOT/nodir/out.db: the directory ROOT/nodir does not exist; create it first (backup creates no directory)"},
		{"both", []string{"--state-dir", "ROOT/stat", "ROOT/nodir/out.db"}, "no memory database at ROOT/stat/codeexec.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := listTree(t, root, state)
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "ROOT", root)
			}
			stdout, stderr, err := runBackup(t, env, args[:len(args)-1], args[len(args)-1])
			want := strings.ReplaceAll(tc.want, "ROOT", root)
			if err == nil || stdout != "" || !strings.Contains(stderr, want) {
				t.Errorf("backup %v: %v, stdout %q, stderr:\n%s\nwant a failure saying %q", args, err, stdout, stderr, want)
			}
			if after := listTree(t, root, state); !slices.Equal(before, after) {
				t.Errorf("the failed backup changed the files:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// save saves key in the memoryd at addr.
func save(t *testing.T, addr, key, value string) {
	t.Helper()
	if _, err := memoryv1.NewMemoryServiceClient(dialMemoryd(t, addr)).SaveMemory(t.Context(), &memoryv1.SaveMemoryRequest{Key: key, ValueJson: value}); err != nil {
		t.Fatalf("save %q: %v", key, err)
	}
}

// dialMemoryd connects to the memoryd at addr until the test ends.
func dialMemoryd(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := dial.New(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// runBackup runs `codeexec memoryd backup ARGS… TARGET`.
func runBackup(t *testing.T, env, args []string, target string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), harness.Binary, append(append([]string{"memoryd", "backup"}, args...), target)...)
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// stateWithRecords is a state dir whose database holds upstream's test
// state (4 memories and 4 tools), and the environment to run codeexec in.
func stateWithRecords(t *testing.T) ([]string, string) {
	t.Helper()
	env, state := harness.BaseEnv(t, nil), t.TempDir()
	imp := exec.CommandContext(t.Context(), harness.Binary, "import-upstream", "--state-dir", state, filepath.Join(harness.Root, "memoryd", "testdata", "upstream"))
	imp.Env = env
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("import-upstream: %v\n%s", err, out)
	}
	return env, state
}

// checkBackup checks that path is a backup of stateWithRecords: memoryd
// copy reads its 8 records.
func checkBackup(t *testing.T, env []string, path string) {
	t.Helper()
	to := filepath.Join(t.TempDir(), "copy.db")
	cmd := exec.CommandContext(t.Context(), harness.Binary, "memoryd", "copy", "--from", path, "--to", to)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "copied 8 records") {
		t.Errorf("%s is not the backup: memoryd copy from it: %v\n%s", path, err, out)
	}
}

// checkBackupBytes is checkBackup of a backup's bytes.
func checkBackupBytes(t *testing.T, env []string, b []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "streamed.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	checkBackup(t, env, path)
}

// describe says what Lstat found.
func describe(fi fs.FileInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return fi.Mode().String()
}

// listTree lists every file under the dirs, with its inode, so that a
// rename shows.
func listTree(t *testing.T, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			var ino uint64
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				ino = st.Ino
			}
			out = append(out, path+"@"+strconv.FormatUint(ino, 10))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
