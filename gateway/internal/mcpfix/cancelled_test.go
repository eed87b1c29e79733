package mcpfix

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestStdio: the answer to a cancelled request is dropped, once; the
// answers to other requests pass, and so does the answer to a request that
// reuses the id of a cancelled one whose answer had already gone out.
func TestCancelledStdio(t *testing.T) {
	t.Parallel()
	stream := strings.Join([]string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2.0}}`,
	}, "\n") + "\n"
	var buf bytes.Buffer
	in, out := CancelledStdio(strings.NewReader(stream), &buf)
	if _, err := io.Copy(io.Discard, in); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":2,"result":{}}`,
		`{"jsonrpc":"2.0","id":"s","result":{}}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`,
		`{"jsonrpc":"2.0","id":5,"result":{}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"again":true}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":2}}`,
	} {
		if n, err := out.Write([]byte(msg + "\n")); err != nil || n != len(msg)+1 {
			t.Fatalf("Write(%s) = %d, %v", msg, n, err)
		}
	}
	want := `{"jsonrpc":"2.0","id":3,"result":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":5,"result":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"again":true}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":2}}` + "\n"
	if buf.String() != want {
		t.Errorf("written:\n%s\nwant:\n%s", buf.String(), want)
	}
}
