// Package logkeys holds the structured-log keys shared by every service, so
// that one name means one thing across the suite's logs.
package logkeys

// Keys for log/slog attributes. They are dotted, lowercase and stable.
const (
	Service     = "service"
	RequestID   = "request.id"
	GRPCMethod  = "grpc.method"
	GRPCCode    = "grpc.code"
	Duration    = "duration"
	Address     = "address"
	SessionID   = "sandbox.session"
	SandboxID   = "sandbox.id"
	Tenant      = "tenant"
	Runtime     = "sandbox.runtime"
	MCPTool     = "mcp.tool.name"
	MCPSession  = "mcp.session"
	MCPServer   = "mcp.server"
	Error       = "error"
	ExecStatus  = "exec.status"
	ExecID      = "exec.id"
	MemoryKey   = "memory.key"
	StorePath   = "store.path"
	StateDir    = "state.dir"
	ConfigPath  = "config.path"
	PID         = "pid"
	Target      = "target"
	MetricsAddr = "metrics.address"
)
