package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// JSON-RPC error codes the extension uses.
const (
	codeInvalidParams             = -32602
	codeInternal                  = -32603
	codeMissingRequiredCapability = -32021
)

// Handler serves next, answering the extension's methods under 2026-07-28
// itself (through runs, for the tenant that tenant finds in a request's
// context), and turning the tool results that mark a task into the task.
func Handler(next http.Handler, runs Runs, tenant func(context.Context) string) http.Handler {
	return &handler{next: next, runs: runs, tenant: tenant}
}

type handler struct {
	next   http.Handler
	runs   Runs
	tenant func(context.Context) string
}

// request is what the handler reads of a JSON-RPC message.
type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		TaskID string         `json:"taskId"`
		Meta   map[string]any `json:"_meta"`
	} `json:"params"`
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		h.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "could not read the request body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req request
	if json.Unmarshal(body, &req) != nil || len(req.ID) == 0 {
		h.next.ServeHTTP(w, r)
		return
	}
	switch req.Method {
	case "tasks/get", "tasks/update", "tasks/cancel":
		h.answer(w, r, req)
	case "tools/call":
		if Declared(req.Params.Meta) {
			w = &rewriter{ResponseWriter: w}
		}
		h.next.ServeHTTP(w, r)
	default:
		h.next.ServeHTTP(w, r)
	}
}

// answer serves one of the extension's methods over HTTP.
func (h *handler) answer(w http.ResponseWriter, r *http.Request, req request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(h.reply(r.Context(), req))
}

// reply is the JSON-RPC answer to one of the extension's methods.
func (h *handler) reply(ctx context.Context, req request) map[string]any {
	if !Declared(req.Params.Meta) {
		return replyError(req.ID, codeMissingRequiredCapability, "Missing required client capability: "+req.Method+" is part of the tasks extension, which the request does not declare",
			map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{Extension: map[string]any{}}}})
	}
	tenant := h.tenant(ctx)
	handle, run, err := parseID(req.Params.TaskID)
	var st State
	if err == nil {
		st, err = h.runs.TaskState(ctx, tenant, handle, run)
	}
	if err == nil && req.Method == "tasks/cancel" && st.Status == Working {
		err = h.runs.CancelTask(ctx, tenant, handle, run)
	}
	switch {
	case errors.Is(err, ErrUnknown):
		return replyError(req.ID, codeInvalidParams, "Failed to retrieve task: "+err.Error(), nil)
	case err != nil:
		return replyError(req.ID, codeInternal, "Failed to retrieve task: "+err.Error(), nil)
	case req.Method == "tasks/get":
		t := task(req.Params.TaskID, st)
		t["resultType"] = "complete"
		return map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": t}
	}
	// tasks/update (a run_python task never asks for input, so there is
	// nothing to take) and tasks/cancel are acknowledged.
	return map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"resultType": "complete"}}
}

func replyError(id json.RawMessage, code int, msg string, data any) map[string]any {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": e}
}

// rewriter turns a tool result that marks a task into the task
// (CreateTaskResult: resultType "task", the task's fields at the root).
// mcp-go writes each message in one Write: a JSON body, or one event of
// a stream.
type rewriter struct{ http.ResponseWriter }

var marker = []byte(`"` + MetaKey + `"`)

func (r *rewriter) Write(b []byte) (int, error) {
	if !bytes.Contains(b, marker) {
		return r.ResponseWriter.Write(b)
	}
	out := rewrite(b)
	r.Header().Del("Content-Length")
	if _, err := r.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush flushes the event streams that mcp-go writes through r.
func (r *rewriter) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *rewriter) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// rewrite rewrites the message in b, a JSON body or a server-sent event
// whose data is one line; anything it cannot read passes as it is.
func rewrite(b []byte) []byte {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		if out, ok := rewriteMessage(t); ok {
			return append(out, '\n')
		}
		return b
	}
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		if data, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
			if out, ok := rewriteMessage(data); ok {
				lines[i] = append([]byte("data: "), out...)
			}
		}
	}
	return bytes.Join(lines, []byte("\n"))
}

// rewriteMessage replaces the result of a JSON-RPC response with the
// task its _meta marks, keeping the rest of its _meta.
func rewriteMessage(b []byte) ([]byte, bool) {
	var msg map[string]any
	if json.Unmarshal(b, &msg) != nil {
		return nil, false
	}
	res, _ := msg["result"].(map[string]any)
	meta, _ := res["_meta"].(map[string]any)
	t, ok := meta[MetaKey].(map[string]any)
	if !ok {
		return nil, false
	}
	delete(meta, MetaKey)
	t["resultType"] = "task"
	if len(meta) > 0 {
		t["_meta"] = meta
	}
	msg["result"] = t
	out, err := json.Marshal(msg)
	return out, err == nil
}
