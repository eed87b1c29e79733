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
// each event handed to ev as it comes, each question to asks (nil: none
// is asked). It stops early at a question that asks says the call is to
// return (out.Questions): the run waits for its answer in its sandbox.
func (t *Tool) gather(stream grpc.ServerStreamingClient[sandboxv1.ExecuteResponse], base result.Outcome, ev *events, asks *asking) (out result.Outcome) {
	out = base
	limit := int(t.opts.OutputLimitBytes) * localCapFactor
	var stdout, stderr capped
	stdout.limit, stderr.limit = limit, limit
	var images imageGate
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
		switch e := msg.GetEvent().(type) {
		case *sandboxv1.ExecuteResponse_Output:
			if e.Output.GetStream() == sandboxv1.Stream_STREAM_STDERR {
				stderr.write(e.Output.GetText())
			} else {
				stdout.write(e.Output.GetText())
			}
			ev.output(e.Output.GetText())
		case *sandboxv1.ExecuteResponse_Display:
			if im, ok := images.admit(e.Display); ok {
				out.Images = append(out.Images, im)
			}
		case *sandboxv1.ExecuteResponse_Progress:
			ev.progress(e.Progress)
		case *sandboxv1.ExecuteResponse_Approval:
			if asks.question(e.Approval) {
				out.Questions = append(out.Questions, e.Approval)
				return out
			}
		case *sandboxv1.ExecuteResponse_Result:
			r := e.Result
			// Count what the gateway itself had to drop as dropped too.
			r.StdoutDroppedBytes += stdout.dropped
			r.StderrDroppedBytes += stderr.dropped
			out.Result = r
			return out
		}
	}
}

// The most images, and bytes of them, the gateway takes from one call: a
// backstop far above sandboxd's own bounds (10 and 640 KiB by default),
// which a sandboxd of another configuration may set higher.
const (
	maxImages     = 100
	maxImageBytes = 32 << 20
)

// imageGate bounds the images of one call.
type imageGate struct{ n, bytes int }

func (g *imageGate) admit(d *sandboxv1.DisplayData) (result.Image, bool) {
	mime := d.GetMimeType()
	if (mime != "image/png" && mime != "image/jpeg") || len(d.GetData()) == 0 ||
		g.n >= maxImages || g.bytes+len(d.GetData()) > maxImageBytes {
		return result.Image{}, false
	}
	g.n++
	g.bytes += len(d.GetData())
	return result.Image{MIME: mime, Data: d.GetData(), Width: int(d.GetWidth()), Height: int(d.GetHeight())}, true
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

// events passes a call's events to its client: with a progressToken, as
// notifications/progress. Output lines go out as steps (progress 1, 2, …,
// no total, the latest line as the message) until the code reports its
// own progress (runtime.progress); from then on the code's numbers go
// out, shifted by the steps already sent, since progress must grow from
// one notification to the next. At most one notification per
// progressInterval, but for the code's report of its end.
type events struct {
	send func(progress, total float64, message string) error
	mu   sync.Mutex
	last time.Time
	sent float64
	// base shifts the code's numbers, once it has reported; own says it
	// has.
	base float64
	own  bool
}

// output passes on a piece of output.
func (e *events) output(text string) {
	if e == nil || e.send == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.own || time.Since(e.last) < progressInterval {
		return
	}
	line := strings.TrimRight(text, "\n")
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if len(line) > 200 {
		line = strings.ToValidUTF8(line[:200], "") + "…"
	}
	e.emit(e.sent+1, 0, line)
}

// progress passes on the code's report.
func (e *events) progress(p *sandboxv1.Progress) {
	if e == nil || e.send == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.own {
		e.own, e.base = true, e.sent
	}
	done, total := e.base+p.GetDone(), 0.0
	if p.GetTotal() > 0 {
		total = e.base + p.GetTotal()
	}
	final := total > 0 && done >= total
	if done <= e.sent || (!final && time.Since(e.last) < progressInterval) {
		return
	}
	e.emit(done, total, p.GetMessage())
}

// emit sends one notification; e.mu is held.
func (e *events) emit(progress, total float64, message string) {
	e.last, e.sent = time.Now(), progress
	_ = e.send(progress, total, message)
}

// flush, once the call's result is in, lets the notifications sent reach
// the client before it (see mcpfix.FlushNotifications).
func (e *events) flush(ctx context.Context) {
	if e == nil {
		return
	}
	e.mu.Lock()
	sent := e.sent > 0
	e.mu.Unlock()
	if sent {
		mcpfix.FlushNotifications(ctx)
	}
}

// progress returns the events of a call: notifications/progress to the
// client when it asked for progress with a progressToken, nothing
// otherwise.
func (t *Tool) progress(ctx context.Context, req mcp.CallToolRequest) *events {
	srv := server.ServerFromContext(ctx)
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil || srv == nil {
		return &events{}
	}
	token := req.Params.Meta.ProgressToken
	return &events{send: func(progress, total float64, message string) error {
		if mcpfix.Gone(ctx) {
			return nil
		}
		params := map[string]any{"progressToken": token, "progress": progress}
		if total > 0 {
			params["total"] = total
		}
		if message != "" {
			params["message"] = message
		}
		err := srv.SendNotificationToClient(ctx, "notifications/progress", params)
		if err != nil {
			t.opts.Logger.DebugContext(ctx, "progress notification not sent", logkeys.Error, err)
		}
		return err
	}}
}
