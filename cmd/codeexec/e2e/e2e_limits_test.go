package e2e

import (
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
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
	c, _ := harness.StartStdio(t, nil)
	harness.Code(t, c, "kept = 1")
	code := "x = 1\n" + strings.Repeat("#", maxCodeBytes+1-len("x = 1\n"))
	o := harness.RunPython(t, c, map[string]any{"code": code})
	for _, want := range []string{"'code' is 66060289 bytes", "at most 66060288 bytes (63 MiB)", "/workspace"} {
		if !o.IsError || o.Str("status") != "validation_error" || !strings.Contains(o.Str("error"), want) {
			t.Fatalf("run_python(%d bytes of code) = %s; want a validation_error with %q", len(code), harness.TailOf(o.Text, 600), want)
		}
	}
	if got := harness.Joined(harness.Code(t, c, "print(kept)").Stdout()); got != "1" {
		t.Fatalf("after the refused call the session printed %q, want 1", got)
	}
}
