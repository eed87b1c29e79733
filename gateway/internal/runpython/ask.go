package runpython

import (
	"context"
	"sync"

	"github.com/codeexec/codeexec/gateway/internal/approvals"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// asker answers the approval questions of one Execute stream: each is
// asked of the user in a goroutine of its own, since the stream's output
// must keep flowing meanwhile (other tasks of the code may run), and the
// answer goes back to the replica that holds the session.
type asker struct {
	t                 *Tool
	tenant, sessionID string
	wg                sync.WaitGroup
}

// ask returns the function that starts asking each question of the
// stream, within ctx.
func (a *asker) ask(ctx context.Context) func(*sandboxv1.ApprovalRequest) {
	return func(r *sandboxv1.ApprovalRequest) {
		a.wg.Go(func() { a.one(ctx, r) })
	}
}

// one asks r and answers it.
func (a *asker) one(ctx context.Context, r *sandboxv1.ApprovalRequest) {
	if dl := r.GetDeadline(); dl != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.AsTime())
		defer cancel()
	}
	ans, err := a.t.answer(ctx, approvals.FromRequest(r))
	if err != nil {
		// No answer before the run's time ended: the run says so.
		return
	}
	_, err = a.t.opts.Sandbox.AnswerApproval(ctx, &sandboxv1.AnswerApprovalRequest{
		SessionId: a.sessionID, Tenant: a.tenant, ApprovalId: r.GetId(), Decision: ans.Decision, Reason: ans.Reason,
	})
	if err != nil {
		a.t.opts.Logger.WarnContext(ctx, "the answer to an approval did not reach the sandbox", logkeys.Error, err)
	}
}

// answer asks the user of this request about q.
func (t *Tool) answer(ctx context.Context, q approvals.Question) (approvals.Answer, error) {
	return approvals.Elicit(ctx, q)
}
