// Package gateway is the MCP server of codeexec. It offers one tool,
// run_python, and the capabilities resource, over stdio and streamable HTTP,
// and runs the code through the sandbox service (sandboxd).
//
// # Sessions
//
// Each MCP session gets its own sandbox session, created on its first
// run_python call (labelled mcp.session=<MCP session ID>) and destroyed when
// the MCP session ends: end of input on stdio, DELETE or mcp-go's session
// cleanup over HTTP, Close for those over stdio (an HTTP client continues
// its session through the next gateway). The table of MCP session to
// sandbox session is the gateway's only state, and it rebuilds itself:
//
//   - sandboxd answers NotFound (it restarted, or reaped the session): the
//     gateway creates a new sandbox session, runs the call again and says
//     "session lost; started a new session — earlier state is gone";
//   - a call comes from an MCP session over HTTP that began before this
//     gateway process did, or through another gateway: it continues the
//     sandbox session whose handle is derived from its tenant and ID
//     (sessions.HandleFor), restored from its checkpoint when its sandbox
//     is gone; only when there is none does it get a new one and the same
//     notice;
//   - the session's sandbox generation changed although no call reported lost
//     state: the result says that the sandbox was restarted.
//
// Such notices open stderr, in brackets.
//
// With several sandboxd replicas (DialSandbox), each new session goes to
// the least loaded healthy replica and every later call to the replica
// that holds it; a replica that goes away answers its sessions' next calls
// with NotFound, so the rule above starts them again elsewhere.
//
// # HTTP: authentication, tenants, quotas, shutdown
//
// Over HTTP every request passes a guard (internal/guard) before mcp-go
// sees it:
//
//   - Host and Origin are checked against DNS rebinding: loopback names, the
//     resource URL's host and the configured lists are accepted, anything
//     else gets 403. With authentication on, any Host is accepted unless a
//     list is given (a rebinding page has no token).
//   - With a tokens file or a JWT issuer configured, a request without a
//     valid bearer token gets 401 with WWW-Authenticate pointing at the
//     RFC 9728 metadata (ProtectedResourceHandler). The token names the
//     tenant; the message never names one.
//   - An MCP session belongs to the tenant that initialised it; another
//     tenant presenting its ID gets 404, as for an unknown session. The
//     session table is keyed by tenant and MCP session ID too, so that even
//     IDs whose owner this process never saw lead each tenant only to its
//     own sandbox sessions.
//
// stdio has no guard: whoever starts the process is Config.Tenant.
//
// Quotas (internal/quota) cap each tenant's sandbox sessions, running
// calls and calls per sliding minute; a refused call is a tool error naming
// the limit and when to retry. Drain (internal/drain) refuses new calls
// with a "shutting down" tool error and waits for running ones; Close then
// destroys the sandbox sessions.
//
// # Compatibility with upstream
//
// Names, validation messages and result shapes follow upstream's
// mcp-server-code-execution-mode (see shared/reference/upstream-behaviour.md
// §1). Deliberate differences:
//
//   - User output is kept verbatim: blank lines and lines reading "()" are
//     not dropped; only the newline that ends the output is.
//   - A timeout must be a whole number: JSON numbers such as 5.0 are
//     accepted, 5.5 and booleans are not (upstream's Python accepted
//     True). An explicit null means "not given".
//   - Exceptions are status error with the exit code (upstream reported
//     them as success), and every error result has isError set.
//   - In compact text, the one-line error is shown unless stderr already
//     contains it, so that a failure is explained even when there was
//     output (upstream hid it whenever the status was error and there was
//     any output).
//   - Output cut by sandboxd's cap ends with an "[output truncated: …]"
//     line.
//   - The tool definition is about 940 JSON characters instead of ~1,350.
//
// A call to an unknown tool is answered, as upstream does, with a tool
// result "Unknown tool: <name>" rather than a protocol error.
//
// # Layout
//
// This package wires the pieces under internal/ together: runpython (the
// tool handler and the running of one call), capabilities (the resource),
// params and result (arguments in, tool results out, with toon), sessions
// (MCP session to sandbox session, and who owns each), route (which
// sandboxd replica holds a session: the Balancer over several, and the
// Router that follows the session store's answer), mcpfix (the gaps of
// mcp-go, closed at the transport), guard and auth (the HTTP checks,
// tokens and JWTs), quota and drain (admission), and metrics.
//
// # Logging
//
// The gateway logs through log/slog only and never writes to stdout, which
// carries the protocol on stdio.
package gateway
