package passthrough

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/codeexec/codeexec/gateway/internal/approvals"
	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// inputKey names the one input request of an approval.
const inputKey = "approve"

// statePrefix starts call_tool's requestState; its version, should the
// form change.
const statePrefix = "ct1."

// stateHash binds a question to its call: the tenant, the names as the
// call gave them and the arguments. A call is stateless (no sandbox, no
// record), so the state needs no secret: it is checked against the retry
// itself, and an answer to another call's question, or a state altered
// on the way, does not match.
func stateHash(tenant, server, tool string, args []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(tenant), []byte(server), []byte(tool), args} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ErrInvalidInput marks a retry whose requestState or inputResponses do
// not answer the question asked, which is refused as an Invalid params
// error, as MCP 2026-07-28 requires (see mcpfix.ErrInvalidParams).
var ErrInvalidInput = mcpfix.ErrInvalidParams

// approve asks the user whether q's call may run, the multi round-trip
// way: the first call gets an input_required result with the question,
// and the client's retry carries the answer (for a client of the
// session-based revisions, mcp-go asks with elicitation/create and makes
// the retry itself). It returns nil once the user accepted, else the
// result to send instead of the call: the question, a refusal (the
// client cannot be asked), or the user's no.
func (p *Tools) approve(ctx context.Context, req mcp.CallToolRequest, q approvals.Question, hash string) (*mcp.CallToolResult, error) {
	state := statePrefix + hash
	ask := server.NewInputRequestBuilder(state).Elicit(inputKey, q.Params()).ToolResult()
	rt := req.Params.MultiRoundTripParams
	if rt.RequestState == "" && len(rt.InputResponses) == 0 {
		if !approvals.CanElicit(ctx) {
			return failure("%s", unavailable(q, approvals.Refusal(ctx, q).Reason)), nil
		}
		return ask, nil
	}
	if rt.RequestState != state {
		return nil, fmt.Errorf("%w: requestState does not belong to this call_tool call (it was altered, or answers a call to another tool or with other arguments); call again without inputResponses and requestState to be asked anew", ErrInvalidInput)
	}
	resp, ok := rt.InputResponses[inputKey]
	if !ok {
		// The answer is missing: ask again, as SEP-2322 recommends.
		return ask, nil
	}
	err := resp.DecodeFor(mcp.MethodElicitationCreate)
	if err == nil && resp.Elicitation == nil {
		err = errors.New("it is empty")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: inputResponses[%q] is not an elicitation result ({\"action\": \"accept\"|\"decline\"|\"cancel\"}): %w", ErrInvalidInput, inputKey, err)
	}
	switch ans := approvals.FromResult(resp.Elicitation); ans.Decision {
	case sandboxv1.ApprovalDecision_APPROVAL_DECISION_ACCEPT:
		return nil, nil
	case sandboxv1.ApprovalDecision_APPROVAL_DECISION_DECLINE:
		return failure("the user declined the call of tool %q of server %q; it was not made", q.Tool, q.Server), nil
	case sandboxv1.ApprovalDecision_APPROVAL_DECISION_CANCEL:
		return failure("the user dismissed the question whether to allow tool %q of server %q; the call was not made", q.Tool, q.Server), nil
	default:
		return nil, fmt.Errorf("%w: inputResponses[%q]: %s", ErrInvalidInput, inputKey, ans.Reason)
	}
}

// unavailable is the refusal of a call nobody could be asked about.
func unavailable(q approvals.Question, why string) string {
	return fmt.Sprintf("tool %q of server %q needs a person's approval (%s), and nobody could be asked: %s", q.Tool, q.Server, q.Reason, why)
}
