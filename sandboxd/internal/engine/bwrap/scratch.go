package bwrap

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/tempdir"
)

// makeScratch makes the directory under which each shim mounts its
// sandbox's tmpfs, in its own mount namespace: on the host it stays empty.
func makeScratch() (*tempdir.Dir, error) {
	d, err := tempdir.Make("", "codeexec-scratch-")
	if err != nil {
		return nil, fmt.Errorf("scratch mount points: %w", err)
	}
	for _, m := range scratchMounts(engine.Limits{}) {
		if err := os.Mkdir(filepath.Join(d.Path, m.name), 0o755); err != nil {
			_ = d.Remove()
			return nil, fmt.Errorf("scratch mount points: %w", err)
		}
	}
	// bwrap, as the sandbox uid, binds them.
	if err := os.Chmod(d.Path, 0o755); err != nil {
		_ = d.Remove()
		return nil, fmt.Errorf("scratch mount points: %w", err)
	}
	return d, nil
}

// readableByNobody checks that Config.HostUID, which bwrap runs as when
// sandboxd is root, can bind dir: "others" may search every directory on
// the way and read dir. Without this, bwrap fails inside the sandbox with
// a terse "Can't find source path".
func readableByNobody(dir string, uid int) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("agent dir: %w", err)
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("agent dir: %w", err)
		}
		need := os.FileMode(0o001) // search
		if p == abs {
			need = 0o005 // read and search
		}
		if fi.Mode().Perm()&need != need {
			return fmt.Errorf("agent dir %s: %s is %v; the sandbox runs as uid %d and needs o+%s on it (chmod o+rx)",
				abs, p, fi.Mode().Perm(), uid, map[os.FileMode]string{1: "x", 5: "rx"}[need])
		}
		if p == "/" {
			return nil
		}
	}
}
