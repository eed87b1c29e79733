package approvals

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

func TestFromResult(t *testing.T) {
	t.Parallel()
	for action, want := range map[mcp.ElicitationResponseAction]sandboxv1.ApprovalDecision{
		"accept":  sandboxv1.ApprovalDecision_APPROVAL_DECISION_ACCEPT,
		"decline": sandboxv1.ApprovalDecision_APPROVAL_DECISION_DECLINE,
		"cancel":  sandboxv1.ApprovalDecision_APPROVAL_DECISION_CANCEL,
		// An answer that is not one of the three is never consent.
		"yes": sandboxv1.ApprovalDecision_APPROVAL_DECISION_UNAVAILABLE,
		"":    sandboxv1.ApprovalDecision_APPROVAL_DECISION_UNAVAILABLE,
	} {
		res := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: action}}
		if got := FromResult(res); got.Decision != want {
			t.Errorf("action %q: %v, want %v", action, got.Decision, want)
		}
	}
	if got := FromResult(nil); got.Decision != sandboxv1.ApprovalDecision_APPROVAL_DECISION_UNAVAILABLE {
		t.Errorf("no result: %v", got)
	}
}

func TestCanElicit(t *testing.T) {
	t.Parallel()
	if CanElicit(context.Background()) {
		t.Error("a request with no session and no protocol info can elicit")
	}
	for name, tc := range map[string]struct {
		caps *mcp.ClientCapabilities
		want bool
	}{
		"none":         {&mcp.ClientCapabilities{}, false},
		"sampling":     {&mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}, false},
		"elicitation":  {&mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}}, true},
		"form":         {&mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}}}, true},
		"url only":     {&mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{URL: &struct{}{}}}, false},
		"no caps sent": {nil, false},
	} {
		ctx := server.WithRequestProtocolInfo(context.Background(), &server.RequestProtocolInfo{Modern: true, ClientCapabilities: tc.caps})
		if got := CanElicit(ctx); got != tc.want {
			t.Errorf("2026-07-28, %s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestMessage(t *testing.T) {
	t.Parallel()
	q := Question{Server: "github", Tool: "delete_repo", Reason: "--approve github.delete_*", Arguments: `{"repo":"x"}`}
	m := q.Message()
	for _, w := range []string{"Server: github", "Tool: delete_repo", `Arguments: {"repo":"x"}`, "--approve github.delete_*"} {
		if !strings.Contains(m, w) {
			t.Errorf("message %q lacks %q", m, w)
		}
	}
	if err := q.Params().Validate(); err != nil {
		t.Errorf("the elicitation's params are not valid: %v", err)
	}
	r := Refusal(context.Background(), q)
	if r.Decision != sandboxv1.ApprovalDecision_APPROVAL_DECISION_UNAVAILABLE || !strings.Contains(r.Reason, "this MCP client did not declare the elicitation capability") || !strings.Contains(r.Reason, q.Reason) {
		t.Errorf("refusal %+v", r)
	}
}
