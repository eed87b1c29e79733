package tasks

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// runs is a hand-written Runs: one known run, "h" 1, in state st.
type runs struct {
	st        State
	cancelled bool
}

func (r *runs) TaskState(_ context.Context, _, handle string, run uint64) (State, error) {
	if handle != "h" || run != 1 {
		return State{}, ErrUnknown
	}
	return r.st, nil
}

func (r *runs) CancelTask(context.Context, string, string, uint64) error {
	r.cancelled = true
	return nil
}

func post(t *testing.T, h http.Handler, body string) map[string]any {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set(mcp.HeaderProtocolVersion, "2026-07-28")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	text := strings.TrimSpace(w.Body.String())
	if i := strings.Index(text, "data: "); i >= 0 {
		text = strings.TrimSpace(strings.SplitN(text[i+len("data: "):], "\n", 2)[0])
	}
	var msg map[string]any
	if err := json.Unmarshal([]byte(text), &msg); err != nil {
		t.Fatalf("%s: %v", w.Body.String(), err)
	}
	return msg
}

const declared = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// A tool result that marks a task goes out as the task, flat, whether
// mcp-go writes it as a JSON body or as an event; without the extension
// declared it passes as it is.
func TestMarkedResultBecomesTheTask(t *testing.T) {
	t.Parallel()
	st := State{Status: Working, Created: time.Unix(1, 0), Updated: time.Unix(2, 0), TTL: time.Hour}
	result := mcp.NewToolResultText("running")
	result.Meta = &mcp.Meta{AdditionalFields: Marker("h", 1, st)}
	result.Meta.AdditionalFields["io.modelcontextprotocol/serverInfo"] = map[string]any{"name": "codeexec"}
	answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": result})
	for _, tc := range []struct{ name, body string }{
		{"json", string(answer) + "\n"},
		{"event", "event: message\ndata: " + string(answer) + "\n\n"},
	} {
		next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(tc.body)) })
		h := Handler(next, &runs{}, func(context.Context) string { return "alice" })
		got := post(t, h, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python",`+declared+`}}`)
		res, _ := got["result"].(map[string]any)
		meta, _ := res["_meta"].(map[string]any)
		if res["resultType"] != "task" || res["taskId"] != "h.1" || res["status"] != "working" || res["content"] != nil ||
			res["ttlMs"] != float64(3600000) || meta[MetaKey] != nil || meta["io.modelcontextprotocol/serverInfo"] == nil {
			t.Errorf("%s: %v", tc.name, got)
		}
		plain := post(t, h, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python"}}`)
		if res, _ := plain["result"].(map[string]any); res["taskId"] != nil {
			t.Errorf("%s without the extension: %v", tc.name, plain)
		}
	}
}

// The methods: gated on the extension, -32602 for an unknown task, the
// result inlined once completed, cancel only of a working task.
func TestTaskMethods(t *testing.T) {
	t.Parallel()
	r := &runs{st: State{Status: Completed, Created: time.Unix(1, 0), Updated: time.Unix(2, 0),
		Result: mcp.NewToolResultText("done")}}
	h := Handler(http.NotFoundHandler(), r, func(context.Context) string { return "alice" })
	call := func(method, id string, decl bool) map[string]any {
		meta := ""
		if decl {
			meta = "," + declared
		}
		return post(t, h, `{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":{"taskId":"`+id+`"`+meta+`}}`)
	}
	code := func(msg map[string]any) any { e, _ := msg["error"].(map[string]any); return e["code"] }
	if c := code(call("tasks/get", "h.1", false)); c != float64(-32021) {
		t.Errorf("undeclared: %v", c)
	}
	for _, id := range []string{"h.2", "nonsense", "h.0"} {
		if c := code(call("tasks/get", id, true)); c != float64(-32602) {
			t.Errorf("unknown %q: %v", id, c)
		}
	}
	got, _ := call("tasks/get", "h.1", true)["result"].(map[string]any)
	inner, _ := got["result"].(map[string]any)
	if got["status"] != "completed" || got["resultType"] != "complete" || inner["content"] == nil || inner["resultType"] != "complete" {
		t.Errorf("completed: %v", got)
	}
	ack, _ := call("tasks/cancel", "h.1", true)["result"].(map[string]any)
	if len(ack) != 1 || ack["resultType"] != "complete" || r.cancelled {
		t.Errorf("cancel of an ended task: %v, cancelled %v", ack, r.cancelled)
	}
	r.st.Status = Working
	call("tasks/cancel", "h.1", true)
	if !r.cancelled {
		t.Error("cancel of a working task did not cancel it")
	}
}
