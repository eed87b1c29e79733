package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	"github.com/mark3labs/mcp-go/client"
)

// maxCodeBytes is the gateway's limit on code (params.MaxCodeBytes): the
// gRPC message limit, 64 MiB, less 1 MiB for the rest of the request.
const maxCodeBytes = 63 << 20

// Code too large for the one gRPC message that carries it to sandboxd is
// refused before it is sent, with the limit and what to do instead; the
// session goes on. Before, grpc-go's refusal read as "at capacity; retry
// shortly", which no retry could cure.
func TestE2ECodeOverTheLimitIsRefusedWithTheLimit(t *testing.T) {
	t.Parallel()
	code := "x = 1\n" + strings.Repeat("#", maxCodeBytes+1-len("x = 1\n"))
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *client.Client
	}{
		{name: "stdio", start: func(t *testing.T) *client.Client { c, _ := harness.StartStdio(t, nil); return c }},
		// The body is within the HTTP transport's limit.
		{name: "http", start: func(t *testing.T) *client.Client { return harness.HTTPClient(t, harness.StartHTTP(t, nil)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.start(t)
			harness.Code(t, c, "kept = 1")
			o := harness.RunPython(t, c, map[string]any{"code": code})
			for _, want := range []string{"'code' is 66060289 bytes", "at most 66060288 bytes (63 MiB)", "/workspace"} {
				if !o.IsError || o.Str("status") != "validation_error" || !strings.Contains(o.Str("error"), want) {
					t.Fatalf("run_python(%d bytes of code) = %s; want a validation_error with %q", len(code), harness.TailOf(o.Text, 600), want)
				}
			}
			if got := harness.Joined(harness.Code(t, c, "print(kept)").Stdout()); got != "1" {
				t.Fatalf("after the refused call the session printed %q, want 1", got)
			}
		})
	}
}

// maxBodyBytes is the limit on a body POSTed to /mcp (gateway.MaxBodyBytes):
// maxCodeBytes plus 1 MiB for the rest of the call.
const maxBodyBytes = maxCodeBytes + 1<<20

// A body over the limit is refused with 413 and a JSON-RPC error that gives
// the limit, whether its length is announced or not. Before, any body was
// read whole: 200 MB took the server to 1.8 GB.
func TestE2EHTTPBodyOverTheLimitIs413(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, nil)
	for _, tc := range []struct {
		name   string
		length int64 // -1: chunked
	}{
		{name: "content-length", length: maxBodyBytes + 1},
		{name: "chunked", length: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := io.LimitReader(repeatReader('a'), maxBodyBytes+1)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = tc.length
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("POST of %d bytes: %v", maxBodyBytes+1, err)
			}
			defer resp.Body.Close()
			var answer struct {
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			raw, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(raw, &answer); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("POST of %d bytes = %s %q (%v), want 413 with a JSON-RPC error", maxBodyBytes+1, resp.Status, raw, err)
			}
			for _, want := range []string{"over 67108864 bytes (64 MiB)", "at most 66060288 bytes (63 MiB) of code", "/workspace"} {
				if answer.Error.Code != -32600 || !strings.Contains(answer.Error.Message, want) {
					t.Errorf("error = %+v, want code -32600 and a message with %q", answer.Error, want)
				}
			}
		})
	}
}

// repeatReader reads as an endless run of one byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
