package broker

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/internal/argview"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

// countCall counts one tool call of the exec against its limit.
func countCall(c *sandbox.Controls) error {
	n := c.CountToolCall()
	if c == nil || c.MaxToolCalls <= 0 || n <= int64(c.MaxToolCalls) {
		return nil
	}
	return channel.Errorf(channel.CodeLimitExceeded,
		"this run_python call has made its %d tool calls, the most one call may make (the limit of %d tool calls per run, set by the operator with --max-tool-calls); "+
			"this call and any later one in the same run_python call are refused: do the rest in another run_python call",
		c.MaxToolCalls, c.MaxToolCalls)
}

// approvalRequired returns the ApprovalRequired detail of discoveryd's
// refusal of an unapproved call, or nil for any other outcome.
func approvalRequired(err error) *discoveryv1.ApprovalRequired {
	if status.Code(err) != codes.FailedPrecondition {
		return nil
	}
	for _, d := range status.Convert(err).Details() {
		if a, ok := d.(*discoveryv1.ApprovalRequired); ok {
			return a
		}
	}
	return nil
}

// ask asks a person, through the exec's caller, to approve a call that
// discoveryd refused for want of approval, and returns nil when they did.
// Every other outcome is the error the code raises: declined, nobody to
// ask, or no answer before the exec's timeout.
func ask(ctx context.Context, c *sandbox.Controls, need *discoveryv1.ApprovalRequired, args json.RawMessage) error {
	server, tool := pyRepr(need.GetServer()), pyRepr(need.GetTool())
	if c == nil || c.Ask == nil {
		return channel.Errorf(channel.CodeApprovalUnavailable,
			"tool %s of server %s needs a person's approval (%s), and this call has nobody to ask; the operator can allow it by removing that rule",
			tool, server, need.GetReason())
	}
	ans, err := c.Ask(ctx, sandbox.Approval{Server: need.GetServer(), Tool: need.GetTool(), Reason: need.GetReason(), Arguments: argview.Render(args)})
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)):
		return channel.Errorf(channel.CodeDeadlineExceeded, "no answer came, before the run_python call's timeout, to the question whether to allow tool %s of server %s; the call was not made", tool, server)
	case err != nil:
		return err
	}
	switch ans.Decision {
	case sandbox.Accept:
		return nil
	case sandbox.Decline:
		return channel.Errorf(channel.CodeApprovalDeclined, "the user declined the call of tool %s of server %s; it was not made", tool, server)
	case sandbox.Cancel:
		return channel.Errorf(channel.CodeApprovalDeclined, "the user dismissed the question whether to allow tool %s of server %s; the call was not made", tool, server)
	default:
		return channel.Errorf(channel.CodeApprovalUnavailable, "tool %s of server %s needs a person's approval (%s), and nobody could be asked: %s", tool, server, need.GetReason(), ans.Reason)
	}
}
