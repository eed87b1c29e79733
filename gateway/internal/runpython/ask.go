package runpython

import (
	"context"
	"sync"

	"github.com/mark3labs/mcp-go/server"

	"github.com/codeexec/codeexec/gateway/internal/approvals"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// asking is what one call does with its run's questions (tool calls that
// wait for a person's approval). A client of the session-based revisions
// is asked with elicitation/create, each question in a goroutine of its
// own, since the run's output must keep flowing meanwhile, and the answer
// goes back to the replica that holds the session. A client of
// 2026-07-28 that can elicit is asked the multi round-trip way: the call
// stops at the first question and returns it as an input_required result
// (input.go), while the run waits in its sandbox. A client that cannot
// elicit gets the refusal as the answer.
type asking struct {
	// pause: stop at a question (input_required) rather than elicit.
	pause bool
	// ask asks one question and delivers its answer.
	ask func(*sandboxv1.ApprovalRequest)
	// seen are the questions this call has handled: an attach may send a
	// question twice (from the run's buffer, and as one still waiting),
	// and a retry must not ask again what it has just answered.
	mu   sync.Mutex
	seen map[string]bool
	wg   sync.WaitGroup
}

// newAsking returns how the call of ctx handles its questions, and stop,
// which gives up the questions still being asked and waits for them.
func (t *Tool) newAsking(ctx context.Context, tenant, sessionID string, answered []string) (a *asking, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	a = &asking{seen: map[string]bool{}, pause: server.IsModernRequest(ctx) && approvals.CanElicit(ctx),
		ask: func(r *sandboxv1.ApprovalRequest) { t.answer(ctx, tenant, sessionID, r) }}
	for _, id := range answered {
		a.seen[id] = true
	}
	return a, func() { cancel(); a.wg.Wait() }
}

// question handles one question of the stream, and reports whether the
// call stops here to return it.
func (a *asking) question(r *sandboxv1.ApprovalRequest) (pause bool) {
	if a == nil {
		return false
	}
	a.mu.Lock()
	seen := a.seen[r.GetId()]
	a.seen[r.GetId()] = true
	a.mu.Unlock()
	if seen {
		return false
	}
	if a.pause {
		return true
	}
	a.wg.Go(func() { a.ask(r) })
	return false
}

// answer asks r of a client that cannot take an input_required result,
// and delivers the answer to the session's replica.
func (t *Tool) answer(ctx context.Context, tenant, sessionID string, r *sandboxv1.ApprovalRequest) {
	if dl := r.GetDeadline(); dl != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.AsTime())
		defer cancel()
	}
	ans, err := approvals.Elicit(ctx, approvals.FromRequest(r))
	if err != nil {
		// No answer before the run's time or the call ended: the question
		// waits, and the next call that attaches asks it again.
		return
	}
	_, err = t.opts.Sandbox.AnswerApproval(ctx, &sandboxv1.AnswerApprovalRequest{
		SessionId: sessionID, Tenant: tenant, ApprovalId: r.GetId(), Decision: ans.Decision, Reason: ans.Reason,
	})
	if err != nil {
		t.opts.Logger.WarnContext(ctx, "the answer to an approval did not reach the sandbox", logkeys.Error, err)
	}
}
