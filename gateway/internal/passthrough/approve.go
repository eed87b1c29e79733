package passthrough

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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

// stateTTL is how long a question may wait for its answer: a state is
// not an approval to keep and replay later.
const stateTTL = time.Hour

// callState is what call_tool's requestState carries, sealed for the
// caller's tenant (reqstate): the hash of the call it asks about, and
// when it lapses. A call is stateless (no sandbox, no record), so the
// retry is checked against itself: an answer to another call's question
// (other names or arguments), another tenant's, or a state made up or
// altered on the way, does not match.
type callState struct {
	Hash    string `json:"h"`
	Expires int64  `json:"e"`
}

// stateHash names a call: the names as the call gave them and the
// arguments.
func stateHash(server, tool string, args []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(server), []byte(tool), args} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// seal is the requestState of a question about the call hash.
func (p *Tools) seal(tenant, hash string) string {
	body, _ := json.Marshal(callState{Hash: hash, Expires: time.Now().Add(stateTTL).Unix()}) // a string and a number
	return p.opts.States.Seal(statePrefix, tenant, body)
}

// checkState reports whether state is one this gateway gave tenant for
// the call hash, and has not lapsed.
func (p *Tools) checkState(tenant, hash, state string) error {
	var st callState
	body, err := p.opts.States.Open(statePrefix, tenant, state)
	if err == nil && (json.Unmarshal(body, &st) != nil || st.Hash != hash) {
		err = errors.New("it answers a call to another tool or with other arguments")
	}
	if err == nil && time.Now().Unix() > st.Expires {
		err = fmt.Errorf("it lapsed %s after the question", stateTTL)
	}
	if err != nil {
		return fmt.Errorf("%w: requestState does not belong to this call_tool call: %w; call again without inputResponses and requestState to be asked anew", ErrInvalidInput, err)
	}
	return nil
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
func (p *Tools) approve(ctx context.Context, req mcp.CallToolRequest, q approvals.Question, tenant, hash string) (*mcp.CallToolResult, error) {
	ask := server.NewInputRequestBuilder(p.seal(tenant, hash)).Elicit(inputKey, q.Params()).ToolResult()
	rt := req.Params.MultiRoundTripParams
	if rt.RequestState == "" && len(rt.InputResponses) == 0 {
		if !approvals.CanElicit(ctx) {
			return failure("%s", unavailable(q, approvals.Refusal(ctx, q).Reason)), nil
		}
		return ask, nil
	}
	if err := p.checkState(tenant, hash, rt.RequestState); err != nil {
		return nil, err
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
