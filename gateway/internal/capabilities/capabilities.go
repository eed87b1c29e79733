// Package capabilities is the gateway's one MCP resource: the manual of
// what sandboxed code can use, named as upstream names it.
package capabilities

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// URI is the resource's address, as upstream names it.
const URI = "resource://mcp-server-code-execution-mode/capabilities"

// The resource's name and title, as upstream's.
const (
	name  = "code-execution-capabilities"
	title = "Code Execution Sandbox Helpers"
)

// HelperSummary is the short digest of what sandboxed code can use. The
// sandbox's runtime.capability_summary() gives the full manual.
const HelperSummary = `Sandboxed code has these globals, in a session that persists between calls:
- ` + "`runtime`" + ` (also ` + "`import mcp.runtime as runtime`" + `): discover and call MCP servers.
  - ` + "`discovered_servers(detailed=False)`" + `: every configured server.
  - ` + "`list_servers_sync()`" + `, ` + "`list_tools_sync(server)`" + `, ` + "`describe_server(name)`" + `, ` + "`list_loaded_server_metadata()`" + `: servers loaded for this call.
  - ` + "`search_tool_docs_sync(query, limit=5, detail=\"summary\")`" + ` and ` + "`query_tool_docs_sync(server, tool=None, detail=\"summary\"|\"full\")`" + `: tool docs; ` + "`detail=\"full\"`" + ` adds the input schema. Search spans every configured server; each hit says ` + "`loaded`" + ` and the ` + "`loadWith`" + ` (` + "`servers=[\"name\"]`" + `) that loads it.
  - ` + "`await call_tool(server, tool, arguments)`" + `; async variants of the helpers above; ` + "`capability_summary()`" + ` returns the manual as text: ` + "`print(runtime.capability_summary())`" + ` shows it.
- ` + "`mcp_<alias>`" + ` for each server passed in ` + "`servers=[...]`" + `: ` + "`await mcp_<alias>.<tool>(**kwargs)`" + ` returns the CallToolResult as a dict; a failed call (also ` + "`isError`" + `) raises ` + "`runtime.ToolError`" + `, unless ` + "`raise_on_error=False`" + `. Arguments are checked against the tool's input schema first. A configured server not passed in ` + "`servers=[...]`" + ` raises on use, saying how to load it.
- Memory that outlives sessions: ` + "`save_memory(key, value, *, metadata=None)`" + `, ` + "`load_memory(key, *, default=None)`" + `, ` + "`update_memory(key, fn)`" + `, ` + "`delete_memory`" + `, ` + "`list_memories`" + `, ` + "`memory_exists`" + `, ` + "`get_memory_info`" + `.
- ` + "`save_tool(func)`" + ` keeps a function for later sessions, which call it by name or ` + "`import user_tools`" + `.`

// Text is the resource body.
var Text = fmt.Sprintf(`# Code Execution MCP Capabilities

%s

## Quick usage

- Pass `+"`servers=[\"name\", ...]`"+` to run_python to load MCP servers for that call; each one appears as an `+"`mcp_<alias>`"+` proxy (lowercase, non-alphanumerics become `+"`_`"+`). List them in every call: only listed servers get proxies.
- `+"`import mcp.runtime as runtime`"+` works too; the global `+"`runtime`"+` is the same module.
- Prefer the `+"`_sync`"+` helpers: all but `+"`search_tool_docs_sync`"+` read metadata already in the sandbox and need no round trip.
- A server's configuration may set `+"`cwd`"+`, the directory it runs in. Check `+"`runtime.describe_server(name)`"+` or `+"`runtime.list_loaded_server_metadata()`"+` for its `+"`cwd`"+` before passing relative paths.
- Variables, imports and functions persist between calls. A timeout stops the sandbox; the next call restores the session from its checkpoint (variables, imports, functions and classes; what could not be saved is named). Files in /workspace come back with it too.
- A call still running at the yield time returns `+"`status: running`"+` with its output so far; its code runs on. `+"`run_python(code=\"\")`"+` waits for it and returns the output since, then its end; `+"`cancel=true`"+` with it stops the run. `+"`runtime.progress(done, total=None, message=\"\")`"+` reports progress to the client.
- The sandbox has no network: MCP servers (`+"`servers=[...]`"+`) reach the outside.
- A result keeps the head and the tail of its output; the whole output is in the file in /workspace its marker names.
- The last expression's value is shown (a trailing `+"`;`"+` hides it); `+"`display(x)`"+` and open matplotlib figures come back as images; files written under /workspace/out come back as resources.

Resource: %s
`, HelperSummary, URI)

// Resource describes the resource for resources/list.
func Resource() mcp.Resource {
	return mcp.NewResource(URI, name,
		mcp.WithResourceTitle(title),
		mcp.WithResourceDescription("How to use the run_python sandbox: helpers, proxies, memory."),
		mcp.WithMIMEType("text/markdown"),
		mcp.WithResourceSize(int64(len(Text))),
	)
}

// Read serves the resource. mcp-go answers other URIs with a
// resource-not-found error before this handler is reached.
func Read(_ context.Context, _ mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	return []mcp.ResourceContents{mcp.TextResourceContents{
		URI:      URI,
		MIMEType: "text/markdown",
		Text:     Text,
	}}, nil
}
