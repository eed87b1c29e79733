package mcpfix

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestInvalidParamsStdio: an answer of -32603 carrying ErrInvalidParams
// to a tools/call retry gets -32602; the same answer to a request that was
// no retry, and a handler's other errors, pass as they are.
func TestInvalidParamsStdio(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"call_tool","requestState":"x","inputResponses":{}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"call_tool"}}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"call_tool","requestState":"x"}}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	r, w := InvalidParamsStdio(strings.NewReader(in), &out)
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"invalid params: requestState does not belong"}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"invalid params: requestState does not belong"}}`,
		`{"jsonrpc":"2.0","id":"three","error":{"code":-32603,"message":"the server broke"}}`,
	} {
		if _, err := w.Write([]byte(msg + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{`"code":-32602`, `"code":-32603`, `"code":-32603`}
	for i, w := range want {
		if i >= len(lines) || !strings.Contains(lines[i], w) {
			t.Errorf("answer %d = %q, want %s", i+1, lines, w)
		}
	}
}
