package mcpfix

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCancelledIsNotAnswered: the answer to a detached request marked
// Cancelled is dropped: a JSON answer not yet begun becomes 202 with no
// body; an event stream already begun keeps what was written and ends
// without the rest. Requests of other kinds are not detached.
func TestCancelledIsNotAnswered(t *testing.T) {
	t.Parallel()
	post := func(header map[string]string) (*httptest.ResponseRecorder, http.ResponseWriter, *http.Request) {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", strings.NewReader("{}"))
		for k, v := range header {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		w, r := Detach(rec, r)
		return rec, w, r
	}
	session := map[string]string{"Mcp-Session-Id": "mcp-session-1", "Mcp-Protocol-Version": "2025-06-18"}

	rec, w, r := post(session)
	MarkCancelled(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", "40")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n"))
	if rec.Code != http.StatusAccepted || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" || rec.Header().Get("Content-Length") != "" {
		t.Errorf("a cancelled JSON answer = %d %v %q; want 202 with no body", rec.Code, rec.Header(), rec.Body)
	}

	rec, w, r = post(session)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("event: message\ndata: progress\n\n"))
	MarkCancelled(r.Context())
	_, _ = w.Write([]byte("event: message\ndata: result\n\n"))
	if rec.Code != http.StatusOK || rec.Body.String() != "event: message\ndata: progress\n\n" {
		t.Errorf("a cancelled event stream = %d %q; want what came before the cancellation only", rec.Code, rec.Body)
	}

	for name, header := range map[string]map[string]string{
		"no session": {"Mcp-Protocol-Version": "2025-06-18"},
		"2026-07-28": {"Mcp-Session-Id": "mcp-session-1", "Mcp-Protocol-Version": "2026-07-28"},
	} {
		rec, w, r := post(header)
		if _, ok := OnGone(r.Context(), func() {}); ok || w != http.ResponseWriter(rec) {
			t.Errorf("%s: the request was detached", name)
		}
		if r.Context().Done() == context.Background().Done() {
			t.Errorf("%s: the request's context no longer ends with its connection", name)
		}
	}
}
