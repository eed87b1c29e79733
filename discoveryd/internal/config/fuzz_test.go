package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
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
		{2, `{"projects": {"/work": {"mcpServers": {"p": {"command": "p"}, "q": {"command": "q"}}, "disabledMcpServers": ["p", "u", 3, null]}}, "mcpServers": {"u": {"command": "u"}}}`},
		{2, `{"projects": {"/work/project": {"disabledMcpServers": "u"}}, "mcpServers": {"u": {"command": "u"}}}`},
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
		servers := loadFile(path, true, opts, &res)
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
		out, err := stripJSONC(in)
		if err != nil && !strings.Contains(err.Error(), " at line ") {
			t.Errorf("stripJSONC error %q does not name the line", err)
		}
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

// FuzzLayouts puts one arbitrary object of servers into every client
// layout the parser reads (mcpServers, VS Code's servers, mcp.servers and
// "mcp": {"servers"}, Claude Code's per-project servers, OpenCode's "mcp",
// Codex's TOML mcp_servers) and checks that each reads the same servers:
// where a server is written must not change what it is.
func FuzzLayouts(f *testing.F) {
	for _, s := range []string{
		`{"fs": {"command": "npx", "args": ["-y", "x", 1, true], "env": {"K": "${HOME}", "N": 5}}}`,
		`{"gh": {"type": "http", "url": "https://example.invalid/mcp", "headers": {"A": "b"}}, "off": {"command": "o", "disabled": true}}`,
		`{"m": {"type": "local", "command": ["node", "s.js"], "environment": {"X": "1.5"}, "enabled": true}}`,
		`{"t": {"command": "t", "tenants": ["a", "b"], "description": "d", "cwd": "/tmp"}, "bad": [], "s": {"url": "http://x", "type": "sse"}}`,
		`{"n": {"command": "n", "args": [1.0, 1e3, -0.5, -0, 1e-7, [2.0, {"k": 1E2}]], "env": {"F": 2.50}}}`,
		`{"big": {"command": "b", "args": [12345678901234567890, 1e400]}}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	env := map[string]string{"HOME": "/home/u"}
	opts := Options{Cwd: "/work/project", Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	f.Fuzz(func(t *testing.T, data []byte) {
		var servers map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&servers) != nil || servers == nil {
			return
		}
		// OpenCode's "mcp" holds servers next to VS Code's own keys, which
		// it skips; leave those names out everywhere.
		for _, k := range vsCodeMCPKeys {
			delete(servers, k)
		}
		docs := []struct {
			name string
			doc  any
		}{
			{"mcp.json", map[string]any{"mcpServers": servers}},
			{"mcp.json", map[string]any{"servers": servers}},
			{"settings.json", map[string]any{"mcp": map[string]any{"servers": servers}}},
			{"settings.json", map[string]any{"mcp.servers": servers}},
			{".claude.json", map[string]any{"projects": map[string]any{"/work": map[string]any{"mcpServers": servers}}}},
			{"opencode.jsonc", map[string]any{"mcp": servers}},
			{"settings.json", map[string]any{"context_servers": servers}},
		}
		want := readLayout(t, dir, "mcp.json", docs[0].doc, opts)
		for _, d := range docs[1:] {
			if diff := cmp.Diff(want, readLayout(t, dir, d.name, d.doc, opts)); diff != "" {
				t.Errorf("%s %s reads other servers than mcpServers (-mcpServers +there):\n%s", d.name, keysOf(d.doc), diff)
			}
		}
		tv, ok := tomlValue(servers)
		var toml bytes.Buffer
		if !ok || tomlEncode(&toml, map[string]any{"mcp_servers": tv}) != nil {
			return // TOML cannot write it (a null, an integer past 64 bits)
		}
		if diff := cmp.Diff(want, readLayout(t, dir, "config.toml", toml.Bytes(), opts)); diff != "" {
			t.Errorf("TOML mcp_servers reads other servers than JSON mcpServers (-JSON +TOML):\n%s\n%s", diff, toml.String())
		}
	})
}

// layoutRead is what one file gave: its servers (without their source)
// and the names it skipped or warned about.
type layoutRead struct {
	Servers           []Server
	Skipped, Warnings []string
}

// readLayout writes doc (JSON, or bytes as they are) to dir/name and
// reads it.
func readLayout(t *testing.T, dir, name string, doc any, opts Options) layoutRead {
	t.Helper()
	data, ok := doc.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var res Result
	var out layoutRead
	for _, s := range loadFile(path, true, opts, &res) {
		s.Source = ""
		out.Servers = append(out.Servers, s)
	}
	for _, w := range res.Skipped {
		out.Skipped = append(out.Skipped, w.Server)
	}
	for _, w := range res.Warnings {
		out.Warnings = append(out.Warnings, w.Server)
	}
	return out
}

func keysOf(doc any) string {
	b, _ := json.Marshal(doc)
	return string(b[:min(len(b), 40)])
}

// tomlValue turns decoded JSON into what TOML holds: whole numbers as
// 64-bit integers, others as floats. ok is false for what TOML cannot
// hold.
func tomlValue(v any) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			var ok bool
			if out[k], ok = tomlValue(x); !ok {
				return nil, false
			}
		}
		return out, true
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			var ok bool
			if out[i], ok = tomlValue(x); !ok {
				return nil, false
			}
		}
		return out, true
	case json.Number:
		if !strings.ContainsAny(v.String(), ".eE") {
			i, err := v.Int64()
			return i, err == nil
		}
		f, err := v.Float64()
		return f, err == nil
	case nil:
		return nil, false
	}
	return v, true
}

func tomlEncode(w *bytes.Buffer, v any) (err error) {
	defer func() {
		if recover() != nil {
			err = errors.New("the TOML encoder panicked")
		}
	}()
	return toml.NewEncoder(w).Encode(v)
}
