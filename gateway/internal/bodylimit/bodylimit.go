// Package bodylimit bounds the bodies of requests to the MCP endpoint
// before mcp-go sees them: mcp-go reads a whole body into memory and
// parses it, with no limit of its own, and a parsed body can take many
// times its size. Each body is read here, within its caps (Limits) and
// its time, counting its bytes against its tenant's share and everyone's
// as they arrive; it is checked for bytes outside its longest string, and
// only then handed on.
package bodylimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Options configure Handler.
type Options struct {
	Limits Limits
	// Budget counts the bytes in flight; it must have been made for the
	// same Limits.
	Budget *Budget
	// Tenant names a request's tenant (set by the guard before this).
	Tenant func(*http.Request) string
	// Hint, if set, follows the request cap in its refusal and says what
	// to send instead.
	Hint string
	// Refused counts a refusal by its reason (one of AllRefusals).
	Refused func(reason string)
}

// refusal is why a body was not taken, and how to answer.
type refusal struct {
	reason string
	status int
	msg    string
}

// chunk is how many bytes a body of unknown length is read (and counted)
// at a time.
const chunk = 64 << 10

// Handler serves next with bodies within opts' bounds; any other is
// answered with a JSON-RPC error that names the bound it passed: 413 for
// one body's caps, 429 for its tenant's bytes in flight, 503 for
// everyone's, 408 for a body that did not arrive in time.
func Handler(next http.Handler, opts Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		body, taken, ref, readErr := read(w, r, opts)
		defer opts.Budget.give(opts.Tenant(r), taken)
		if ref != nil {
			if opts.Refused != nil {
				opts.Refused(ref.reason)
			}
			answer(w, ref)
			return
		}
		rest := io.Reader(bytes.NewReader(body))
		if readErr != nil {
			// The client went away or broke the body: next reads what
			// arrived, then the same error.
			rest = io.MultiReader(rest, errReader{readErr})
		} else {
			r.ContentLength = int64(len(body))
		}
		r.Body = io.NopCloser(rest)
		next.ServeHTTP(w, r)
	})
}

// read reads r's body within opts' bounds and returns it with the bytes
// it took from the budget (to give back once the request is answered),
// and the error that ended a body cut short.
func read(w http.ResponseWriter, r *http.Request, opts Options) (body []byte, taken int64, ref *refusal, readErr error) {
	lim, tenant := opts.Limits, opts.Tenant(r)
	if lim.Request > 0 && r.ContentLength > lim.Request {
		return nil, 0, tooLarge(lim, opts.Hint), nil
	}
	if lim.ReadTimeout > 0 {
		// Lifted once the body is in; a refused body keeps it, so that
		// the server's read of what is left of it cannot wait long.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(lim.ReadTimeout))
		defer func() {
			if ref == nil {
				_ = rc.SetReadDeadline(time.Time{})
			}
		}()
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		// Known up front: counted whole before a byte is read.
		if ref := opts.Budget.take(tenant, r.ContentLength); ref != nil {
			return nil, 0, ref, nil
		}
		taken = r.ContentLength
		buf.Grow(int(r.ContentLength))
	}
	src := io.Reader(r.Body)
	if lim.Request > 0 {
		src = io.LimitReader(src, lim.Request+1)
	}
	for {
		n, err := io.CopyN(&buf, src, chunk)
		if r.ContentLength < 0 {
			// Counted as it arrives, a chunk at a time.
			if ref := opts.Budget.take(tenant, n); ref != nil {
				return nil, taken, ref, nil
			}
			taken += n
		}
		if lim.Request > 0 && int64(buf.Len()) > lim.Request {
			return nil, taken, tooLarge(lim, opts.Hint), nil
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, taken, &refusal{reason: RefusedTimeout, status: http.StatusRequestTimeout, msg: fmt.Sprintf(
				"the request body did not arrive within %s, the most this endpoint waits for one", lim.ReadTimeout)}, nil
		}
		if err != nil {
			return buf.Bytes(), taken, nil, err
		}
	}
	if lim.Outside > 0 {
		if out := outsideLongestString(buf.Bytes()); int64(out) > lim.Outside {
			return nil, taken, &refusal{reason: RefusedOutside, status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf(
				"the request body holds %d bytes outside the longest string in it, more than the %d bytes (%d KiB) this endpoint takes there: "+
					"run_python's code may be long, but its other arguments are short; do not put large data in them",
				out, lim.Outside, lim.Outside>>10)}, nil
		}
	}
	return buf.Bytes(), taken, nil, nil
}

// tooLarge is the refusal of a body over Limits.Request.
func tooLarge(lim Limits, hint string) *refusal {
	msg := fmt.Sprintf("the request body is over %d bytes (%d MiB), the most this endpoint accepts", lim.Request, lim.Request>>20)
	if hint != "" {
		msg += "; " + hint
	}
	return &refusal{reason: RefusedRequest, status: http.StatusRequestEntityTooLarge, msg: msg}
}

// answer writes a refusal as a JSON-RPC error. The request's id is
// unknown: the body that holds it was not parsed.
func answer(w http.ResponseWriter, ref *refusal) {
	code := mcp.INVALID_REQUEST
	if ref.status == http.StatusTooManyRequests || ref.status == http.StatusServiceUnavailable {
		code = mcp.INTERNAL_ERROR
		w.Header().Set("Retry-After", "1")
	}
	body, _ := json.Marshal(mcp.NewJSONRPCError(mcp.NewRequestId(nil), code, ref.msg, nil))
	w.Header().Set("Content-Type", "application/json")
	// The unread rest of the body would otherwise hold the connection.
	w.Header().Set("Connection", "close")
	w.WriteHeader(ref.status)
	_, _ = w.Write(body)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
