// Package config finds the user's MCP server definitions in every config
// file that upstream ("MCP Server Code Execution Mode") reads, in upstream's
// order and precedence, and parses them into Server values.
//
// Beyond upstream it reads HTTP and SSE entries, skips disabled entries,
// understands VS Code's layouts, expands ${VAR} references and tolerates
// JSON with comments. Problems are returned as data (Warnings) so that one
// broken file never hides the servers of the others.
package config

import (
	"fmt"
	"sort"
)

// Transport is how a server is reached.
type Transport string

// The transports a config entry can ask for.
const (
	// TransportStdio runs a command and speaks MCP over its stdin/stdout.
	TransportStdio Transport = "stdio"
	// TransportHTTP speaks MCP's streamable HTTP transport to a URL.
	TransportHTTP Transport = "http"
	// TransportSSE speaks the older HTTP+SSE transport to a URL.
	TransportSSE Transport = "sse"
)

// Server is one MCP server definition.
type Server struct {
	// Name is the key of the entry, e.g. "filesystem".
	Name string
	// Description is the entry's description, else the file's top-level
	// description, else empty.
	Description string
	// Transport says which of the fields below apply.
	Transport Transport
	// Command, Args, Env and Cwd describe a stdio server. Env holds only the
	// configured variables; the caller merges them onto a base environment.
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string
	// URL and Headers describe an HTTP or SSE server.
	URL     string
	Headers map[string]string
	// Source is the file that defined the server.
	Source string
	// Tenants, when set, limits the server to these tenants; others do
	// not see it. Empty shares it with every tenant.
	Tenants []string
	// Approve, from the entry's "approve" key, marks the server's tools
	// whose calls a person must approve: tool globs, or "destructive"
	// (see package approval). true is "*", every tool.
	Approve []string
}

// Warning reports a config file or entry that could not be used. Server is
// empty when the whole file is affected.
type Warning struct {
	Path   string
	Server string
	Reason string
}

// String renders the warning for logs and for the ListServers response.
func (w Warning) String() string {
	if w.Server == "" {
		return fmt.Sprintf("%s: %s", w.Path, w.Reason)
	}
	return fmt.Sprintf("%s: server %q: %s", w.Path, w.Server, w.Reason)
}

// Options are the inputs of Load. Everything that upstream reads from the
// process environment is passed in, so that the package never reads it.
type Options struct {
	// Home is the user's home directory. Empty skips the home sources.
	Home string
	// Cwd is the directory that relative sources (./mcp-servers,
	// ./.vscode/mcp.json) are resolved against. Empty skips them.
	Cwd string
	// GOOS selects the OS-specific sources ("darwin", "linux", …).
	GOOS string
	// ServersConfig is the MCP_SERVERS_CONFIG path, JSON or TOML. It is
	// loaded last and only adds names that no other source defined.
	ServersConfig string
	// AllowSelf disables the self-reference guard
	// (MCP_BRIDGE_ALLOW_SELF_SERVER).
	AllowSelf bool
	// Self is the path of the running executable (os.Executable): an
	// entry whose command, found on PATH as exec finds it, or an argument
	// that is a path, is that same file under another name (a renamed
	// copy, a symlink) is this bridge too. Empty checks names only.
	Self string
	// Lookup resolves ${VAR} and ${env:VAR}. Nil resolves nothing.
	Lookup func(name string) (string, bool)
}

// Result is what Load found.
type Result struct {
	// Servers are the definitions that won, sorted by name.
	Servers []Server
	// Warnings report broken files and unusable entries.
	Warnings []Warning
	// Skipped reports entries left out on purpose: disabled entries
	// ("disabled": true, "enabled": false, named in the
	// disabledMcpServers of ~/.claude.json's project, or servers of the
	// project's .mcp.json rejected in Claude Code's
	// disabledMcpjsonServers), entries that point
	// at this bridge itself, and names that an earlier source already
	// defined.
	Skipped []Warning
}

// Load reads every source in order. The first definition of a name wins.
// Missing files and directories are not an error.
func Load(opts Options) Result {
	var res Result
	seen := map[string]string{}
	add := func(path string, servers []Server) {
		for _, s := range servers {
			if first, dup := seen[s.Name]; dup {
				res.Skipped = append(res.Skipped, Warning{Path: path, Server: s.Name, Reason: "already defined in " + first})
				continue
			}
			seen[s.Name] = s.Source
			res.Servers = append(res.Servers, s)
		}
	}
	for _, src := range Sources(opts) {
		for _, path := range src.files(&res) {
			servers := loadFile(path, src.ServersOnly, opts, &res)
			if src.Name == claudeCodeProject {
				servers = withoutRejected(servers, mcpjsonRejected(opts, &res), path, &res)
			}
			add(path, servers)
		}
	}
	sort.Slice(res.Servers, func(i, j int) bool { return res.Servers[i].Name < res.Servers[j].Name })
	return res
}
