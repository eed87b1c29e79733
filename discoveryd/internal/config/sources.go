package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/codeexec/codeexec/services/flagenv"
)

// Source is one place where server definitions may live.
type Source struct {
	// Path is a file, or a directory of *.json files.
	Path string
	// Dir is true for a directory source.
	Dir bool
	// Name is upstream's label for the source, for logs.
	Name string
	// Named is true for a file the user named (MCP_SERVERS_CONFIG): that
	// it is missing is reported, where a default path is quietly absent.
	Named bool
	// ServersOnly is true for a file that holds server definitions and
	// little else (a dedicated mcp.json, the files of a directory
	// source, the named file). One in which no key holds servers is
	// reported, since its key is likely misspelt; a client's own settings
	// file (~/.claude.json, VS Code's settings.json) may have none.
	ServersOnly bool
}

// claudeCodeProject names the source of the project's .mcp.json, whose
// servers the user may have rejected in Claude Code (mcpjsonRejected).
const claudeCodeProject = "Claude Code project"

// Sources lists the config sources in upstream's order (§2.1 of the
// upstream inventory, at commit 27d23b8). MCP_SERVERS_CONFIG comes last:
// despite upstream's "highest priority" comment it only adds new names.
func Sources(opts Options) []Source {
	var out []Source
	home := func(rel ...string) string { return filepath.Join(append([]string{opts.Home}, rel...)...) }
	if opts.Home != "" {
		out = append(out,
			Source{Path: home("MCPs"), Dir: true, Name: "User MCPs", ServersOnly: true},
			Source{Path: home(".config", "mcp", "servers"), Dir: true, Name: "Standard MCP", ServersOnly: true},
		)
	}
	if opts.Cwd != "" {
		out = append(out,
			Source{Path: filepath.Join(opts.Cwd, "mcp-servers"), Dir: true, Name: "Local Project", ServersOnly: true},
			Source{Path: filepath.Join(opts.Cwd, ".vscode", "mcp.json"), Name: "VS Code Workspace", ServersOnly: true},
		)
	}
	if opts.Home != "" {
		out = append(out, Source{Path: home(".claude.json"), Name: "Claude CLI"})
	}
	if opts.Cwd != "" {
		// Not upstream's: Claude Code's project-scope file, after the
		// local and user scopes that ~/.claude.json holds.
		out = append(out, Source{Path: filepath.Join(opts.Cwd, ".mcp.json"), Name: claudeCodeProject, ServersOnly: true})
	}
	if opts.Cwd != "" {
		// Not upstream's: Cursor's project file, before its user-wide
		// one, as Cursor prefers it.
		out = append(out, Source{Path: filepath.Join(opts.Cwd, ".cursor", "mcp.json"), Name: "Cursor project", ServersOnly: true})
	}
	if opts.Home != "" {
		out = append(out,
			Source{Path: home(".cursor", "mcp.json"), Name: "Cursor", ServersOnly: true},
			Source{Path: home(".opencode.json"), Name: "OpenCode CLI"},
			// Not upstream's: where OpenCode keeps its global config now.
			Source{Path: home(".config", "opencode", "opencode.json"), Name: "OpenCode"},
			Source{Path: home(".config", "opencode", "opencode.jsonc"), Name: "OpenCode"},
			Source{Path: home(".codeium", "windsurf", "mcp_config.json"), Name: "Windsurf", ServersOnly: true},
			// Not upstream's since 27d23b8 (its 4b85d35 read them): Codex
			// CLI's [mcp_servers.x] and Gemini CLI's mcpServers.
			Source{Path: home(".codex", "config.toml"), Name: "Codex"},
		)
	}
	if opts.Cwd != "" {
		out = append(out, Source{Path: filepath.Join(opts.Cwd, ".gemini", "settings.json"), Name: "Gemini CLI project"})
	}
	if opts.Home != "" {
		out = append(out, Source{Path: home(".gemini", "settings.json"), Name: "Gemini CLI"})
	}
	if opts.Cwd != "" {
		out = append(out, Source{Path: filepath.Join(opts.Cwd, ".zed", "settings.json"), Name: "Zed project"})
	}
	if opts.Home != "" {
		// Zed keeps its settings here on macOS too.
		out = append(out, Source{Path: home(".config", "zed", "settings.json"), Name: "Zed"})
		switch opts.GOOS {
		case "darwin":
			appSupport := home("Library", "Application Support")
			out = append(out,
				Source{Path: filepath.Join(appSupport, "Claude Code", "claude_code_config.json"), Name: "Claude Code"},
				Source{Path: filepath.Join(appSupport, "Claude", "claude_desktop_config.json"), Name: "Claude Desktop"},
				Source{Path: filepath.Join(appSupport, "Code", "User", "settings.json"), Name: "VS Code"},
			)
		case "linux":
			out = append(out,
				Source{Path: home(".config", "Code", "User", "settings.json"), Name: "VS Code"},
				// Not upstream's: where the Linux builds of Claude Desktop
				// keep its config.
				Source{Path: home(".config", "Claude", "claude_desktop_config.json"), Name: "Claude Desktop"},
			)
		}
	}
	if opts.ServersConfig != "" {
		out = append(out, Source{Path: flagenv.ExpandHome(opts.ServersConfig, opts.Home), Name: "MCP_SERVERS_CONFIG", Named: true, ServersOnly: true})
	}
	return out
}

// files returns the config files of the source that exist. A directory
// yields its *.json files in name order. An unreadable directory is
// reported, and so is a missing file the user named; a missing default
// is not.
func (s Source) files(res *Result) []string {
	if !s.Dir {
		if _, err := os.Stat(s.Path); errors.Is(err, fs.ErrNotExist) {
			if s.Named {
				res.Warnings = append(res.Warnings, Warning{Path: s.Path,
					Reason: fmt.Sprintf("%s (--servers-config) names this file, which does not exist: fix the path or unset it (the other sources still load)", s.Name)})
			}
			return nil
		}
		return []string{s.Path}
	}
	entries, err := os.ReadDir(s.Path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			res.Warnings = append(res.Warnings, Warning{Path: s.Path, Reason: "cannot read directory: " + err.Error()})
		}
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || !strings.EqualFold(filepath.Ext(e.Name()), ".json") {
			continue
		}
		out = append(out, filepath.Join(s.Path, e.Name()))
	}
	sort.Strings(out)
	return out
}

// Stamp identifies the state of the files that Load reads: the path,
// size and modification time of each, in order. Load reads them only
// when the stamp changed, so that a server added to a config while the
// bridge runs is found by the next call, as upstream's re-scan on every
// call finds it, without parsing every file (~/.claude.json runs to
// megabytes) on every call. A directory source counts by its *.json
// files, not its own time: ~/MCPs also holds the state database, whose
// files come and go.
func Stamp(opts Options) string {
	var discard Result
	var paths []string
	for _, src := range Sources(opts) {
		paths = append(paths, src.files(&discard)...)
	}
	// They may reject servers of the project's .mcp.json.
	paths = append(paths, claudeSettings(opts)...)
	var b strings.Builder
	for _, path := range paths {
		fi, err := os.Stat(path)
		if err != nil {
			fmt.Fprintf(&b, "%s\x00%v\n", path, err)
			continue
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\n", path, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}
