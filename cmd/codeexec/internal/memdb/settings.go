// Package memdb is the memory database as the codeexec binary's commands
// see it: where it is (the state dir, --db, or PostgreSQL with --store),
// and the commands that work on it: memoryd backup, memoryd copy and
// import-upstream.
package memdb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/codeexec/codeexec/memoryd"
	"github.com/codeexec/codeexec/services/flagenv"
)

// Settings say where the memory database is and how memoryd uses it.
type Settings struct {
	// StateDir is the state directory: it holds the bbolt file (unless
	// --db names another) and, in serve, the sandbox sockets.
	StateDir string
	memory   memoryd.Config
	maxValue int64
	// home expands a leading ~ of the paths (Resolve).
	home string
}

// defaultStateDir is MCP_BRIDGE_STATE_DIR's default, upstream's.
const defaultStateDir = "~/MCPs"

// BindStateDir binds where the memory database lives: a bbolt file, or a
// PostgreSQL database with --store.
func BindStateDir(fs *flagenv.Set, s *Settings, getenv func(string) string) {
	s.home = getenv("HOME")
	fs.String(&s.StateDir, "state-dir", defaultStateDir, "state directory; holds the memory database codeexec.db (a leading ~ is HOME, and a relative path is taken from the working directory once, at start)", "MCP_BRIDGE_STATE_DIR")
	fs.String(&s.memory.Path, "db", "", "bbolt file for memory and saved tools (default STATE_DIR/codeexec.db; ~ and a relative path as for --state-dir); any number of codeexec processes may share it", "CODEEXEC_DB")
	bindStoreURL(fs, &s.memory.Store, "store", "PostgreSQL URL for memory, saved tools and session checkpoints instead of the bbolt file, "+
		"e.g. postgres://codeexec@db1,db2/codeexec?target_session_attrs=read-write&sslmode=verify-full; "+
		"the password comes from PGPASSWORD, a PGPASSFILE or --store-password-file, never from the URL on the command line", "CODEEXEC_STORE", getenv)
	fs.Path(&s.memory.StorePasswordFile, "store-password-file", "file holding the PostgreSQL password (read for each new connection, so a rotated secret is picked up)", "CODEEXEC_STORE_PASSWORD_FILE")
	fs.Duration(&s.memory.StoreWait, "store-wait", memoryd.DefaultStoreWait, "with --store: how long a call waits while the database is unreachable or failing over, and how long memoryd waits for it at start", "CODEEXEC_STORE_WAIT")
}

// BindMemory binds memoryd's own settings.
func BindMemory(fs *flagenv.Set, s *Settings) {
	fs.Duration(&s.memory.OwnerWait, "owner-wait", memoryd.DefaultOwnerWait, "when the process that serves a shared database exits, how long calls wait for another to take it over", "CODEEXEC_OWNER_WAIT")
	fs.Bytes(&s.maxValue, "max-value", memoryd.DefaultMaxValueBytes, "largest memory value or saved tool, e.g. 1m", "CODEEXEC_MEMORY_MAX_VALUE")
	d := memoryd.DefaultQuotas
	fs.Int(&s.memory.Quotas.MemoryKeys, "quota-memory-keys", d.MemoryKeys, "most memory keys one tenant keeps; 0 means no cap", "CODEEXEC_QUOTA_MEMORY_KEYS")
	fs.Bytes(&s.memory.Quotas.MemoryBytes, "quota-memory-bytes", d.MemoryBytes, "most bytes of memory (keys, values, metadata) one tenant keeps, e.g. 256m; 0 means no cap", "CODEEXEC_QUOTA_MEMORY_BYTES")
	fs.Bytes(&s.memory.Quotas.CheckpointBytes, "quota-checkpoint-bytes", d.CheckpointBytes, "most bytes of session checkpoints one tenant keeps, e.g. 2g; 0 means no cap", "CODEEXEC_QUOTA_CHECKPOINT_BYTES")
}

// Resolve makes the state dir and --db absolute, once, before anything
// uses them: a client's JSON config has no shell to expand "~", and a path
// relative to the working directory would give clients started in other
// directories other databases. Without HOME, a path that starts with ~ (as
// the default does) is refused rather than taken from the working
// directory. The state dir is resolved when it holds the database, or
// always when inServe (it holds the sandbox sockets and upstream's state
// too); unresolved, it is left empty.
func (s *Settings) Resolve(inServe bool) error {
	if inServe || (s.memory.Path == "" && s.memory.Store == "") {
		dir, err := flagenv.AbsPath(s.StateDir, s.home, "state directory", "set MCP_BRIDGE_STATE_DIR (--state-dir) to an absolute directory, e.g. /var/lib/codeexec")
		if err != nil {
			return err
		}
		s.StateDir = dir
	} else {
		s.StateDir = ""
	}
	if s.memory.Path != "" {
		db, err := flagenv.AbsPath(s.memory.Path, s.home, "memory database", "set CODEEXEC_DB (--db) to an absolute path, e.g. /var/lib/codeexec/codeexec.db")
		if err != nil {
			return err
		}
		s.memory.Path = db
	}
	return nil
}

// missing is the error for the bbolt file path that stat did not find
// (err): it names the setting that chose path and what to give instead.
func (s *Settings) missing(path string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("memory database %s: %w", path, err)
	}
	if s.memory.Path != "" {
		return fmt.Errorf("no memory database at %s (--db, CODEEXEC_DB): name the bbolt file that holds it, the state dir that holds codeexec.db with --state-dir, or a running memoryd with --memory", path)
	}
	why := "holds no codeexec.db"
	if _, err := os.Stat(s.StateDir); errors.Is(err, fs.ErrNotExist) {
		why = "does not exist"
	}
	return fmt.Errorf("no memory database at %s: the state dir %s (--state-dir, MCP_BRIDGE_STATE_DIR) %s; name the state dir that holds codeexec.db, the bbolt file with --db, or a running memoryd with --memory", path, s.StateDir, why)
}

// missingDir is the error for dir, the directory the bbolt file is to be
// created in, when it is not a directory that exists: it names the
// setting that chose it, and says that nothing creates it but the
// servers.
func (s *Settings) missingDir(dir string) error {
	fi, err := os.Stat(dir)
	var why string
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		why = "is not a directory"
	case errors.Is(err, fs.ErrNotExist):
		why = "does not exist"
	default:
		why = "cannot be used: " + err.Error()
	}
	if s.memory.Path != "" {
		return fmt.Errorf("cannot create the memory database %s (--db, CODEEXEC_DB): the directory %s %s; name a bbolt file in a directory that exists, or create the directory first (only codeexec serve and codeexec memoryd create one)", s.memory.Path, dir, why)
	}
	return fmt.Errorf("no memory database at %s: the state dir %s (--state-dir, MCP_BRIDGE_STATE_DIR) %s; name the state dir that codeexec serve uses (serve creates it on its first start), the bbolt file with --db, or a running memoryd with --memory", filepath.Join(dir, "codeexec.db"), dir, why)
}

// Config is memoryd's configuration, once Resolve has made the paths
// absolute: the database is in the state dir unless --db names another,
// and it records version.
func (s *Settings) Config(version string) memoryd.Config {
	cfg := s.memory
	if cfg.Path == "" {
		cfg.Path = filepath.Join(s.StateDir, "codeexec.db")
	}
	cfg.MaxValueBytes = int(s.maxValue)
	cfg.Version = version
	return cfg
}
