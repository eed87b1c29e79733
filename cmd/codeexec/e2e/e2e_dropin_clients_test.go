package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// End-to-end tests of the configs that the MCP clients themselves write,
// read as those clients read them, by codeexec started in the project the
// client has open.

// writeFile writes body to dir/rel, making its directories.
func writeFile(t *testing.T, dir, rel, body string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// jsonString is s as a JSON string literal.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestE2EDropInClientVariables: the variables of VS Code's and Cursor's
// mcp.json (${workspaceFolder}, ${userHome}, ${/}) and Claude Code's
// ${VAR:-default} in .mcp.json are substituted as those clients do, and
// the servers load and answer from run_python. A ${input:ID}, which VS
// Code prompts for, refuses its entry with a warning that names the file
// and says what to write instead, while the file's other servers load.
func TestE2EDropInClientVariables(t *testing.T) {
	t.Parallel()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	project := t.TempDir()
	if err := os.Mkdir(filepath.Join(project, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, project, "data/hello.txt", "hello from the workspace")
	// As VS Code writes it: comments, trailing commas, inputs.
	writeFile(t, project, ".vscode/mcp.json", `{
  // the workspace's servers
  "inputs": [{"type": "promptString", "id": "api-key", "description": "API key", "password": true}],
  "servers": {
    "files": {
      "type": "stdio",
      "command": `+jsonString(t, node)+`,
      "args": [`+jsonString(t, npmEntry(t, "server-filesystem"))+`, "${workspaceFolder}${/}data"],
    },
    "prompted": {
      "command": `+jsonString(t, node)+`,
      "args": [`+jsonString(t, npmEntry(t, "server-everything"))+`],
      "env": {"API_KEY": "${input:api-key}"},
    },
  },
}`)
	writeFile(t, project, ".mcp.json", `{"mcpServers": {"every": {
  "command": `+jsonString(t, node)+`,
  "args": [`+jsonString(t, npmEntry(t, "server-everything"))+`],
  "env": {"LEVEL": "${CODEEXEC_E2E_UNSET:-info}", "MODE": "${CODEEXEC_E2E_MODE:-default}", "WS": "${workspaceFolderBasename}"}
}}}`)
	c, logs := harness.StartStdioIn(t, project, map[string]string{"CODEEXEC_E2E_MODE": "set"})

	o := harness.RunPython(t, c, map[string]any{"servers": []any{"files", "every"}, "code": strings.NewReplacer(
		"DATA", jsonString(t, filepath.Join(project, "data")), "BASENAME", jsonString(t, filepath.Base(project))).Replace(`
import json
from mcp.servers.files import read_text_file
from mcp.servers.every import get_env
print(runtime.discovered_servers())
print((await read_text_file(path=DATA + "/hello.txt"))["content"][0]["text"])
env = json.loads((await get_env())["content"][0]["text"])
print(env.get("LEVEL"), env.get("MODE"), env.get("WS") == BASENAME)`)})
	want := []string{"('every', 'files')", "hello from the workspace", "info set True"}
	if o.IsError || harness.Joined(o.Stdout()) != harness.Joined(want) {
		t.Errorf("servers of .vscode/mcp.json and .mcp.json with the clients' variables:\n%s\nwant:\n%s", o.Text, harness.Joined(want))
	}
	waitLog(t, "codeexec", logs, regexp.MustCompile(regexp.QuoteMeta(`config.path=`+filepath.Join(project, ".vscode", "mcp.json")+` mcp.server=prompted error="uses ${input:api-key}, which VS Code asks the user for and codeexec cannot; write the value in its place, or use ${env:NAME} and set NAME where codeexec starts"`)))
}

// TestE2EDropInRemoteURLSecretsStayHidden: a remote server's URL that
// carries its credentials (a user and password, an api_key in the query,
// as hosted MCP servers hand them out) is used as written, but an error
// that names it, in the code and in the log, shows "***" for each of them.
func TestE2EDropInRemoteURLSecretsStayHidden(t *testing.T) {
	t.Parallel()
	addr := harness.FreeAddr(t) // nothing listens there
	down := "http://me:pa55word@" + addr + "/mcp?api_key=SECRETKEY&region=eu"
	live := serveEverythingHTTP(t) + "?api_key=SECRETKEY"
	project := t.TempDir()
	writeFile(t, project, ".mcp.json", `{"mcpServers": {
  "down": {"type": "http", "url": `+jsonString(t, down)+`, "headers": {"Authorization": "Bearer SECRETTOKEN"}},
  "live": {"type": "streamable-http", "url": `+jsonString(t, live)+`}
}}`)
	c, logs := harness.StartStdioIn(t, project, nil)
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"down", "live"}, "code": `
print((await mcp_live.echo(message="hi"))["content"][0]["text"])
try:
    await mcp_down.echo(message="hi")
except Exception as e:
    print(type(e).__name__, e)`})
	text := harness.Joined(o.Stdout())
	wantURL := "http://***@" + addr + "/mcp?api_key=***&region=***"
	if o.IsError || !strings.HasPrefix(text, "Echo: hi\nUnavailableError ") || !strings.Contains(text, `server "down" at `+wantURL+": ") {
		t.Errorf("calls to the live and the down server:\n%s\nwant Echo: hi, then an UnavailableError naming %s", o.Text, wantURL)
	}
	for _, secret := range []string{"pa55word", "SECRETKEY", "SECRETTOKEN", "me@", "me:"} {
		if strings.Contains(o.Text, secret) {
			t.Errorf("the code's output shows %q:\n%s", secret, o.Text)
		}
		if strings.Contains(logs.String(), secret) {
			t.Errorf("codeexec's log shows %q:\n%s", secret, harness.TailOf(logs.String(), 4000))
		}
	}
}

// TestE2EDropInServersAddedWhileRunning: a server added to a config
// while codeexec runs (`claude mcp add` writing ~/.claude.json, first a
// new file, then the same file again) is found by the next call, as
// upstream's re-scan on every call finds it: loaded with servers=[...],
// listed by discovered_servers() and found by a search.
func TestE2EDropInServersAddedWhileRunning(t *testing.T) {
	t.Parallel()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	home, project := t.TempDir(), t.TempDir()
	c, _ := harness.StartStdioIn(t, project, harness.StateEnv(home))
	o := harness.Code(t, c, `print("servers", runtime.discovered_servers())`)
	if got := harness.Joined(o.Stdout()); got != "servers ()" {
		t.Fatalf("before any config: %s, want servers ()", o.Text)
	}

	mem := func() string {
		return `{"type": "stdio", "command": ` + jsonString(t, node) + `, "args": [` + jsonString(t, npmEntry(t, "server-memory")) + `], "env": {"MEMORY_FILE_PATH": ` + jsonString(t, filepath.Join(t.TempDir(), "m.jsonl")) + `}}`
	}
	writeFile(t, home, ".claude.json", `{"numStartups": 3, "mcpServers": {"memory": `+mem()+`}}`)
	o = harness.RunPython(t, c, map[string]any{"servers": []any{"memory"}, "code": `
from mcp.servers.memory import read_graph
print("servers", runtime.discovered_servers())
print((await read_graph())["structuredContent"])
print([(d["server"], d["tool"]) for d in await runtime.search_tool_docs("read graph")][:1])`})
	want := []string{"servers ('memory',)", "{'entities': [], 'relations': []}", "[('memory', 'read_graph')]"}
	if o.IsError || harness.Joined(o.Stdout()) != harness.Joined(want) {
		t.Errorf("a server added to ~/.claude.json after the first call:\n%s\nwant:\n%s", o.Text, harness.Joined(want))
	}

	// The same file again, with a project-scope server beside it.
	writeFile(t, home, ".claude.json", `{"numStartups": 4, "mcpServers": {"memory": `+mem()+`},
  "projects": {`+jsonString(t, project)+`: {"mcpServers": {"notes": `+mem()+`}}}}`)
	o = harness.RunPython(t, c, map[string]any{"servers": []any{"notes"}, "code": `
print("servers", runtime.discovered_servers())
print((await mcp_notes.read_graph())["structuredContent"])`})
	want = []string{"servers ('memory', 'notes')", "{'entities': [], 'relations': []}"}
	if o.IsError || harness.Joined(o.Stdout()) != harness.Joined(want) {
		t.Errorf("a server added to ~/.claude.json's project:\n%s\nwant:\n%s", o.Text, harness.Joined(want))
	}
}

// TestE2EDropInURLOfAnSSEServer: a "url" with no "type" (Cursor's
// layout), with "type": "http" (VS Code's), or Windsurf's "serverUrl",
// that points at a server of the older HTTP+SSE transport is used as
// one, as those clients use it, after its streamable-HTTP initialize got
// a 4xx status. A URL that is neither says so and asks to check it.
func TestE2EDropInURLOfAnSSEServer(t *testing.T) {
	t.Parallel()
	base := serveEverything(t, "sse")
	home, project := t.TempDir(), t.TempDir()
	writeFile(t, home, ".cursor/mcp.json", `{"mcpServers": {"legacy": {"url": `+jsonString(t, base+"/sse")+`}, "wrong": {"url": `+jsonString(t, base+"/nope")+`}}}`)
	writeFile(t, project, ".vscode/mcp.json", `{"servers": {"legacy-vs": {"type": "http", "url": `+jsonString(t, base+"/sse")+`}}}`)
	writeFile(t, home, ".codeium/windsurf/mcp_config.json", `{"mcpServers": {"wind": {"serverUrl": `+jsonString(t, base+"/sse")+`}}}`)
	c, _ := harness.StartStdioIn(t, project, harness.StateEnv(home))
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"legacy", "legacy-vs", "wind", "wrong"}, "code": `
print((await mcp_legacy.echo(message="cursor"))["content"][0]["text"])
print((await mcp_legacy_vs.echo(message="vs code"))["content"][0]["text"])
print((await mcp_wind.echo(message="windsurf"))["content"][0]["text"])
try:
    await mcp_wrong.echo(message="x")
except Exception as e:
    print(type(e).__name__, e)`})
	want := []string{"Echo: cursor", "Echo: vs code", "Echo: windsurf",
		`UnavailableError unavailable: MCP server failed to start: server "wrong" at ` + base + `/nope: unexpected status code: 404, as an SSE server, after its streamable-HTTP initialize got a 4xx status: check the URL`}
	if o.IsError || harness.Joined(o.Stdout()) != harness.Joined(want) {
		t.Errorf("servers of the HTTP+SSE transport named by a url alone:\n%s\nwant:\n%s", o.Text, harness.Joined(want))
	}
}

// TestE2EDropInUnloadedServerSaysWhy: a call naming a server whose
// config entry was not loaded (a variable not set, "disabled": true, a
// VS Code input, codeexec itself) says which file holds it and why, not
// only that the name is unknown; a name in no config says what it did.
func TestE2EDropInUnloadedServerSaysWhy(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	writeFile(t, project, ".mcp.json", `{"mcpServers": {
  "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${CODEEXEC_E2E_NO_TOKEN}"}},
  "off": {"command": "x", "disabled": true},
  "me": {"command": "codeexec", "args": ["serve"]}
}}`)
	writeFile(t, project, ".vscode/mcp.json", `{"servers": {"asks": {"command": "x", "env": {"K": "${input:key}"}}}}`)
	c, _ := harness.StartStdioIn(t, project, nil)
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"github", "off", "asks", "me", "nope"}, "code": `print(1)`})
	mcp, vs := filepath.Join(project, ".mcp.json"), filepath.Join(project, ".vscode", "mcp.json")
	want := `5 unknown MCP servers: "github", "off", "asks", "me", "nope"` +
		`; "github" in ` + mcp + ` was not loaded: undefined variable(s) CODEEXEC_E2E_NO_TOKEN; set them in the environment or remove the references` +
		`; "off" in ` + mcp + ` was not loaded: disabled: true` +
		`; "asks" in ` + vs + ` was not loaded: uses ${input:key}, which VS Code asks the user for and codeexec cannot; write the value in its place, or use ${env:NAME} and set NAME where codeexec starts` +
		`; "me" in ` + mcp + ` was not loaded: points at this bridge itself (set MCP_BRIDGE_ALLOW_SELF_SERVER=1 to allow)` +
		`; configured servers: none (add servers to ~/MCPs/*.json, your MCP client config, or MCP_SERVERS_CONFIG)`
	if !o.IsError || !strings.Contains(o.Text, want) {
		t.Errorf("a call naming servers that were not loaded:\n%s\nwant it to say:\n%s", o.Text, want)
	}
}

// TestE2EDropInMoreClients: the servers of Codex CLI (~/.codex/config.toml),
// Gemini CLI (~/.gemini/settings.json and the project's), Cursor's
// project file (.cursor/mcp.json) and Claude Desktop on Linux
// (~/.config/Claude/claude_desktop_config.json), each beside that
// client's other settings as it writes them, load and answer.
func TestE2EDropInMoreClients(t *testing.T) {
	t.Parallel()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	home, project := t.TempDir(), t.TempDir()
	memory := func() (string, string) {
		return jsonString(t, npmEntry(t, "server-memory")), jsonString(t, filepath.Join(t.TempDir(), "m.jsonl"))
	}
	entry, file := memory()
	writeFile(t, home, ".codex/config.toml", `model = "o3"
approval_policy = "on-request"

[profiles.fast]
model = "o4-mini"

[mcp_servers.codex-mem]
command = `+jsonString(t, node)+`
args = [`+entry+`]
env = { "MEMORY_FILE_PATH" = `+file+` }
startup_timeout_sec = 20
`)
	entry, file = memory()
	writeFile(t, home, ".gemini/settings.json", `{"theme": "GitHub", "selectedAuthType": "oauth-personal",
  "mcpServers": {"gemini-mem": {"command": `+jsonString(t, node)+`, "args": [`+entry+`], "env": {"MEMORY_FILE_PATH": `+file+`}, "timeout": 30000, "trust": false}}}`)
	entry, file = memory()
	writeFile(t, project, ".gemini/settings.json", `{"mcpServers": {"gemini-project-mem": {"command": `+jsonString(t, node)+`, "args": [`+entry+`], "env": {"MEMORY_FILE_PATH": `+file+`}}}}`)
	entry, file = memory()
	writeFile(t, project, ".cursor/mcp.json", `{"mcpServers": {"cursor-mem": {"command": `+jsonString(t, node)+`, "args": [`+entry+`], "env": {"MEMORY_FILE_PATH": `+file+`}}}}`)
	entry, file = memory()
	writeFile(t, home, ".config/Claude/claude_desktop_config.json", `{"mcpServers": {"desktop-mem": {"command": `+jsonString(t, node)+`, "args": [`+entry+`], "env": {"MEMORY_FILE_PATH": `+file+`}}}, "globalShortcut": "Ctrl+Space"}`)
	c, _ := harness.StartStdioIn(t, project, harness.StateEnv(home))
	names := []any{"codex-mem", "gemini-mem", "gemini-project-mem", "cursor-mem", "desktop-mem"}
	o := harness.RunPython(t, c, map[string]any{"servers": names, "code": `
print(runtime.discovered_servers())
for name in sorted(LOADED_MCP_SERVERS):
    print(name, (await getattr(mcp_servers[name], "read_graph")())["structuredContent"])`})
	want := []string{"('codex-mem', 'cursor-mem', 'desktop-mem', 'gemini-mem', 'gemini-project-mem')"}
	for _, n := range []string{"codex-mem", "cursor-mem", "desktop-mem", "gemini-mem", "gemini-project-mem"} {
		want = append(want, n+" {'entities': [], 'relations': []}")
	}
	if o.IsError || harness.Joined(o.Stdout()) != harness.Joined(want) {
		t.Errorf("servers of Codex, Gemini CLI, Cursor's project and Claude Desktop on Linux:\n%s\nwant:\n%s", o.Text, harness.Joined(want))
	}
}

// TestE2EDropInVSCodeEnvFile: a stdio server of .vscode/mcp.json gets the
// variables of its "envFile", under those of "env", as VS Code starts it;
// one whose envFile is missing is refused, saying so, and not started
// without the secrets the user put there.
func TestE2EDropInVSCodeEnvFile(t *testing.T) {
	t.Parallel()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	project := t.TempDir()
	writeFile(t, project, ".env", "# secrets\nAPI_TOKEN=\"from the file\"\nREGION=file\n")
	every := `"command": ` + jsonString(t, node) + `, "args": [` + jsonString(t, npmEntry(t, "server-everything")) + `]`
	writeFile(t, project, ".vscode/mcp.json", `{"servers": {
  "every": {"type": "stdio", `+every+`, "envFile": "${workspaceFolder}/.env", "env": {"REGION": "env"}},
  "lost": {`+every+`, "envFile": "${workspaceFolder}/missing.env"}
}}`)
	c, _ := harness.StartStdioIn(t, project, nil)
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"every"}, "code": `
import json
env = json.loads((await mcp_every.get_env())["content"][0]["text"])
print(env.get("API_TOKEN"), env.get("REGION"))`})
	if want := "from the file env"; o.IsError || harness.Joined(o.Stdout()) != want {
		t.Errorf("a server with an envFile:\n%s\nwant %s", o.Text, want)
	}
	o = harness.RunPython(t, c, map[string]any{"servers": []any{"lost"}, "code": `print(1)`})
	missing := filepath.Join(project, "missing.env")
	if want := `"lost" in ` + filepath.Join(project, ".vscode", "mcp.json") + ` was not loaded: "envFile" ` + missing + ` cannot be read (open ` + missing + `: no such file or directory)`; !o.IsError || !strings.Contains(o.Text, want) {
		t.Errorf("a server whose envFile is missing:\n%s\nwant it to say %s", o.Text, want)
	}
}

// TestE2EDropInClaudeCodeRejectedProjectServers: a server of the
// project's .mcp.json that the user rejected when Claude Code asked (its
// disabledMcpjsonServers, in .claude/settings.local.json or, from older
// versions, ~/.claude.json's project) is not started, as Claude Code does
// not start it; a call naming it says where it was rejected. The
// servers beside it load.
func TestE2EDropInClaudeCodeRejectedProjectServers(t *testing.T) {
	t.Parallel()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	home, project := t.TempDir(), t.TempDir()
	every := `{"command": ` + jsonString(t, node) + `, "args": [` + jsonString(t, npmEntry(t, "server-everything")) + `]}`
	writeFile(t, project, ".mcp.json", `{"mcpServers": {"approved": `+every+`, "rejected": `+every+`, "old-rejected": `+every+`}}`)
	writeFile(t, project, ".claude/settings.local.json", `{"enabledMcpjsonServers": ["approved"], "disabledMcpjsonServers": ["rejected"]}`)
	writeFile(t, home, ".claude.json", `{"projects": {`+jsonString(t, project)+`: {"disabledMcpjsonServers": ["old-rejected"]}}}`)
	c, _ := harness.StartStdioIn(t, project, harness.StateEnv(home))
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"approved"}, "code": `
print(runtime.discovered_servers())
print((await mcp_approved.echo(message="hi"))["content"][0]["text"])`})
	if want := "('approved',)\nEcho: hi"; o.IsError || harness.Joined(o.Stdout()) != want {
		t.Errorf("the approved server of .mcp.json:\n%s\nwant:\n%s", o.Text, want)
	}
	o = harness.RunPython(t, c, map[string]any{"servers": []any{"rejected", "old-rejected"}, "code": `print(1)`})
	mcp := filepath.Join(project, ".mcp.json")
	want := `; "rejected" in ` + mcp + ` was not loaded: rejected for this project in Claude Code (disabledMcpjsonServers of ` + filepath.Join(project, ".claude", "settings.local.json") + `)` +
		`; "old-rejected" in ` + mcp + ` was not loaded: rejected for this project in Claude Code (projects.` + jsonString(t, project) + `.disabledMcpjsonServers of ` + filepath.Join(home, ".claude.json") + `)`
	if !o.IsError || !strings.Contains(o.Text, want) {
		t.Errorf("a call naming the rejected servers:\n%s\nwant it to say:\n%s", o.Text, want)
	}
}

// TestE2EDropInZed: the context_servers of Zed's settings (user-wide and
// the project's .zed/settings.json), in its current layout and its older
// one ("command": {"path", "args", "env"}), load and answer; a server an
// extension provides, which only Zed can start, is left out saying so.
func TestE2EDropInZed(t *testing.T) {
	t.Parallel()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	home, project := t.TempDir(), t.TempDir()
	writeFile(t, home, ".config/zed/settings.json", `// Zed settings
{
  "theme": {"mode": "system", "light": "One Light", "dark": "One Dark"},
  "context_servers": {
    "zed-old": {"command": {"path": `+jsonString(t, node)+`, "args": [`+jsonString(t, npmEntry(t, "server-memory"))+`], "env": {"MEMORY_FILE_PATH": `+jsonString(t, filepath.Join(t.TempDir(), "m.jsonl"))+`}}, "settings": {}},
    "zed-ext": {"source": "extension", "settings": {"github_personal_access_token": "x"}},
  },
}`)
	writeFile(t, project, ".zed/settings.json", `{"context_servers": {"zed-new": {"source": "custom", "command": `+jsonString(t, node)+`, "args": [`+jsonString(t, npmEntry(t, "server-everything"))+`]}}}`)
	c, _ := harness.StartStdioIn(t, project, harness.StateEnv(home))
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"zed-old", "zed-new"}, "code": `
print(runtime.discovered_servers())
print((await mcp_zed_old.read_graph())["structuredContent"])
print((await mcp_zed_new.echo(message="zed"))["content"][0]["text"])`})
	want := "('zed-new', 'zed-old')\n{'entities': [], 'relations': []}\nEcho: zed"
	if o.IsError || harness.Joined(o.Stdout()) != want {
		t.Errorf("Zed's context_servers:\n%s\nwant:\n%s", o.Text, want)
	}
	o = harness.RunPython(t, c, map[string]any{"servers": []any{"zed-ext"}, "code": `print(1)`})
	if want := `"zed-ext" in ` + filepath.Join(home, ".config", "zed", "settings.json") + ` was not loaded: a Zed extension's server ("source": "extension"), which only Zed can start`; !o.IsError || !strings.Contains(o.Text, want) {
		t.Errorf("a call naming a Zed extension's server:\n%s\nwant it to say %s", o.Text, want)
	}
}

// TestE2EDropInUnloadedServerSaysWhyInTheSandbox: the code of a call
// that names a server whose config entry was not loaded is told that the
// entry was not loaded, where and why, by the sync helpers and by the
// calls sandboxd answers, not to list it in servers=[...], which fails.
func TestE2EDropInUnloadedServerSaysWhyInTheSandbox(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	writeFile(t, project, ".mcp.json", `{"mcpServers": {
  "every": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"K": "${CODEEXEC_E2E_NO_TOKEN}"}}
}}`)
	c, _ := harness.StartStdioIn(t, project, nil)
	o := harness.RunPython(t, c, map[string]any{"code": `
import asyncio
from mcp import runtime
def said(f):
    try:
        f()
    except Exception as e:
        print(type(e).__name__, e)
said(lambda: runtime.describe_server("every"))
said(lambda: runtime.list_tools_sync("every"))
said(lambda: runtime.query_tool_docs_sync("every"))
said(lambda: asyncio.run(runtime.query_tool_docs("every")))
said(lambda: asyncio.run(runtime.call_tool("every", "echo", {})))
`})
	why := `its config entry in ` + filepath.Join(project, ".mcp.json") + ` was not loaded: undefined variable(s) CODEEXEC_E2E_NO_TOKEN; set them in the environment or remove the references`
	lines := strings.Split(strings.TrimSpace(o.Text), "\n")
	if o.IsError || len(lines) != 5 {
		t.Fatalf("want five errors, got:\n%s", o.Text)
	}
	for _, l := range lines {
		if !strings.Contains(l, "'every'") || !strings.Contains(l, why) || strings.Contains(l, "servers=") {
			t.Errorf("the code was told:\n%s\nwant it to say, without advising servers=[...]:\n%s", l, why)
		}
	}
}

// TestE2EDropInSelfUnderAnotherName: an entry that starts this very
// binary under another name (a renamed copy found on PATH, its absolute
// path, a symlink to it) is not loaded, as one naming codeexec is not: it
// would start codeexec inside itself.
func TestE2EDropInSelfUnderAnotherName(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	ce := filepath.Join(bin, "ce")
	body, err := os.ReadFile(harness.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ce, body, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(bin, "bridge")
	if err := os.Symlink(ce, link); err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	writeFile(t, project, ".mcp.json", `{"mcpServers": {
  "bare": {"command": "ce", "args": ["serve"]},
  "abs": {"command": `+jsonString(t, ce)+`, "args": ["serve"]},
  "link": {"command": `+jsonString(t, link)+`, "args": ["serve"]},
  "other": {"command": "node", "args": [`+jsonString(t, filepath.Join(harness.Root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"))+`]}
}}`)
	c, _ := harness.StartBinaryIn(t, ce, project, map[string]string{"PATH": bin + string(os.PathListSeparator) + os.Getenv("PATH")})
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"bare", "abs", "link"}, "code": `print(1)`})
	mcp := filepath.Join(project, ".mcp.json")
	want := `3 unknown MCP servers: "bare", "abs", "link"`
	for _, n := range []string{"bare", "abs", "link"} {
		want += `; "` + n + `" in ` + mcp + ` was not loaded: points at this bridge itself (set MCP_BRIDGE_ALLOW_SELF_SERVER=1 to allow)`
	}
	want += `; configured servers: "other"`
	if !o.IsError || !strings.Contains(o.Text, want) {
		t.Errorf("a call naming entries that start this binary again:\n%s\nwant it to say:\n%s", o.Text, want)
	}
}
