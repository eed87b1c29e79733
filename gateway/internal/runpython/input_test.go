package runpython

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	"github.com/codeexec/codeexec/gateway/internal/reqstate"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// TestRunState: a requestState opens for the tenant it was given to, and
// only for it: altered, made up, of another tool's or of another
// gateway's key, it is refused as invalid params.
func TestRunState(t *testing.T) {
	t.Parallel()
	states, err := reqstate.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	tool := New(Options{States: states})
	st := runState{Session: "0123456789abcdef0123456789abcdef", Run: 3, Questions: []string{"q1", "q2"}}
	state := tool.seal("alice", st)
	got, err := tool.open("alice", state)
	if err != nil || got.Session != st.Session || got.Run != 3 || len(got.Questions) != 2 {
		t.Fatalf("open(seal(%+v)) = %+v, %v", st, got, err)
	}
	other, _ := reqstate.New(nil)
	forged, _ := json.Marshal(runState{Session: "ffffffffffffffffffffffffffffffff", Questions: []string{"q1"}})
	bad := map[string]string{
		"empty":               "",
		"altered":             state + "-TAMPERED",
		"unsigned (old form)": "rp1." + base64.RawURLEncoding.EncodeToString(forged),
		"made up":             "rp1." + base64.RawURLEncoding.EncodeToString(forged) + ".AAAA",
		"another tool's":      states.Seal("ct1.", "alice", forged),
		"another key's":       other.Seal(statePrefix, "alice", forged),
		"no questions":        states.Seal(statePrefix, "alice", []byte(`{"s":"x"}`)),
	}
	for name, s := range bad {
		if _, err := tool.open("alice", s); !errors.Is(err, mcpfix.ErrInvalidParams) {
			t.Errorf("%s: open = %v, want an invalid-params error", name, err)
		}
	}
	if _, err := tool.open("bob", state); !errors.Is(err, mcpfix.ErrInvalidParams) || !strings.Contains(err.Error(), "not one that run_python gave this caller") {
		t.Errorf("another tenant's state: open = %v, want it refused", err)
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
	res := inputRequired("state", []*sandboxv1.ApprovalRequest{{Id: "a", Server: "s", Tool: "t", Reason: "r", ArgumentsJson: "{}"}})
	if res.ResultType != mcp.ResultTypeInputRequired || res.RequestState != "state" || res.InputRequests["a"].Method != mcp.MethodElicitationCreate {
		t.Errorf("inputRequired = %+v", res)
	}
}
