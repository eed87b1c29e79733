package tasks

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is what the answers are written to, from their goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Over stdio the extension's requests of 2026-07-28 are taken out of what
// mcp-go reads and answered on the stream; every other line, and a last
// one without its newline, passes as it is.
func TestStdioTakesTheTaskMethods(t *testing.T) {
	t.Parallel()
	modern := `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"h.1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + declared[len(`"_meta":{`):] + `}}`
	legacy := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"h.1"}}`
	call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_python"}}`
	input := legacy + "\n" + modern + "\n" + call + "\n" + "tail"
	var out lockedBuffer
	r, _ := Stdio(t.Context(), strings.NewReader(input), &out, &runs{st: State{Status: Working, Created: time.Unix(1, 0), Updated: time.Unix(1, 0)}}, "alice")
	passed, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := legacy + "\n" + call + "\n" + "tail"; string(passed) != want {
		t.Errorf("mcp-go reads %q, want %q", passed, want)
	}
	var answer map[string]any
	for range 100 {
		if s := out.String(); s != "" {
			if err := json.Unmarshal([]byte(s), &answer); err != nil || !strings.HasSuffix(s, "\n") {
				t.Fatalf("the answer %q is not one JSON line: %v", s, err)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	res, _ := answer["result"].(map[string]any)
	if answer["id"] != float64(9) || res["status"] != "working" || res["taskId"] != "h.1" {
		t.Errorf("the answer: %v", answer)
	}
}
