// Package agent embeds the Python agent that runs inside every sandbox. It
// speaks the channel protocol in docs/PROTOCOL.md; sandboxd writes it to a
// host directory that engines mount read-only at engine.AgentMount.
package agent

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// Entry is the agent's entry script inside the written directory.
const Entry = "agent.py"

//go:embed *.py
var files embed.FS

// WriteTo writes the agent's files into dir (created 0755 if missing), each
// 0644. Existing files of the same name are replaced.
func WriteTo(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("agent: create %s: %w", dir, err)
	}
	// MkdirAll leaves an existing directory's mode alone; the sandbox user
	// must be able to read it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("agent: chmod %s: %w", dir, err)
	}
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return fmt.Errorf("agent: list embedded files: %w", err)
	}
	for _, e := range entries {
		data, err := files.ReadFile(e.Name())
		if err != nil {
			return fmt.Errorf("agent: read embedded %s: %w", e.Name(), err)
		}
		path := filepath.Join(dir, e.Name())
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("agent: write %s: %w", path, err)
		}
		// WriteFile keeps the mode of a file that already exists.
		if err := os.Chmod(path, 0o644); err != nil {
			return fmt.Errorf("agent: chmod %s: %w", path, err)
		}
	}
	return nil
}

// Precompile writes bytecode for the files WriteTo wrote into
// dir/__pycache__, using python, the host interpreter the sandboxes run
// (the bwrap engine binds the host's /usr). The agent dir is read-only
// inside a sandbox, so without this every sandbox compiles the agent's
// modules again (about 7 ms before its first exec can run). It is
// optional: a bytecode file for another Python version is ignored, and
// checked-hash files are never used for a changed source.
func Precompile(ctx context.Context, python, dir string) error {
	return PrecompileWith(ctx, hostPython(python), dir, dir)
}

// Runner runs the sandboxes' interpreter with args. A failure's error
// carries what the interpreter printed.
type Runner func(ctx context.Context, args []string) error

// PrecompileWith is Precompile with the interpreter run starts, which sees
// dir at the path seen: a container engine compiles with the image's own
// Python in a one-off container that mounts dir there, because the image's
// Python is often another version than the host's and would ignore the
// host's bytecode.
func PrecompileWith(ctx context.Context, run Runner, dir, seen string) error {
	if err := run(ctx, []string{"-I", "-m", "compileall", "-q", "-l", "--invalidation-mode", "checked-hash", seen}); err != nil {
		return fmt.Errorf("agent: precompile: %w", err)
	}
	// The sandbox user must be able to read what compileall created.
	return filepath.WalkDir(filepath.Join(dir, "__pycache__"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(path, mode) //nolint:gosec // dir is sandboxd's copy of the agent: no one else writes there
	})
}

// hostPython runs the host interpreter python with an empty environment.
func hostPython(python string) Runner {
	return func(ctx context.Context, args []string) error {
		cmd := exec.CommandContext(ctx, python, args...)
		cmd.Env = []string{}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", python, err, out)
		}
		return nil
	}
}
