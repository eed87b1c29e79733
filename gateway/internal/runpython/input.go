package runpython

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/gateway/internal/approvals"
	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/result"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// Under MCP 2026-07-28 a run's question travels as an input_required
// result: the call returns with the run's questions while the run waits in
// its sandbox, and the client's retry carries the answers and the
// requestState, which names the session, the run and the questions, so
// that the retry, through any gateway, delivers them (AnswerApproval) and
// follows the run on. The state is sealed for the caller's tenant
// (reqstate), and sandboxd checks each answer against the questions that
// wait in the session, whose ids are random: one that does not wait
// (answered, or another session's) is refused.

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

// seal is st as the requestState of tenant's call.
func (t *Tool) seal(tenant string, st runState) string {
	raw, _ := json.Marshal(st) // strings and a number always encode
	return t.opts.States.Seal(statePrefix, tenant, raw)
}

// open reads the requestState of tenant's retry, or refuses it.
func (t *Tool) open(tenant, state string) (runState, error) {
	var st runState
	raw, err := t.opts.States.Open(statePrefix, tenant, state)
	if err == nil && (json.Unmarshal(raw, &st) != nil || st.Session == "" || len(st.Questions) == 0) {
		err = errors.New("it does not name a run's questions")
	}
	if err != nil {
		return runState{}, fmt.Errorf("%w: requestState is not one that run_python gave this caller: %w; call run_python again without inputResponses and requestState", mcpfix.ErrInvalidParams, err)
	}
	return st, nil
}

// inputRequired is the result that asks the client qs, with state.
func inputRequired(state string, qs []*sandboxv1.ApprovalRequest) *mcp.CallToolResult {
	b := server.NewInputRequestBuilder(state)
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

// retryKey carries, into the call that follows a run on after delivering
// its answers, the run to attach to and the questions answered.
type retryKey struct{}

type retry struct {
	run      uint64
	answered []string
}

// answeredOf and attachRunOf read ctx's retry.
func answeredOf(ctx context.Context) []string {
	r, _ := ctx.Value(retryKey{}).(retry)
	return r.answered
}

func attachRunOf(ctx context.Context) uint64 {
	r, _ := ctx.Value(retryKey{}).(retry)
	return r.run
}

// isRetry reports whether req is a 2026-07-28 retry that carries answers.
func isRetry(ctx context.Context, req mcp.CallToolRequest) bool {
	rt := req.Params.MultiRoundTripParams
	return server.IsModernRequest(ctx) && (rt.RequestState != "" || len(rt.InputResponses) > 0)
}

// resume delivers the answers a retry carries to the session's replica,
// and returns the context and parameters with which the call follows the
// run on (an attach: the retry's code already runs). A state or an
// answer that does not answer a question waiting in the session is a
// protocol error (err); a failure to reach sandboxd is the call's
// (callErr), a tool result.
func (t *Tool) resume(ctx context.Context, tenant string, req mcp.CallToolRequest, p params.RunPython) (_ context.Context, _ params.RunPython, callErr, err error) {
	rt := req.Params.MultiRoundTripParams
	st, err := t.open(tenant, rt.RequestState)
	if err != nil {
		return ctx, p, nil, err
	}
	answers, _, err := answersOf(st, rt.InputResponses)
	if err != nil {
		return ctx, p, nil, err
	}
	var answered []string
	for _, id := range st.Questions {
		a, ok := answers[id]
		if !ok {
			continue // still waiting: the attach asks it again
		}
		_, aerr := t.opts.Sandbox.AnswerApproval(ctx, &sandboxv1.AnswerApprovalRequest{
			SessionId: st.Session, Tenant: tenant, ApprovalId: id, Decision: a.Decision, Reason: a.Reason,
		})
		switch {
		case status.Code(aerr) == codes.NotFound:
			return ctx, p, nil, fmt.Errorf("%w: inputResponses[%q] answers no question waiting in session %s: it was answered already, its run has ended, or the session is not this client's; call run_python again without inputResponses and requestState",
				mcpfix.ErrInvalidParams, id, st.Session)
		case aerr != nil:
			return ctx, p, aerr, nil
		}
		answered = append(answered, id)
	}
	p.Code, p.Cancel, p.Session = "", false, st.Session
	return context.WithValue(ctx, retryKey{}, retry{run: st.Run, answered: answered}), p, nil, nil
}

// questionsResult is the input_required result of tenant's call that
// stopped at its run's questions.
func (t *Tool) questionsResult(tenant string, out result.Outcome) *mcp.CallToolResult {
	st := runState{Session: out.Session, Run: out.Questions[0].GetRunId()}
	for _, q := range out.Questions {
		st.Questions = append(st.Questions, q.GetId())
	}
	return inputRequired(t.seal(tenant, st), out.Questions)
}
