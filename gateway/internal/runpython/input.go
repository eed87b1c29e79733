package runpython

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/codeexec/codeexec/gateway/internal/approvals"
	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// Under MCP 2026-07-28 a run's question travels as an input_required
// result: the call returns with the run's questions while the run waits in
// its sandbox, and the client's retry carries the answers and the
// requestState, which names the session, the run and the questions, so
// that the retry, through any gateway, delivers them (AnswerApproval) and
// follows the run on. sandboxd checks each answer against the questions
// that wait in the session: one that does not wait (altered, answered, or
// another session's) is refused.

// statePrefix starts run_python's requestState; its version, should the
// form change.
const statePrefix = "rp1."

// runState is what a requestState carries.
type runState struct {
	// Session is the session's handle; Run numbers the run in it.
	Session string `json:"s"`
	Run     uint64 `json:"r,omitempty"`
	// Questions are the ids of the questions asked, as sandboxd named
	// them; each is also its input request's key.
	Questions []string `json:"q"`
}

func (s runState) encode() string {
	raw, _ := json.Marshal(s) // strings and a number always encode
	return statePrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// errBadState refuses a requestState this gateway did not write.
var errBadState = fmt.Errorf("%w: requestState is not one that run_python gave (it was altered, or belongs to another tool); call run_python again without inputResponses and requestState", mcpfix.ErrInvalidParams)

func decodeState(s string) (runState, error) {
	var st runState
	body, ok := strings.CutPrefix(s, statePrefix)
	if !ok {
		return st, errBadState
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(raw, &st) != nil || st.Session == "" || len(st.Questions) == 0 {
		return runState{}, errBadState
	}
	return st, nil
}

// inputRequired is the result that asks the client qs, for the run st
// names.
func inputRequired(st runState, qs []*sandboxv1.ApprovalRequest) *mcp.CallToolResult {
	b := server.NewInputRequestBuilder(st.encode())
	for _, q := range qs {
		b.Elicit(q.GetId(), approvals.FromRequest(q).Params())
	}
	return b.ToolResult()
}

// answersOf reads the answers a retry carries to st's questions. A
// question without an answer is missing (the caller asks it again); an
// answer that does not answer an elicitation is refused; answers to keys
// that were not asked are ignored, as SEP-2322 asks.
func answersOf(st runState, responses mcp.InputResponses) (answers map[string]approvals.Answer, missing []string, err error) {
	answers = map[string]approvals.Answer{}
	for _, id := range st.Questions {
		r, ok := responses[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		derr := r.DecodeFor(mcp.MethodElicitationCreate)
		if derr == nil && r.Elicitation == nil {
			derr = errors.New("it is empty")
		}
		if derr != nil {
			return nil, nil, fmt.Errorf("%w: inputResponses[%q] is not an elicitation result ({\"action\": \"accept\"|\"decline\"|\"cancel\"}): %w", mcpfix.ErrInvalidParams, id, derr)
		}
		a := approvals.FromResult(r.Elicitation)
		if a.Decision == sandboxv1.ApprovalDecision_APPROVAL_DECISION_UNAVAILABLE {
			return nil, nil, fmt.Errorf("%w: inputResponses[%q]: %s", mcpfix.ErrInvalidParams, id, a.Reason)
		}
		answers[id] = a
	}
	return answers, missing, nil
}
