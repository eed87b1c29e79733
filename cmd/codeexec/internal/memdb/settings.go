// Package memdb is the memory database as the codeexec binary's commands
// see it: where it is (the state dir, --db, or PostgreSQL with --store),
// and the commands that work on it: memoryd backup, memoryd copy and
// import-upstream.
package memdb

import (
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
}

// BindStateDir binds where the memory database lives: a bbolt file, or a
// PostgreSQL database with --store.
func BindStateDir(fs *flagenv.Set, s *Settings, getenv func(string) string) {
	fs.String(&s.StateDir, "state-dir", stateDirDefault(getenv), "state directory; holds the memory database codeexec.db", "MCP_BRIDGE_STATE_DIR")
	fs.String(&s.memory.Path, "db", "", "bbolt file for memory and saved tools (default STATE_DIR/codeexec.db); any number of codeexec processes may share it", "CODEEXEC_DB")
	bindStoreURL(fs, &s.memory.Store, "store", "PostgreSQL URL for memory, saved tools and session checkpoints instead of the bbolt file, "+
		"e.g. postgres://codeexec@db1,db2/codeexec?target_session_attrs=read-write&sslmode=verify-full; "+
		"the password comes from PGPASSWORD, a PGPASSFILE or --store-password-file, never from the URL on the command line", "CODEEXEC_STORE", getenv)
	fs.String(&s.memory.StorePasswordFile, "store-password-file", "", "file holding the PostgreSQL password (read for each new connection, so a rotated secret is picked up)", "CODEEXEC_STORE_PASSWORD_FILE")
	fs.Duration(&s.memory.StoreWait, "store-wait", memoryd.DefaultStoreWait, "with --store: how long a call waits while the database is unreachable or failing over, and how long memoryd waits for it at start", "CODEEXEC_STORE_WAIT")
}

// BindMemory binds memoryd's own settings.
func BindMemory(fs *flagenv.Set, s *Settings) {
	fs.Duration(&s.memory.OwnerWait, "owner-wait", memoryd.DefaultOwnerWait, "when the process that serves a shared database exits, how long calls wait for another to take it over", "CODEEXEC_OWNER_WAIT")
	fs.Bytes(&s.maxValue, "max-value", memoryd.DefaultMaxValueBytes, "largest memory value or saved tool, e.g. 1m", "CODEEXEC_MEMORY_MAX_VALUE")
}

// Config is memoryd's configuration: the database path is resolved
// against the state dir, and the database records version.
func (s *Settings) Config(version string) memoryd.Config {
	cfg := s.memory
	if cfg.Path == "" {
		cfg.Path = filepath.Join(s.StateDir, "codeexec.db")
	}
	cfg.MaxValueBytes = int(s.maxValue)
	cfg.Version = version
	return cfg
}

// stateDirDefault resolves MCP_BRIDGE_STATE_DIR's default, ~/MCPs.
func stateDirDefault(getenv func(string) string) string {
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, "MCPs")
	}
	return "MCPs"
}
