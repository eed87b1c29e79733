// Package approvals asks the user, through the MCP client, whether a tool
// call that the operator marked for approval may run: elicitation/create
// under the session-based revisions, an input_required result under
// 2026-07-28 (input.go). A client that cannot show the question gets the
// call refused, with why and how to allow it.
package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// Question is one tool call to approve: what the user is shown.
type Question struct {
	Server, Tool, Reason string
	// Arguments are the call's arguments as JSON, already cut short and
	// with secrets masked (sandboxd's broker does it for the sandbox's
	// calls, Display for the passthrough surface's).
	Arguments string
}

// FromRequest is the question of a sandbox's ApprovalRequest.
func FromRequest(r *sandboxv1.ApprovalRequest) Question {
	return Question{Server: r.GetServer(), Tool: r.GetTool(), Reason: r.GetReason(), Arguments: r.GetArgumentsJson()}
}

// Message is the question's text as the client shows it.
func (q Question) Message() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Allow this tool call?\n\nServer: %s\nTool: %s\nArguments: %s\n\nAsked because of the operator's rule: %s\n", q.Server, q.Tool, q.Arguments, q.Reason)
	b.WriteString("Accept runs the call; decline or cancel stops it, and the code gets an error.")
	return b.String()
}

// Schema is the form's requested schema: no fields, since the question is
// the answer's action alone (accept runs the call).
var Schema = map[string]any{"type": "object", "properties": map[string]any{}}

// Params are the elicitation's parameters.
func (q Question) Params() mcp.ElicitationParams {
	return mcp.ElicitationParams{Mode: mcp.ElicitationModeForm, Message: q.Message(), RequestedSchema: Schema}
}

// Answer is the user's answer, or why there was none.
type Answer struct {
	Decision sandboxv1.ApprovalDecision
	// Reason says, for UNAVAILABLE, why nobody could be asked and how to
	// allow the call.
	Reason string
}

// FromResult maps an elicitation's result onto an answer. A result that
// does not answer the question (an unknown action) is refused as
// unavailable, never taken as consent.
func FromResult(res *mcp.ElicitationResult) Answer {
	if res == nil {
		return Answer{Decision: sandboxv1.ApprovalDecision_APPROVAL_DECISION_UNAVAILABLE, Reason: "the client returned no answer"}
	}
	switch res.Action {
	case mcp.ElicitationResponseActionAccept:
		return Answer{Decision: sandboxv1.ApprovalDecision_APPROVAL_DECISION_ACCEPT}
	case mcp.ElicitationResponseActionDecline:
		return Answer{Decision: sandboxv1.ApprovalDecision_APPROVAL_DECISION_DECLINE}
	case mcp.ElicitationResponseActionCancel:
		return Answer{Decision: sandboxv1.ApprovalDecision_APPROVAL_DECISION_CANCEL}
	}
	return Answer{Decision: sandboxv1.ApprovalDecision_APPROVAL_DECISION_UNAVAILABLE,
		Reason: fmt.Sprintf("the client's answer has the action %q; accepted: accept, decline or cancel", res.Action)}
}

// CanElicit reports whether the client of this request declared form
// elicitation: in the request's _meta under 2026-07-28, at initialize
// before.
func CanElicit(ctx context.Context) bool {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.ClientCapabilities != nil && formOK(info.ClientCapabilities.Elicitation)
	}
	s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	if !ok {
		return false
	}
	return formOK(s.GetClientCapabilities().Elicitation)
}

// formOK: a capability with neither mode named is form mode, as the
// revisions before modes were named declared it.
func formOK(c *mcp.ElicitationCapability) bool {
	return c != nil && (c.Form != nil || c.URL == nil)
}

// clientName names the client for messages.
func clientName(ctx context.Context) string {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientInfo != nil && info.ClientInfo.Name != "" {
		return info.ClientInfo.Name
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok && s.GetClientInfo().Name != "" {
		return s.GetClientInfo().Name
	}
	return "this MCP client"
}

// Refusal is the answer when the client cannot be asked: why, and how to
// allow the call.
func Refusal(ctx context.Context, q Question) Answer {
	return Answer{Decision: sandboxv1.ApprovalDecision_APPROVAL_DECISION_UNAVAILABLE, Reason: fmt.Sprintf(
		"%s did not declare the elicitation capability, so codeexec cannot ask the user. "+
			"To allow it, use a client that supports elicitation (form mode), or have the operator remove the rule that marks the tool (%s)",
		clientName(ctx), q.Reason)}
}

// Elicit asks the user of a session-based client with elicitation/create
// and waits for the answer until ctx ends. A client without the
// capability gets Refusal, without being sent anything.
func Elicit(ctx context.Context, q Question) (Answer, error) {
	if !CanElicit(ctx) {
		return Refusal(ctx, q), nil
	}
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return Answer{}, errors.New("approvals: no MCP server in the request's context")
	}
	res, err := srv.RequestElicitation(ctx, mcp.ElicitationRequest{Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)}, Params: q.Params()})
	if err != nil {
		if ctx.Err() != nil {
			return Answer{}, ctx.Err()
		}
		return Answer{Decision: sandboxv1.ApprovalDecision_APPROVAL_DECISION_UNAVAILABLE,
			Reason: "the question could not be asked: " + err.Error()}, nil
	}
	return FromResult(res), nil
}

// Required returns the ApprovalRequired detail of discoveryd's refusal of
// an unapproved call, or nil for any other outcome.
func Required(err error) *discoveryv1.ApprovalRequired {
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
