package notfound

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/gateway/internal/jsonl"
)

// Handler serves next, adding the URI to its answer to each resources/read
// POST of a resource it does not have. Other requests reach next untouched.
// mcp-go answers such a read with one JSON body, which is held back until
// next returns; an answer it streams as server-sent events passes through as
// it is written.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// 2026-07-28 names the method in a header (and mcp-go refuses a
		// body that disagrees); only the older revisions need the body
		// read to know.
		if m := r.Header.Get(mcp.HeaderMethod); r.Method != http.MethodPost || r.Body == nil || (m != "" && m != string(mcp.MethodResourcesRead)) {
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
		id, uri, ok := parseRead(body)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		b := &held{ResponseWriter: w}
		next.ServeHTTP(b, r)
		b.finish(id, uri)
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

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

// finish writes a held JSON answer, with the URI added when it is the
// not-found error for the request id.
func (h *held) finish(id, uri string) {
	if h.through || !h.decided {
		return
	}
	msg := h.body.Bytes()
	if rid, ok := jsonl.ResponseID(msg); ok && rid == id {
		trimmed := bytes.TrimRight(msg, "\n")
		if out, changed := withURI(trimmed, uri); changed {
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
