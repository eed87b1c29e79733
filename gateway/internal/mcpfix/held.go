// Answers held back and edited on their way out: the streamable HTTP side
// of the fixes that change one of mcp-go's answers (jsonl.go is the stdio
// side).

package mcpfix

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// heldAnswers serves next, passing its answer to each POST of method
// whose body parse accepts through the edit parse gives. mcp-go answers
// such a request with one JSON body, which is held back until next
// returns; an answer it streams as server-sent events passes through as
// it is written. Other requests reach next untouched.
func heldAnswers(next http.Handler, method mcp.MCPMethod, parse func(body []byte) (id string, edit func([]byte) ([]byte, bool), ok bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// 2026-07-28 names the method in a header (and mcp-go refuses a
		// body that disagrees); only the older revisions need the body
		// read to know.
		if m := r.Header.Get(mcp.HeaderMethod); r.Method != http.MethodPost || r.Body == nil || (m != "" && m != string(method)) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// next reads the same bytes and then the same error.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
			next.ServeHTTP(w, r)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		id, edit, ok := parse(body)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		b := &held{ResponseWriter: w}
		next.ServeHTTP(b, r)
		b.finish(id, edit)
	})
}

// held keeps a JSON answer until finish, and passes any other through.
type held struct {
	http.ResponseWriter
	status  int
	body    bytes.Buffer
	decided bool // WriteHeader has been called
	through bool // the answer is not JSON: written as it comes
}

func (h *held) WriteHeader(status int) {
	if h.decided {
		return
	}
	h.decided, h.status = true, status
	if !strings.HasPrefix(h.Header().Get("Content-Type"), "application/json") {
		h.through = true
		h.ResponseWriter.WriteHeader(status)
	}
}

func (h *held) Write(p []byte) (int, error) {
	if !h.decided {
		h.WriteHeader(http.StatusOK)
	}
	if h.through {
		return h.ResponseWriter.Write(p)
	}
	return h.body.Write(p)
}

// Flush flushes what passes through; mcp-go streams only to a writer that
// can flush, so held must be one.
func (h *held) Flush() {
	if f, ok := h.ResponseWriter.(http.Flusher); ok && h.through {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (h *held) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// finish writes a held JSON answer, edited when it is the answer to the
// request id and edit changes it.
func (h *held) finish(id string, edit func(msg []byte) ([]byte, bool)) {
	if h.through || !h.decided {
		return
	}
	msg := h.body.Bytes()
	if rid, ok := responseID(msg); ok && rid == id {
		trimmed := bytes.TrimRight(msg, "\n")
		if out, changed := edit(trimmed); changed {
			out = append(out, '\n')
			msg = out
		}
	}
	if h.Header().Get("Content-Length") != "" {
		h.Header().Set("Content-Length", strconv.Itoa(len(msg)))
	}
	h.ResponseWriter.WriteHeader(h.status)
	_, _ = h.ResponseWriter.Write(msg) // the client went away: nothing to tell
}

// setErrorMember returns msg, a JSON-RPC error answer, with its error's
// member key set to value, every other member kept as mcp-go wrote it.
func setErrorMember(msg []byte, key string, value json.RawMessage) ([]byte, bool) {
	var top, e map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil || json.Unmarshal(top["error"], &e) != nil {
		return msg, false
	}
	e[key] = value
	var err error
	if top["error"], err = json.Marshal(e); err != nil {
		return msg, false
	}
	out, err := json.Marshal(top)
	if err != nil {
		return msg, false
	}
	return out, true
}
