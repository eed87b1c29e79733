// Package gateway is the MCP server of codeexec. It offers one tool,
// run_python, and the capabilities resource, over stdio and streamable HTTP,
// and runs the code through the sandbox service (sandboxd).
//
// Each MCP session maps to a sandbox session; over HTTP every request
// passes a guard (Host, Origin, bearer tokens, tenants) and quotas before
// mcp-go sees it. How sessions are kept and rebuilt, the HTTP checks and
// the differences from upstream are in docs/GATEWAY.md.
//
// This package wires the pieces under internal/ together: runpython (the
// tool handler and the running of one call), capabilities (the resource),
// params and result (arguments in, tool results out, with toon), sessions
// (MCP session to sandbox session, and who owns each), route (which
// sandboxd replica holds a session), mcpfix (the gaps of mcp-go, closed at
// the transport), guard and auth (the HTTP checks, tokens and JWTs), quota
// and drain (admission), and metrics.
//
// The gateway logs through log/slog only and never writes to stdout, which
// carries the protocol on stdio.
package gateway
