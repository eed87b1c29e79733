package runpython

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	"github.com/codeexec/codeexec/gateway/internal/result"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// gather reads an Execute stream to its result: the output, capped, and
// handed to progress as it comes, and the approval questions, handed to
// ask.
func (t *Tool) gather(stream grpc.ServerStreamingClient[sandboxv1.ExecuteResponse], base result.Outcome, progress func(string), ask func(*sandboxv1.ApprovalRequest)) (out result.Outcome) {
	out = base
	limit := int(t.opts.OutputLimitBytes) * localCapFactor
	var stdout, stderr capped
	stdout.limit, stderr.limit = limit, limit
	defer func() { out.Stdout, out.Stderr = stdout.String(), stderr.String() }()
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			out.Err = errors.New("the sandbox service ended the call without a result")
			return out
		}
		if err != nil {
			out.Err = err
			return out
		}
		switch ev := msg.GetEvent().(type) {
		case *sandboxv1.ExecuteResponse_Output:
			if ev.Output.GetStream() == sandboxv1.Stream_STREAM_STDERR {
				stderr.write(ev.Output.GetText())
			} else {
				stdout.write(ev.Output.GetText())
			}
			progress(ev.Output.GetText())
		case *sandboxv1.ExecuteResponse_Approval:
			ask(ev.Approval)
		case *sandboxv1.ExecuteResponse_Result:
			r := ev.Result
			// Count what the gateway itself had to drop as dropped too.
			r.StdoutDroppedBytes += stdout.dropped
			r.StderrDroppedBytes += stderr.dropped
			out.Result = r
			return out
		}
	}
}

// capped is a string builder that stops growing at limit bytes (0: no limit).
type capped struct {
	strings.Builder
	limit   int
	dropped uint64
}

func (c *capped) write(s string) {
	if c.limit > 0 && c.Len()+len(s) > c.limit {
		keep := max(0, c.limit-c.Len())
		c.dropped += uint64(len(s) - keep)
		s = s[:keep]
	}
	c.WriteString(s)
}

// progressInterval spaces out progress notifications.
const progressInterval = 250 * time.Millisecond

// progress returns a callback that sends notifications/progress for output
// chunks when the client asked for progress with a progressToken. The
// message is the latest output line, so a client can show live output.
func (t *Tool) progress(ctx context.Context, req mcp.CallToolRequest) func(string) {
	srv := server.ServerFromContext(ctx)
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil || srv == nil {
		return func(string) {}
	}
	token := req.Params.Meta.ProgressToken
	var mu sync.Mutex
	var chunks int
	var last time.Time
	return func(text string) {
		mu.Lock()
		defer mu.Unlock()
		chunks++
		if time.Since(last) < progressInterval || mcpfix.Gone(ctx) {
			return
		}
		last = time.Now()
		line := strings.TrimRight(text, "\n")
		if i := strings.LastIndexByte(line, '\n'); i >= 0 {
			line = line[i+1:]
		}
		if len(line) > 200 {
			line = strings.ToValidUTF8(line[:200], "") + "…"
		}
		err := srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
			"progressToken": token,
			"progress":      chunks,
			"message":       line,
		})
		if err != nil {
			t.opts.Logger.DebugContext(ctx, "progress notification not sent", logkeys.Error, err)
		}
	}
}
