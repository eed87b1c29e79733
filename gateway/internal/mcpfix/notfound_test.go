package mcpfix

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const notFound = `{"jsonrpc":"2.0","id":%s,"error":{"code":-32002,"message":"handler not found for resource URI 'x://a': resource not found"}}`

func TestWithURI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, msg string
		changed   bool
	}{
		{"legacy code", `{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"handler not found for resource URI 'x://a': resource not found"}}`, true},
		{"2026-07-28 code", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"handler not found for resource URI 'x://a': resource not found"}}`, true},
		{"data already", `{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"resource not found","data":{"uri":"y"}}}`, false},
		{"malformed params", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid params"}}`, false},
		{"a handler's error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"resource not found"}}`, false},
		{"a result", `{"jsonrpc":"2.0","id":1,"result":{"contents":[]}}`, false},
		{"not JSON", `{"jsonrpc":`, false},
	} {
		out, changed := withURI([]byte(tc.msg), "x://a")
		if changed != tc.changed {
			t.Errorf("%s: changed %v, want %v (%s)", tc.name, changed, tc.changed, out)
			continue
		}
		if !changed {
			if string(out) != tc.msg {
				t.Errorf("%s: %s, want it unchanged", tc.name, out)
			}
			continue
		}
		var got, want map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %s: %v", tc.name, out, err)
		}
		_ = json.Unmarshal([]byte(tc.msg), &want)
		want["error"].(map[string]any)["data"] = map[string]any{"uri": "x://a"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: (-want +got)\n%s", tc.name, d)
		}
	}
}

// TestStdioChunks feeds requests through Stdio in pieces of every size
// and wants each not-found answer to get its URI, and nothing else to
// change: not a tool call longer than maxLine that precedes a read,
// nor the answer to a read that was not noted.
func TestNotFoundStdioChunks(t *testing.T) {
	t.Parallel()
	long := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"code":"` + strings.Repeat("resources/read ", maxLine/10) + `"}}`
	stream := long + "\n" +
		`{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"x://a"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2.0,"method":"resources/read","params":{"uri":"x://b"}}` + "\n"
	for _, size := range []int{1, 7, 100, 4096, len(stream)} {
		var buf bytes.Buffer
		in, out, pending := notFoundFilter(&chunks{b: []byte(stream), size: size}, &buf)
		if _, err := io.Copy(io.Discard, in); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{`"a"`, `2`, `1`, `"zz"`} {
			msg := strings.Replace(notFound, "%s", id, 1) + "\n"
			if n, err := out.Write([]byte(msg)); err != nil || n != len(msg) {
				t.Fatalf("Write = %d, %v; want %d", n, err, len(msg))
			}
		}
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		want := []string{`{"uri":"x://a"}`, `{"uri":"x://b"}`, "", ""}
		for i, line := range lines {
			var a struct {
				Error struct {
					Data json.RawMessage `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				t.Fatalf("chunks of %d: line %q: %v", size, line, err)
			}
			if string(a.Error.Data) != want[i] {
				t.Errorf("chunks of %d: answer %d data %s, want %q", size, i, a.Error.Data, want[i])
			}
		}
		if pending.Len() != 0 {
			t.Errorf("chunks of %d: reads still pending after their answers: %v", size, pending.All())
		}
	}
}

// chunks reads b size bytes at a time.
type chunks struct {
	b    []byte
	size int
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.size)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// TestHandlerPassesBodyErrors: a body that fails to read reaches the next
// handler as the same bytes and then the same error.
func TestNotFoundHandlerPassesBodyErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	var got []byte
	var gotErr error
	h := NotFoundHandler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got, gotErr = io.ReadAll(r.Body)
	}))
	r := httptest.NewRequest(http.MethodPost, "/mcp", io.MultiReader(strings.NewReader(`{"jsonrpc"`), errReader{boom}))
	h.ServeHTTP(httptest.NewRecorder(), r)
	if string(got) != `{"jsonrpc"` || !errors.Is(gotErr, boom) {
		t.Errorf("next read %q, %v; want the bytes and then boom", got, gotErr)
	}
}

// FuzzScan: however a stream is cut into reads, the noted reads are those
// of its whole lines.
func FuzzNotFoundScan(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"x://a"}}`+"\n"), uint8(3))
	f.Add([]byte("\n\n{\"id\":\"q\",\"method\":\"resources/read\"}\n{"), uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, size uint8) {
		want := map[string]string{}
		lines := bytes.Split(stream, []byte("\n"))
		for _, line := range lines[:len(lines)-1] { // the last has no end
			if len(line) > maxLine {
				continue
			}
			if id, uri, ok := parseRead(line); ok && len(want) < maxPending {
				want[id] = uri
			}
		}
		in, _, pending := notFoundFilter(&chunks{b: stream, size: int(size%64) + 1}, io.Discard)
		if _, err := io.Copy(io.Discard, in); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, pending.All()); d != "" {
			t.Errorf("(-whole lines +reads)\n%s", d)
		}
	})
}
