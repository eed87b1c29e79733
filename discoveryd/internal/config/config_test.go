package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// writeFiles creates files under root; keys are slash paths relative to it,
// and a key ending in "/" makes an empty directory.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if strings.HasSuffix(rel, "/") { // a directory only
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		body = strings.ReplaceAll(body, "@CWD@", filepath.Join(root, "cwd"))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string // "home/…" or "cwd/…"
		opts  Options           // Home, Cwd are filled in
		// serversConfig is relative to the temp root.
		serversConfig string
		want          []Server // Source is relative to the temp root
		wantWarnings  []string // substrings, one per warning, in order
		wantSkipped   []string
	}{
		{
			name: "first definition wins in upstream order",
			files: map[string]string{
				"home/MCPs/b.json":        `{"mcpServers": {"fs": {"command": "from-mcps-b"}}}`,
				"home/MCPs/a.json":        `{"mcpServers": {"fs": {"command": "from-mcps-a"}, "only-a": {"command": "a"}}}`,
				"home/.cursor/mcp.json":   `{"mcpServers": {"fs": {"command": "cursor"}, "git": {"command": "git-mcp", "args": ["--repo", 7, true]}}}`,
				"cwd/.vscode/mcp.json":    `{"servers": {"git": {"command": "vscode-git"}}}`,
				"home/.claude.json":       `{"mcpServers": {"zeta": {"command": "z"}}}`,
				"home/MCPs/notes.txt":     `not a config`,
				"cwd/mcp-servers/x.json":  `{"mcpServers": {"local": {"command": "l", "cwd": "/srv"}}}`,
				"home/.opencode.json":     `{}`,
				"home/.codeium/windsurf/": ``,
			},
			want: []Server{
				{Name: "fs", Transport: TransportStdio, Command: "from-mcps-a", Source: "home/MCPs/a.json"},
				{Name: "git", Transport: TransportStdio, Command: "vscode-git", Source: "cwd/.vscode/mcp.json"},
				{Name: "local", Transport: TransportStdio, Command: "l", Cwd: "/srv", Source: "cwd/mcp-servers/x.json"},
				{Name: "only-a", Transport: TransportStdio, Command: "a", Source: "home/MCPs/a.json"},
				{Name: "zeta", Transport: TransportStdio, Command: "z", Source: "home/.claude.json"},
			},
			wantSkipped: []string{"b.json: server \"fs\": already defined in", "mcp.json: server \"fs\": already defined", "mcp.json: server \"git\": already defined"},
		},
		{
			name: "a server with an empty name is refused with a warning (found by FuzzLoadFile)",
			files: map[string]string{
				"home/MCPs/a.json": `{"mcpServers": {"": {"command": "x"}, " ": {"command": "y"}, "ok": {"command": "z"}}}`,
			},
			want:         []Server{{Name: "ok", Transport: TransportStdio, Command: "z", Source: "home/MCPs/a.json"}},
			wantWarnings: []string{`a server under "mcpServers" has an empty name`, `a server under "mcpServers" has an empty name`},
		},
		{
			name: "MCP_SERVERS_CONFIG is loaded last and only adds new names (TOML)",
			files: map[string]string{
				"home/MCPs/a.json": `{"mcpServers": {"fs": {"command": "mcps"}}}`,
				"extra.toml": `description = "from toml"
[mcpServers.fs]
command = "toml-fs"
[mcpServers.memory]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-memory"]
env = { LEVEL = 3 }
`,
			},
			serversConfig: "extra.toml",
			want: []Server{
				{Name: "fs", Transport: TransportStdio, Command: "mcps", Source: "home/MCPs/a.json"},
				{Name: "memory", Description: "from toml", Transport: TransportStdio, Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}, Env: map[string]string{"LEVEL": "3"}, Source: "extra.toml"},
			},
			wantSkipped: []string{`extra.toml: server "fs": already defined`},
		},
		{
			name: "MCP_SERVERS_CONFIG as JSON",
			files: map[string]string{
				"cfg.json": `{"mcpServers": {"e": {"command": "x"}}}`,
			},
			serversConfig: "cfg.json",
			want:          []Server{{Name: "e", Transport: TransportStdio, Command: "x", Source: "cfg.json"}},
		},
		{
			name: "a missing MCP_SERVERS_CONFIG is reported, missing defaults are not, and the others still load",
			files: map[string]string{
				"home/MCPs/a.json": `{"mcpServers": {"fs": {"command": "mcps"}}}`,
			},
			serversConfig: "typo.json",
			want:          []Server{{Name: "fs", Transport: TransportStdio, Command: "mcps", Source: "home/MCPs/a.json"}},
			wantWarnings:  []string{`typo.json: MCP_SERVERS_CONFIG (--servers-config) names this file, which does not exist: fix the path or unset it`},
		},
		{
			name: "a server config whose key is misspelt is reported; a client's settings file is not",
			opts: Options{GOOS: "linux"},
			files: map[string]string{
				"home/MCPs/lower.json":                 `{"mcpservers": {"a": {"command": "a"}}}`,
				"home/MCPs/dash.json":                  `{"$schema": "x", "mcp-servers": {"b": {"command": "b"}}}`,
				"home/MCPs/empty.json":                 `{}`,
				"home/MCPs/meta.json":                  `{"description": "nothing yet", "inputs": []}`,
				"home/MCPs/ok.json":                    `{"mcpServers": {}}`,
				"cwd/.vscode/mcp.json":                 `{"Servers": {"c": {"command": "c"}}}`,
				"home/.cursor/mcp.json":                `{"mcp_server": {"d": {"command": "d"}}}`,
				"home/.claude.json":                    `{"numStartups": 3, "mcpservers": {"e": {"command": "e"}}}`,
				"home/.config/Code/User/settings.json": `{"editor.fontSize": 12}`,
				"codex.toml":                           "[mcpservers.f]\ncommand = \"f\"\n",
			},
			serversConfig: "codex.toml",
			wantWarnings: []string{
				`dash.json: no servers read: none of its keys ("mcp-servers") holds servers (did you mean "mcpServers"?); the keys that do are "mcpServers", "servers" (VS Code), "mcp_servers" (Codex), "mcp" (OpenCode), "context_servers" (Zed), spelt exactly so`,
				`lower.json: no servers read: none of its keys ("mcpservers") holds servers (did you mean "mcpServers"?)`,
				`.vscode/mcp.json: no servers read: none of its keys ("Servers") holds servers (did you mean "servers"?)`,
				`.cursor/mcp.json: no servers read: none of its keys ("mcp_server") holds servers; the keys that do are "mcpServers"`,
				`codex.toml: no servers read: none of its keys ("mcpservers") holds servers (did you mean "mcpServers"?)`,
			},
		},
		{
			name: "a broken file is reported and the others still load",
			files: map[string]string{
				"home/MCPs/bad.json":                     `{"mcpServers": {`,
				"home/MCPs/list.json":                    `[1, 2]`,
				"home/MCPs/wrong.json":                   `{"mcpServers": []}`,
				"home/.cursor/mcp.json":                  `{"mcpServers": {"ok": {"command": "ok"}}}`,
				"home/.claude.json":                      `{"mcpServers": {"n": 5, "empty": {}, "http-no-url": {"type": "http"}, "odd": {"command": "c", "type": "websocket"}, "badargs": {"command": "c", "args": "x"}}}`,
				"home/.codeium/windsurf/mcp_config.json": "",
			},
			want: []Server{{Name: "ok", Transport: TransportStdio, Command: "ok", Source: "home/.cursor/mcp.json"}},
			wantWarnings: []string{
				`bad.json: invalid JSON at line 1, column 17: `,
				`list.json: invalid config: the top level must be an object, got a list`,
				`wrong.json: "mcpServers" must be an object of servers, got a list`,
				`.claude.json: server "badargs": "args" must be a list, got a string`,
				`.claude.json: server "empty": entry has neither "command" (stdio) nor "url" (HTTP/SSE; Windsurf's "serverUrl" and Gemini's "httpUrl" count too)`,
				`.claude.json: server "http-no-url": http entry needs a "url"`,
				`.claude.json: server "n": entry must be an object, got a number`,
				`.claude.json: server "odd": unknown "type" "websocket"; accepted: stdio, http, streamable-http, sse`,
			},
		},
		{
			name: "VS Code layouts, JSON with comments, OS-specific sources",
			opts: Options{GOOS: "linux"},
			files: map[string]string{
				"cwd/.vscode/mcp.json": `{
  // workspace servers
  "servers": {
    "ws": {"type": "stdio", "command": "ws-cmd", /* inline */ "args": ["a//b", "c/*d*/"],},
  },
}`,
				"home/.config/Code/User/settings.json":                               `{"editor.fontSize": 12, "mcp": {"servers": {"nested": {"command": "n"}}}, "mcp.servers": {"flat": {"command": "f"}}}`,
				"home/Library/Application Support/Claude/claude_desktop_config.json": `{"mcpServers": {"mac-only": {"command": "m"}}}`,
			},
			want: []Server{
				{Name: "flat", Transport: TransportStdio, Command: "f", Source: "home/.config/Code/User/settings.json"},
				{Name: "nested", Transport: TransportStdio, Command: "n", Source: "home/.config/Code/User/settings.json"},
				{Name: "ws", Transport: TransportStdio, Command: "ws-cmd", Args: []string{"a//b", "c/*d*/"}, Source: "cwd/.vscode/mcp.json"},
			},
		},
		{
			name: "macOS sources",
			opts: Options{GOOS: "darwin"},
			files: map[string]string{
				"home/Library/Application Support/Claude/claude_desktop_config.json": `{"mcpServers": {"mac-only": {"command": "m"}}}`,
				"home/.config/Code/User/settings.json":                               `{"mcp": {"servers": {"linux-only": {"command": "n"}}}}`,
			},
			want: []Server{{Name: "mac-only", Transport: TransportStdio, Command: "m", Source: "home/Library/Application Support/Claude/claude_desktop_config.json"}},
		},
		{
			name: "HTTP and SSE entries, disabled entries, descriptions",
			files: map[string]string{
				"home/MCPs/remote.json": `{"description": "file default", "mcpServers": {
  "api": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer t"}, "description": "own"},
  "stream": {"type": "streamable-http", "url": "http://localhost:3001/mcp"},
  "events": {"type": "sse", "url": "http://localhost:3002/sse"},
  "off": {"command": "x", "disabled": true},
  "on": {"command": "y", "disabled": false}
}}`,
			},
			want: []Server{
				{Name: "api", Description: "own", Transport: TransportHTTP, URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer t"}, Source: "home/MCPs/remote.json"},
				{Name: "events", Description: "file default", Transport: TransportSSE, URL: "http://localhost:3002/sse", Source: "home/MCPs/remote.json"},
				{Name: "on", Description: "file default", Transport: TransportStdio, Command: "y", Source: "home/MCPs/remote.json"},
				{Name: "stream", Description: "file default", Transport: TransportHTTP, URL: "http://localhost:3001/mcp", Source: "home/MCPs/remote.json"},
			},
			wantSkipped: []string{`server "off": disabled: true`},
		},
		{
			name: "disabled and enabled as strings mean what they say; other values are refused, never enabled",
			files: map[string]string{
				"home/MCPs/s.json": `{"mcpServers": {
  "off": {"command": "x", "disabled": "true"},
  "off-upper": {"command": "x", "disabled": " TRUE "},
  "on": {"command": "y", "disabled": "false"},
  "null": {"command": "n", "disabled": null},
  "yes": {"command": "x", "disabled": "yes"},
  "one": {"command": "x", "disabled": 1},
  "oc-off": {"command": ["x"], "enabled": "false"},
  "oc-bad": {"command": ["x"], "enabled": "no"}
}}`,
				"extra.toml": "[mcp_servers.codex-off]\ncommand = \"x\"\nenabled = \"False\"\n[mcp_servers.codex-on]\ncommand = \"c\"\nenabled = true\n",
			},
			serversConfig: "extra.toml",
			want: []Server{
				{Name: "codex-on", Transport: TransportStdio, Command: "c", Source: "extra.toml"},
				{Name: "null", Transport: TransportStdio, Command: "n", Source: "home/MCPs/s.json"},
				{Name: "on", Transport: TransportStdio, Command: "y", Source: "home/MCPs/s.json"},
			},
			wantWarnings: []string{
				`s.json: server "oc-bad": "enabled" is the string "no"; accepted: true or false`,
				`s.json: server "one": "disabled" is a number (1); accepted: true or false`,
				`s.json: server "yes": "disabled" is the string "yes"; accepted: true or false (the strings "true" and "false" too), so the entry is not loaded`,
			},
			wantSkipped: []string{`server "oc-off": enabled: false`, `server "off": disabled: true`, `server "off-upper": disabled: true`, `server "codex-off": enabled: false`},
		},
		{
			name: "variable expansion",
			opts: Options{Lookup: env(map[string]string{"TOKEN": "s3cret", "ROOT": "/data", "HOST": "h"})},
			files: map[string]string{
				"home/MCPs/v.json": `{"mcpServers": {
  "a": {"command": "${ROOT}/bin/srv", "args": ["--root=${env:ROOT}", "$HOME", "${}"], "env": {"T": "${TOKEN}"}, "cwd": "${ROOT}"},
  "b": {"url": "https://${HOST}/mcp", "headers": {"X-Key": "${env:TOKEN}"}},
  "c": {"command": "x", "env": {"T": "${NOPE}", "U": "${env:ALSO_NOPE}"}}
}}`,
			},
			want: []Server{
				{Name: "a", Transport: TransportStdio, Command: "/data/bin/srv", Args: []string{"--root=/data", "$HOME", "${}"}, Env: map[string]string{"T": "s3cret"}, Cwd: "/data", Source: "home/MCPs/v.json"},
				{Name: "b", Transport: TransportHTTP, URL: "https://h/mcp", Headers: map[string]string{"X-Key": "s3cret"}, Source: "home/MCPs/v.json"},
			},
			wantWarnings: []string{`server "c": undefined variable(s) `},
		},
		{
			name: "Claude Code: servers of .mcp.json rejected in disabledMcpjsonServers are skipped",
			files: map[string]string{
				"cwd/.mcp.json":                   `{"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}, "c": {"command": "c"}, "d": {"command": "d"}, "kept": {"command": "k"}}}`,
				"cwd/.claude/settings.local.json": `{"disabledMcpjsonServers": ["a"], "enabledMcpjsonServers": ["kept"]}`,
				"cwd/.claude/settings.json":       `{"disabledMcpjsonServers": "b"}`,
				"home/.claude/settings.json":      `{"disabledMcpjsonServers": ["b", 5]}`,
				"home/.claude.json": `{"projects": {"@CWD@": {"disabledMcpjsonServers": ["c"]}, "/elsewhere": {"disabledMcpjsonServers": ["kept"]}},
  "mcpServers": {"d": {"command": "user-d"}}}`,
			},
			want: []Server{
				{Name: "d", Transport: TransportStdio, Command: "user-d", Source: "home/.claude.json"},
				{Name: "kept", Transport: TransportStdio, Command: "k", Source: "cwd/.mcp.json"},
			},
			wantWarnings: []string{`.claude/settings.json: disabledMcpjsonServers is a string, not a list of server names, so it rejects no server of .mcp.json`},
			wantSkipped: []string{
				`.mcp.json: server "a": rejected for this project in Claude Code (disabledMcpjsonServers of @CWD@/.claude/settings.local.json)`,
				`.mcp.json: server "b": rejected for this project in Claude Code (disabledMcpjsonServers of `,
				`.mcp.json: server "c": rejected for this project in Claude Code (projects."@CWD@".disabledMcpjsonServers of `,
				`.mcp.json: server "d": already defined in`,
			},
		},
		{
			name: "VS Code's envFile, under env",
			files: map[string]string{
				"cwd/.env":       "TOKEN=from-file\nKEEP=file\n",
				"cwd/broken.env": "no equals sign\n",
				"cwd/.vscode/mcp.json": `{"servers": {
  "a": {"command": "a", "envFile": "${workspaceFolder}/.env", "env": {"KEEP": "env"}},
  "rel": {"command": "r", "envFile": ".env"},
  "missing": {"command": "m", "envFile": "${workspaceFolder}/nope.env"},
  "broken": {"command": "b", "envFile": "broken.env"},
  "typed": {"command": "t", "envFile": 3}
}}`,
			},
			want: []Server{
				{Name: "a", Transport: TransportStdio, Command: "a", Env: map[string]string{"TOKEN": "from-file", "KEEP": "env"}, Source: "cwd/.vscode/mcp.json"},
				{Name: "rel", Transport: TransportStdio, Command: "r", Env: map[string]string{"TOKEN": "from-file", "KEEP": "file"}, Source: "cwd/.vscode/mcp.json"},
			},
			wantWarnings: []string{
				`server "broken": "envFile" @CWD@/broken.env: line 1 is not NAME=value; accepted: lines of NAME=value, # comments, values in quotes`,
				`server "missing": "envFile" @CWD@/nope.env cannot be read (open @CWD@/nope.env: no such file or directory); fix the path or remove "envFile"`,
				`server "typed": "envFile" must be a string (the path of a .env file), got a number`,
			},
		},
		{
			name: "Zed's context_servers: command strings and objects, remote servers, extensions",
			files: map[string]string{
				"home/.config/zed/settings.json": `{
  // Zed writes JSONC
  "theme": "One Dark",
  "context_servers": {
    "new": {"source": "custom", "command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}},
    "old": {"command": {"path": "/usr/bin/node", "args": ["s.js"], "env": {"E": "1"}}, "settings": {}},
    "remote": {"url": "https://z.example/mcp", "headers": {"Authorization": "Bearer t"}},
    "ext": {"source": "extension", "settings": {"token": "x"}},
    "nopath": {"command": {"args": ["x"]}},
    "both": {"command": {"path": "p", "args": ["a"]}, "args": ["b"]},
  },
}`,
			},
			want: []Server{
				{Name: "new", Transport: TransportStdio, Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"K": "v"}, Source: "home/.config/zed/settings.json"},
				{Name: "old", Transport: TransportStdio, Command: "/usr/bin/node", Args: []string{"s.js"}, Env: map[string]string{"E": "1"}, Source: "home/.config/zed/settings.json"},
				{Name: "remote", Transport: TransportHTTP, URL: "https://z.example/mcp", Headers: map[string]string{"Authorization": "Bearer t"}, Source: "home/.config/zed/settings.json"},
			},
			wantWarnings: []string{
				`server "both": "args" is given both in "command" and beside it; keep one`,
				`server "nopath": "command" is an object without a "path"; accepted: a string, a list, or Zed's {"path": …, "args": […], "env": {…}}`,
			},
			wantSkipped: []string{`server "ext": a Zed extension's server ("source": "extension"), which only Zed can start`},
		},
		{
			name: "Windsurf's serverUrl and Gemini's httpUrl",
			files: map[string]string{
				"home/.codeium/windsurf/mcp_config.json": `{"mcpServers": {
  "wind": {"serverUrl": "https://w.example/mcp", "headers": {"API_KEY": "k"}},
  "both": {"url": "https://u.example/sse", "serverUrl": "https://ignored.example/"}
}}`,
				"home/MCPs/gemini.json": `{"mcpServers": {"gem": {"httpUrl": "https://g.example/mcp"}, "sse": {"type": "sse", "httpUrl": "https://s.example/sse"}}}`,
			},
			want: []Server{
				{Name: "both", Transport: TransportHTTP, URL: "https://u.example/sse", Source: "home/.codeium/windsurf/mcp_config.json"},
				{Name: "gem", Transport: TransportHTTP, URL: "https://g.example/mcp", Source: "home/MCPs/gemini.json"},
				{Name: "sse", Transport: TransportSSE, URL: "https://s.example/sse", Source: "home/MCPs/gemini.json"},
				{Name: "wind", Transport: TransportHTTP, URL: "https://w.example/mcp", Headers: map[string]string{"API_KEY": "k"}, Source: "home/.codeium/windsurf/mcp_config.json"},
			},
		},
		{
			name: "the variables of VS Code, Cursor and Claude Code",
			opts: Options{Lookup: env(map[string]string{"SET": "s", "EMPTY": ""})},
			files: map[string]string{
				"cwd/.vscode/mcp.json": `{"inputs": [{"id": "tok", "type": "promptString"}], "servers": {
  "ws": {"command": "${userHome}${/}bin${pathSeparator}srv", "args": ["${workspaceFolder}/data", "${workspaceFolderBasename}", "${workspaceRoot}", "${config:x}"]},
  "env-ws": {"command": "e", "args": ["${env:workspaceFolder}"]},
  "prompt": {"command": "p", "env": {"T": "${input:tok}", "U": "x${input:tok}${input:other.id}"}}
}}`,
				"cwd/.mcp.json": `{"mcpServers": {
  "defaults": {"command": "${NOPE:-npx}", "args": ["${SET:-d}", "${EMPTY:-e}", "${NOPE:-}", "${NOPE:-a b/c}"], "url": "", "headers": {}}
}}`,
				"home/.cursor/mcp.json": `{"mcpServers": {"cursor": {"command": "c", "args": ["${workspaceFolder}"]}}}`,
			},
			want: []Server{
				// A file outside the workspace: the workspace is cwd.
				{Name: "cursor", Transport: TransportStdio, Command: "c", Args: []string{"@ROOT@/cwd"}, Source: "home/.cursor/mcp.json"},
				{Name: "defaults", Transport: TransportStdio, Command: "npx", Args: []string{"s", "e", "", "a b/c"}, Source: "cwd/.mcp.json"},
				// ${config:x} is no variable of ours, so it stays.
				{Name: "ws", Transport: TransportStdio, Command: "@ROOT@/home/bin/srv", Args: []string{"@ROOT@/cwd/data", "cwd", "@ROOT@/cwd", "${config:x}"}, Source: "cwd/.vscode/mcp.json"},
			},
			wantWarnings: []string{
				// ${env:workspaceFolder} is the environment's, which has none.
				`server "env-ws": undefined variable(s) workspaceFolder; set them`,
				`server "prompt": uses ${input:tok}, ${input:other.id}, which VS Code asks the user for and codeexec cannot; write the value in its place, or use ${env:NAME} and set NAME where codeexec starts`,
			},
		},
		{
			name: "Claude Code: the project's own servers first, then user scope, then .mcp.json",
			files: map[string]string{
				"home/.claude.json": `{
  "mcpServers": {"shared": {"command": "user-scope"}, "user-only": {"command": "u"}},
  "projects": {
    "@CWD@": {"mcpServers": {"shared": {"command": "project-local"}}},
    "@CWD@/sub": {"mcpServers": {"deeper": {"command": "d"}}},
    "/somewhere/else": {"mcpServers": {"other-project": {"command": "o"}}}
  }
}`,
				"cwd/.mcp.json": `{"mcpServers": {"user-only": {"command": "team"}, "team": {"command": "t"}}}`,
			},
			want: []Server{
				{Name: "shared", Transport: TransportStdio, Command: "project-local", Source: "home/.claude.json"},
				{Name: "team", Transport: TransportStdio, Command: "t", Source: "cwd/.mcp.json"},
				{Name: "user-only", Transport: TransportStdio, Command: "u", Source: "home/.claude.json"},
			},
			// Within one file the first layout wins silently; across files
			// the loser is reported.
			wantSkipped: []string{`.mcp.json: server "user-only": already defined`},
		},
		{
			name: "Claude Code: a server disabled for the project in /mcp is skipped, the project's own and user scope alike",
			files: map[string]string{
				"home/.claude.json": `{
  "mcpServers": {"user-off": {"command": "u"}, "user-on": {"command": "v"}, "shared": {"command": "user-scope"}},
  "disabledMcpServers": ["user-on"],
  "projects": {
    "@CWD@": {
      "mcpServers": {"local-off": {"command": "l"}, "local-on": {"command": "m"}, "shared": {"command": "project-local"}, "broken-off": 5},
      "disabledMcpServers": ["user-off", "local-off", "shared", "broken-off", "not-configured"]
    },
    "@CWD@/sub": {"disabledMcpServers": ["user-on", "local-on"]},
    "/somewhere/else": {"disabledMcpServers": ["user-on", "local-on"]}
  }
}`,
				// The list holds for ~/.claude.json alone.
				"cwd/.mcp.json": `{"mcpServers": {"user-off": {"command": "team"}}}`,
			},
			want: []Server{
				{Name: "local-on", Transport: TransportStdio, Command: "m", Source: "home/.claude.json"},
				{Name: "user-off", Transport: TransportStdio, Command: "team", Source: "cwd/.mcp.json"},
				{Name: "user-on", Transport: TransportStdio, Command: "v", Source: "home/.claude.json"},
			},
			wantSkipped: []string{
				`.claude.json: server "broken-off": disabled for project @CWD@ in Claude Code (projects."@CWD@".disabledMcpServers)`,
				`.claude.json: server "local-off": disabled for project @CWD@ in Claude Code (projects."@CWD@".disabledMcpServers)`,
				`.claude.json: server "shared": disabled for project @CWD@ in Claude Code`,
				`.claude.json: server "user-off": disabled for project @CWD@ in Claude Code (projects."@CWD@".disabledMcpServers)`,
			},
		},
		{
			name: "Claude Code: a disabledMcpServers that is not a list is warned about and disables nothing",
			files: map[string]string{
				"home/.claude.json": `{"mcpServers": {"a": {"command": "a"}}, "projects": {"@CWD@": {"disabledMcpServers": "a"}}}`,
			},
			want: []Server{{Name: "a", Transport: TransportStdio, Command: "a", Source: "home/.claude.json"}},
			wantWarnings: []string{
				`.claude.json: projects."@CWD@".disabledMcpServers is a string, not a list; accepted: a list of server names (strings), as Claude Code's /mcp writes it, so it disables no server`,
			},
		},
		{
			name: "Claude Code: an item of disabledMcpServers that is not a name is warned about; the names beside it still count",
			files: map[string]string{
				"home/.claude.json": `{"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}, "3": {"command": "c"}},
  "projects": {"@CWD@": {"disabledMcpServers": ["a", 3, null, {"b": true}]}}}`,
			},
			want: []Server{
				{Name: "3", Transport: TransportStdio, Command: "c", Source: "home/.claude.json"},
				{Name: "b", Transport: TransportStdio, Command: "b", Source: "home/.claude.json"},
			},
			wantWarnings: []string{
				`.claude.json: projects."@CWD@".disabledMcpServers item 2 is a number (3), not a server name; accepted: a list of server names (strings), as Claude Code's /mcp writes it, so it disables no server (the names beside it still do)`,
				`projects."@CWD@".disabledMcpServers item 3 is null, not a server name`,
				`projects."@CWD@".disabledMcpServers item 4 is an object ({"b":true}), not a server name`,
			},
			wantSkipped: []string{`.claude.json: server "a": disabled for project @CWD@ in Claude Code`},
		},
		{
			name: "OpenCode: mcp with command lists, environment, enabled and remote servers",
			files: map[string]string{
				"home/.config/opencode/opencode.json": `{
  "$schema": "https://opencode.ai/config.json",
  // JSONC, as OpenCode allows
  "mcp": {
    "everything": {"type": "local", "command": ["npx", "-y", "@modelcontextprotocol/server-everything"], "environment": {"K": "v"}},
    "jira": {"type": "remote", "url": "https://jira.example.com/mcp", "headers": {"Authorization": "Bearer x"}, "enabled": true},
    "off": {"type": "local", "command": ["x"], "enabled": false},
    "empty": {"type": "local", "command": []},
  },
}`,
				"home/.config/Code/User/settings.json": `{"mcp": {"servers": {"vs": {"command": "v"}}, "inputs": [{"id": "k"}]}}`,
			},
			opts: Options{GOOS: "linux"},
			want: []Server{
				{Name: "everything", Transport: TransportStdio, Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}, Env: map[string]string{"K": "v"}, Source: "home/.config/opencode/opencode.json"},
				{Name: "jira", Transport: TransportHTTP, URL: "https://jira.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"}, Source: "home/.config/opencode/opencode.json"},
				{Name: "vs", Transport: TransportStdio, Command: "v", Source: "home/.config/Code/User/settings.json"},
			},
			wantWarnings: []string{`server "empty": "command" is an empty list`},
			wantSkipped:  []string{`server "off": enabled: false`},
		},
		{
			name: "self-reference guard",
			files: map[string]string{
				"home/MCPs/self.json": `{"mcpServers": {
  "mcp-server-code-execution-mode": {"command": "anything"},
  "by-command": {"command": "/usr/bin/mcp_server_code_execution_mode"},
  "by-arg": {"command": "uvx", "args": ["mcp-server-code-execution-mode"]},
  "by-arg-basename": {"command": "uv", "args": ["run", "/opt/x/mcp_server_code_execution_mode"]},
  "by-suffix": {"command": "python3", "args": ["/opt/x/mcp_server_code_execution_mode.py"]},
  "codeexec-binary": {"command": "/home/me/.local/bin/codeexec", "args": ["serve"]},
  "codeexec-go-run": {"command": "go", "args": ["run", "./cmd/codeexec", "serve"]},
  "other": {"command": "python3", "args": ["server.py"]}
}}`,
			},
			want:        []Server{{Name: "other", Transport: TransportStdio, Command: "python3", Args: []string{"server.py"}, Source: "home/MCPs/self.json"}},
			wantSkipped: []string{`"by-arg": points at this bridge`, `"by-arg-basename": points at`, `"by-command": points at`, `"by-suffix": points at`, `"codeexec-binary": points at`, `"codeexec-go-run": points at`, `"mcp-server-code-execution-mode": points at`},
		},
		{
			name: "self-reference guard can be disabled",
			opts: Options{AllowSelf: true},
			files: map[string]string{
				"home/MCPs/self.json": `{"mcpServers": {"by-arg": {"command": "uvx", "args": ["mcp-server-code-execution-mode"]}}}`,
			},
			want: []Server{{Name: "by-arg", Transport: TransportStdio, Command: "uvx", Args: []string{"mcp-server-code-execution-mode"}, Source: "home/MCPs/self.json"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			opts := tc.opts
			opts.Home = filepath.Join(root, "home")
			opts.Cwd = filepath.Join(root, "cwd")
			if tc.serversConfig != "" {
				opts.ServersConfig = filepath.Join(root, tc.serversConfig)
			}
			got := Load(opts)
			for i := range got.Servers {
				rel, err := filepath.Rel(root, got.Servers[i].Source)
				if err != nil {
					t.Fatal(err)
				}
				got.Servers[i].Source = filepath.ToSlash(rel)
				// Paths under root read @ROOT@ in want.
				got.Servers[i].Command = strings.ReplaceAll(got.Servers[i].Command, root, "@ROOT@")
				for j, a := range got.Servers[i].Args {
					got.Servers[i].Args[j] = strings.ReplaceAll(a, root, "@ROOT@")
				}
			}
			if diff := cmp.Diff(tc.want, got.Servers, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("servers (-want +got):\n%s", diff)
			}
			checkNotes(t, "warning", withCwd(tc.wantWarnings, opts.Cwd), got.Warnings)
			checkNotes(t, "skipped", withCwd(tc.wantSkipped, opts.Cwd), got.Skipped)
		})
	}
}

// withCwd puts cwd for @CWD@ in each note, as writeFiles does in files.
func withCwd(notes []string, cwd string) []string {
	out := make([]string, len(notes))
	for i, n := range notes {
		out[i] = strings.ReplaceAll(n, "@CWD@", cwd)
	}
	return out
}

func checkNotes(t *testing.T, what string, want []string, got []Warning) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d %s notes, want %d: %q", len(got), what, len(want), got)
		return
	}
	for i, w := range want {
		if !strings.Contains(got[i].String(), w) {
			t.Errorf("%s %d = %q, want it to contain %q", what, i, got[i].String(), w)
		}
	}
}

func TestSourcesOrder(t *testing.T) {
	t.Parallel()
	common := []string{
		"/h/MCPs",
		"/h/.config/mcp/servers",
		"/w/mcp-servers",
		"/w/.vscode/mcp.json",
		"/h/.claude.json",
		"/w/.mcp.json",
		"/w/.cursor/mcp.json",
		"/h/.cursor/mcp.json",
		"/h/.opencode.json",
		"/h/.config/opencode/opencode.json",
		"/h/.config/opencode/opencode.jsonc",
		"/h/.codeium/windsurf/mcp_config.json",
		"/h/.codex/config.toml",
		"/w/.gemini/settings.json",
		"/h/.gemini/settings.json",
		"/w/.zed/settings.json",
		"/h/.config/zed/settings.json",
	}
	for goos, want := range map[string][]string{
		"darwin": append(slices.Clone(common),
			"/h/Library/Application Support/Claude Code/claude_code_config.json",
			"/h/Library/Application Support/Claude/claude_desktop_config.json",
			"/h/Library/Application Support/Code/User/settings.json",
			"/h/cfg.toml"),
		"linux": append(slices.Clone(common),
			"/h/.config/Code/User/settings.json",
			"/h/.config/Claude/claude_desktop_config.json",
			"/h/cfg.toml"),
	} {
		var paths []string
		for _, s := range Sources(Options{Home: "/h", Cwd: "/w", GOOS: goos, ServersConfig: "~/cfg.toml"}) {
			paths = append(paths, s.Path)
		}
		if diff := cmp.Diff(want, paths); diff != "" {
			t.Errorf("sources on %s (-want +got):\n%s", goos, diff)
		}
	}
}

func TestStripJSONC(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"a": 1,}`, `{"a": 1 }`},
		{`[1, 2, /* x */ ]`, `[1, 2          ]`},
		{`{"u": "http://x//y"} // c`, `{"u": "http://x//y"}     `},
		{`{"s": "a,}"}`, `{"s": "a,}"}`},
		{`{"e": "q\"//"}`, `{"e": "q\"//"}`},
		{"{/*\n*/}", "{  \n  }"},
	}
	for _, tc := range tests {
		got, err := stripJSONC([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("stripJSONC(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestParseErrorsNameLineAndColumn: a file that does not parse is reported
// with the line and column of the mistake in the file as written, comments
// included, so that it can be found in a long ~/.claude.json.
func TestParseErrorsNameLineAndColumn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, body, want string
	}{
		{"missing comma", ".claude.json", "{\n  \"numStartups\": 3,\n  \"mcpServers\": {\"a\": {\"command\": \"x\"}}\n  \"tipsHistory\": {}\n}\n",
			`invalid JSON at line 4, column 3: invalid character '"' after object value (expecting ',' or '}')`},
		{"after comments, at the mistake and not the first comment", "settings.json", "{\n  // editor\n  /* a\n  b */ \"editor.fontSize\": 12,\n  \"mcp\": {\"servers\": {\"é\": {command: \"x\"}}}\n}",
			`invalid JSON at line 5, column 29: invalid literal: command`},
		{"cut short", "mcp.json", `{"mcpServers": {`, `invalid JSON at line 1, column 17: parsing value: unexpected EOF`},
		{"trailing data, which a decoder would pass over", "mcp.json", "{\"mcpServers\": {}}\n}\n", `invalid JSON at line 2, column 1: invalid character '}' after top-level value`},
		{"unterminated comment", "mcp.json", "{\"mcpServers\": {}}\n/* open", `invalid JSON at line 2, column 1: parsing comment: unexpected EOF`},
		{"TOML", "config.toml", "[mcp_servers.a]\ncommand = \"x\"\nargs = [1,\n", `invalid TOML at line 3, column 11: unexpected EOF`},
		{"TOML bad key", "config.toml", "[mcp_servers.a]\ncommand = x\n", `invalid TOML at line 2, column 11: `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			var res Result
			loadFile(path, true, Options{}, &res)
			if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0].String(), path+": "+tc.want) {
				t.Errorf("warnings = %q, want one starting %q", res.Warnings, path+": "+tc.want)
			}
		})
	}
}

// TestStrNumbers: a number in args or env reads as Python's str() prints
// what json.loads makes of it, and the same from TOML (found by
// FuzzLayouts: "1e3" stayed "1e3" from JSON and became "1000" from TOML).
func TestStrNumbers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   any
		want string
	}{
		{json.Number("5"), "5"},
		{json.Number("-0"), "0"},
		{json.Number("12345678901234567890"), "12345678901234567890"},
		{json.Number("1.0"), "1.0"},
		{json.Number("1e3"), "1000.0"},
		{json.Number("2.50"), "2.5"},
		{json.Number("1e-5"), "1e-05"},
		{json.Number("1e16"), "1e+16"},
		{json.Number("1e400"), "inf"},
		{int64(7), "7"},
		{1.0, "1.0"},
		{1e3, "1000.0"},
		{[]any{json.Number("1e3"), 2.0, int64(3)}, "[1000.0,2.0,3]"},
		{map[string]any{"k": json.Number("-1E2")}, `{"k":-100.0}`},
	} {
		if got := str(tc.in); got != tc.want {
			t.Errorf("str(%#v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestStamp: the stamp changes when a config file is added, edited or
// removed, and not when a file that Load does not read comes and goes
// (the state database beside ~/MCPs/*.json).
func TestStamp(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	opts := Options{Home: filepath.Join(root, "home"), Cwd: filepath.Join(root, "cwd")}
	stamps := map[string]string{"none": Stamp(opts)}
	step := func(name string, change func()) {
		t.Helper()
		change()
		got := Stamp(opts)
		for prev, s := range stamps {
			if s == got {
				t.Errorf("after %s the stamp is the one of %s", name, prev)
			}
		}
		stamps[name] = got
	}
	step("a new ~/.claude.json", func() { writeFiles(t, root, map[string]string{"home/.claude.json": `{"mcpServers": {}}`}) })
	step("~/.claude.json edited", func() {
		writeFiles(t, root, map[string]string{"home/.claude.json": `{"mcpServers": {"a": {"command": "a"}}}`})
	})
	step("a new ~/MCPs/x.json", func() { writeFiles(t, root, map[string]string{"home/MCPs/x.json": `{}`}) })
	before := Stamp(opts)
	writeFiles(t, root, map[string]string{"home/MCPs/codeexec.db": "bolt", "home/MCPs/user_tools/": ""})
	if got := Stamp(opts); got != before {
		t.Errorf("files Load does not read changed the stamp:\n%s\nto\n%s", before, got)
	}
	// Removed, the files are as they were before it came.
	if err := os.Remove(filepath.Join(root, "home", "MCPs", "x.json")); err != nil {
		t.Fatal(err)
	}
	if got := Stamp(opts); got != stamps["~/.claude.json edited"] {
		t.Errorf("with ~/MCPs/x.json removed the stamp is\n%s\nwant the one before it came:\n%s", got, stamps["~/.claude.json edited"])
	}
}

// TestPWDFallsBackToTheWorkingDirectory: a client that starts the bridge
// without a shell passes no PWD; ${PWD} in a project's .mcp.json is then
// the directory the bridge runs in, not an undefined variable.
func TestPWDFallsBackToTheWorkingDirectory(t *testing.T) {
	t.Parallel()
	x := expander{lookup: func(string) (string, bool) { return "", false }, cwd: "/work/project"}
	if got := x.expand("${PWD}/data:${env:PWD}"); got != "/work/project/data:/work/project" || len(x.missing) != 0 {
		t.Errorf("expand = %q, missing %q; want the working directory", got, x.missing)
	}
	x = expander{lookup: func(k string) (string, bool) { return "/from/env", k == "PWD" }, cwd: "/work/project"}
	if got := x.expand("${PWD}"); got != "/from/env" {
		t.Errorf("with PWD set: expand = %q, want the variable's value", got)
	}
}
