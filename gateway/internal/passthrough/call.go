package passthrough

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/gateway/internal/approvals"
	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/gateway/internal/quota"
	"github.com/codeexec/codeexec/internal/argview"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// Call serves call_tool: the upstream tool's own result, as it came. A
// tool that a person must approve is asked about first (approve.go).
func (p *Tools) Call(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r := unknownTool(req); r != nil {
		return r, nil
	}
	in, bad := args(req, CallName, "server", "tool", "arguments")
	if bad != nil {
		return bad, nil
	}
	server, bad := text(in, CallName, "server", "a server's name, as search_tools gives it")
	if bad != nil {
		return bad, nil
	}
	tool, bad := text(in, CallName, "tool", "a tool's name, as search_tools gives it")
	if bad != nil {
		return bad, nil
	}
	arguments := map[string]any{}
	if v, ok := in["arguments"]; ok && v != nil {
		if arguments, ok = v.(map[string]any); !ok {
			return failure("arguments must be an object of the tool's argument names to values (see describe_tool), not %s", kindOf(v)), nil
		}
	}
	raw, err := json.Marshal(arguments)
	if err != nil {
		return nil, err
	}
	tenant := auth.Tenant(ctx, p.opts.Tenant)
	end, refusal := p.admit(tenant)
	if refusal != nil {
		return refusal, nil
	}
	defer end()
	creq := &discoveryv1.CallToolRequest{Server: server, Tool: tool, ArgumentsJson: string(raw), Tenant: tenant}
	resp, err := p.opts.Discovery.CallTool(ctx, creq)
	if need := approvals.Required(err); need != nil {
		q := approvals.Question{Server: need.GetServer(), Tool: need.GetTool(), Reason: need.GetReason(), Arguments: argview.Render(raw)}
		answer, err := p.approve(ctx, req, q, tenant, stateHash(server, tool, raw))
		if answer != nil || err != nil {
			return answer, err
		}
		creq.Approved = true
		resp, err = p.opts.Discovery.CallTool(ctx, creq)
		if err != nil {
			return rpcFailure(err), nil
		}
	} else if err != nil {
		return rpcFailure(err), nil
	}
	out := json.RawMessage(resp.GetResultJson())
	res, err := mcp.ParseCallToolResult(&out)
	if err != nil {
		return failure("server %q answered %s with a result that is not a CallToolResult: %v", server, tool, err), nil
	}
	return res, nil
}

// admit lets a call run unless the gateway is shutting down or the tenant
// is over a quota; end is called once it is done.
func (p *Tools) admit(tenant string) (end func(), refusal *mcp.CallToolResult) {
	done, err := p.opts.Calls.Begin()
	if err != nil {
		return nil, failure("The server is shutting down; retry on a new connection in a moment.")
	}
	release, err := p.opts.Quota.Acquire(tenant)
	if err != nil {
		done()
		if qe := (*quota.Error)(nil); errors.As(err, &qe) {
			return nil, failure("%s", qe.Error())
		}
		return nil, failure("%s", err.Error())
	}
	return func() { release(); done() }, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	}
	return "null"
}
