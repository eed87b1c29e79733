package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzNames are the file names the parser treats differently.
var fuzzNames = []string{"mcp.json", "settings.json", ".claude.json", "opencode.jsonc", "config.toml"}

// FuzzLoadFile feeds arbitrary bytes to the config parser under each file
// name it treats differently (JSON with comments, TOML, Claude's per-project
// layout through the working directory). Whatever the input, it must not
// panic, every server it returns must be usable (a name, and a command for
// stdio or a URL for HTTP/SSE), and every problem must name its file.
func FuzzLoadFile(f *testing.F) {
	seeds := []struct {
		name uint8
		body string
	}{
		{0, `{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"], "env": {"K": "${HOME}"}}}}`},
		{0, `{"servers": {"gh": {"type": "http", "url": "https://example.invalid/mcp", "headers": {"A": "b"}}}}`},
		{1, `{ // VS Code
  "mcp": {"servers": {"a": {"command": "a",}}, "inputs": []},
  "mcp.servers": {"b": {"url": "http://x", "type": "sse"}},
}`},
		{2, `{"projects": {"/work": {"mcpServers": {"p": {"command": "p"}}}}, "mcpServers": {"u": {"command": "u"}}}`},
		{3, `{"mcp": {"m": {"type": "local", "command": ["node", "s.js"], "environment": {"X": "1"}, "enabled": true}}}`},
		{4, "[mcp_servers.docs]\ncommand = \"docs\"\nargs = [\"--x\"]\n[mcp_servers.off]\ncommand = \"o\"\ndisabled = true\n"},
		{0, `{"mcpServers": {"self": {"command": "codeexec", "args": ["serve"]}, "bad": [], "cmd": {"command": {}}}}`},
		{0, `{"mcpServers": {"t": {"command": "t", "tenants": ["a", "b"]}}, "description": "d"}`},
		{0, ``},
		{0, `[1, 2]`},
		{4, "mcp_servers = 3"},
	}
	for _, s := range seeds {
		f.Add(s.name, []byte(s.body))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, name uint8, body []byte) {
		path := filepath.Join(dir, fuzzNames[int(name)%len(fuzzNames)])
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"HOME": "/home/u"}
		opts := Options{Cwd: "/work/project", Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
		var res Result
		servers := loadFile(path, opts, &res)
		for _, s := range servers {
			if s.Name == "" {
				t.Errorf("a server without a name: %+v", s)
			}
			switch s.Transport {
			case TransportStdio:
				if s.Command == "" {
					t.Errorf("stdio server %q without a command", s.Name)
				}
			case TransportHTTP, TransportSSE:
				if s.URL == "" {
					t.Errorf("%s server %q without a URL", s.Transport, s.Name)
				}
			default:
				t.Errorf("server %q has transport %q", s.Name, s.Transport)
			}
			if s.Source != path {
				t.Errorf("server %q has source %q, want %q", s.Name, s.Source, path)
			}
		}
		for _, w := range append(res.Warnings, res.Skipped...) {
			if w.Path != path || w.Reason == "" {
				t.Errorf("a problem report without its file or reason: %+v", w)
			}
		}
	})
}

// FuzzStripJSONC checks the comment stripper on any input: valid JSON
// without comments comes back unchanged, and the result never grows.
func FuzzStripJSONC(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, "// c\n{\"a\": /* x */ 1,}", `{"s": "// not a comment"}`, "/* open", `"\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := stripJSONC(in)
		if len(out) > len(in) {
			t.Errorf("stripJSONC grew %d bytes to %d", len(in), len(out))
		}
	})
}

// FuzzExpand checks ${VAR} expansion: defined variables are substituted,
// undefined ones are reported, and text without "${" is left alone.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"${HOME}/x", "${env:HOME}", "${NOPE}", "$HOME", "${", "}${}", "a${B}c${D}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x := expander{lookup: func(k string) (string, bool) {
			if k == "HOME" {
				return "/home/u", true
			}
			return "", false
		}}
		got := x.expand(s)
		if !strings.Contains(s, "${") && got != s {
			t.Errorf("expand(%q) = %q; text without ${ must be left alone", s, got)
		}
	})
}
