// Package agent embeds the Python agent that runs inside every sandbox. It
// speaks the channel protocol in docs/PROTOCOL.md; sandboxd writes it to a
// host directory that engines mount read-only at engine.AgentMount.
package agent

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
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
