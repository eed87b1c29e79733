package runpython

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

func TestRunState(t *testing.T) {
	t.Parallel()
	st := runState{Session: "0123456789abcdef0123456789abcdef", Run: 3, Questions: []string{"q1", "q2"}}
	got, err := decodeState(st.encode())
	if err != nil || got.Session != st.Session || got.Run != 3 || len(got.Questions) != 2 {
		t.Fatalf("decodeState(encode(%+v)) = %+v, %v", st, got, err)
	}
	for _, bad := range []string{"", st.encode() + "-TAMPERED", "ct1.abc", "rp1.!!", "rp1." + "e30"} {
		if _, err := decodeState(bad); !errors.Is(err, mcpfix.ErrInvalidParams) {
			t.Errorf("decodeState(%q) = %v, want an invalid-params error", bad, err)
		}
	}
}

func TestAnswersOf(t *testing.T) {
	t.Parallel()
	st := runState{Session: "s", Questions: []string{"a", "b"}}
	var responses mcp.InputResponses
	if err := json.Unmarshal([]byte(`{"a":{"action":"accept","content":{}},"extra":{"action":"accept"}}`), &responses); err != nil {
		t.Fatal(err)
	}
	answers, missing, err := answersOf(st, responses)
	if err != nil || len(missing) != 1 || missing[0] != "b" || answers["a"].Decision != sandboxv1.ApprovalDecision_APPROVAL_DECISION_ACCEPT || len(answers) != 1 {
		t.Fatalf("answersOf = %v, %v, %v; want a accepted, b missing, extra ignored", answers, missing, err)
	}
	for _, bad := range []string{`{"a":42}`, `{"a":null}`, `{"a":{"action":"maybe"}}`} {
		var r mcp.InputResponses
		if err := json.Unmarshal([]byte(bad), &r); err != nil {
			t.Fatal(err)
		}
		if _, _, err := answersOf(st, r); !errors.Is(err, mcpfix.ErrInvalidParams) {
			t.Errorf("answersOf(%s) = %v, want an invalid-params error", bad, err)
		}
	}
	res := inputRequired(st, []*sandboxv1.ApprovalRequest{{Id: "a", Server: "s", Tool: "t", Reason: "r", ArgumentsJson: "{}"}})
	if res.ResultType != mcp.ResultTypeInputRequired || res.RequestState != st.encode() || res.InputRequests["a"].Method != mcp.MethodElicitationCreate {
		t.Errorf("inputRequired = %+v", res)
	}
}
