package runpython

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/result"
	"github.com/codeexec/codeexec/gateway/internal/tasks"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// taskYield is how long a call of a client that takes tasks runs before
// it becomes a task: a quick call is answered as it is, and a longer one
// is polled with tasks/get, which costs the client nothing while it waits.
const taskYield = 2 * time.Second

// taskTTL is how long past its timeout a task's result is promised:
// sandboxd keeps it until the session runs other code or ends.
const taskTTL = time.Hour

// taskCancelled is the reason a run cancelled by tasks/cancel ends with,
// by which its task is "cancelled" rather than "completed".
const taskCancelled = "the task was cancelled (tasks/cancel)"

// taskModeKey marks the context of a call that may become a task.
type taskModeKey struct{}

// asTask reports whether the call of req may be answered with a task: a
// 2026-07-28 request that declares the tasks extension.
func asTask(req mcp.CallToolRequest, modern bool) bool {
	return modern && req.Params.Meta != nil && tasks.Declared(req.Params.Meta.AdditionalFields)
}

// taskResult is the tool result that stands for the task of out, a call
// that yielded; tasks.Handler sends the task in its place.
func taskResult(out result.Outcome, p params.RunPython) *mcp.CallToolResult {
	started := out.Result.GetStartTime().AsTime()
	st := tasks.State{Status: tasks.Working, Created: started, Updated: time.Now(), TTL: p.Timeout + taskTTL,
		Message: "run_python is running; poll tasks/get for its result"}
	res := mcp.NewToolResultText("run_python is running as task " + tasks.ID(out.Session, out.Result.GetRunId()))
	res.Meta = &mcp.Meta{AdditionalFields: tasks.Marker(out.Session, out.Result.GetRunId(), st)}
	return res
}

// TaskState says what the run behind a task is now (tasks.Runs): it looks
// at the run without taking its output from the calls that continue it.
func (t *Tool) TaskState(ctx context.Context, tenant, handle string, run uint64) (tasks.State, error) {
	stream, err := t.opts.Sandbox.Execute(ctx, &sandboxv1.ExecuteRequest{
		SessionId: handle, Tenant: tenant, Attach: true, Replay: true, RunId: run, YieldAfter: durationpb.New(0),
	})
	out := result.Outcome{OutputCapBytes: t.opts.OutputLimitBytes, Session: handle}
	if err == nil {
		out = t.gather(stream, out, nil, nil)
		err = out.Err
	}
	if status.Code(err) == codes.NotFound {
		return tasks.State{}, tasks.ErrUnknown
	}
	if err != nil {
		return tasks.State{}, err
	}
	r := out.Result
	st := tasks.State{Created: r.GetStartTime().AsTime(), Updated: time.Now(), TTL: r.GetTimeout().AsDuration() + taskTTL}
	switch {
	case r.GetStatus() == sandboxv1.ExecStatus_EXEC_STATUS_RUNNING:
		st.Status, st.Message = tasks.Working, "run_python is running"
	case r.GetStatus() == sandboxv1.ExecStatus_EXEC_STATUS_NO_RUN:
		return tasks.State{}, tasks.ErrUnknown
	case r.GetInterrupted() == taskCancelled:
		st.Status, st.Message = tasks.Cancelled, taskCancelled
	default:
		st.Status = tasks.Completed
		st.Result = result.ToolResult(result.FromOutcome(out), t.opts.Mode)
	}
	return st, nil
}

// CancelTask stops the run behind a task (tasks.Runs).
func (t *Tool) CancelTask(ctx context.Context, tenant, handle string, run uint64) error {
	_, err := t.opts.Sandbox.CancelExecution(ctx, &sandboxv1.CancelExecutionRequest{
		SessionId: handle, Tenant: tenant, RunId: run, Reason: taskCancelled,
	})
	return err
}
