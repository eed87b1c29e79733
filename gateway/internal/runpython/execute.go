package runpython

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/codeexec/codeexec/gateway/internal/detach"
	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/replicas"
	"github.com/codeexec/codeexec/gateway/internal/result"
	"github.com/codeexec/codeexec/gateway/internal/sessions"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/requestid"
)

// Notices the gateway adds to a result.
const (
	// NoticeSessionLost: the sandbox session is gone (sandboxd restarted
	// or reaped it, or the MCP session began in an earlier gateway and
	// left no sandbox session to continue).
	NoticeSessionLost = "session lost; started a new session — earlier state is gone"
	// NoticeSilentReset: the sandbox was replaced between calls although
	// no call said its state was lost.
	NoticeSilentReset = "the sandbox was restarted since the last call; earlier state is gone"
)

// ephemeralPrefix marks the table keys of sessionless legacy calls.
const ephemeralPrefix = "ephemeral-"

// rpcGrace is how long past the code's own timeout the gateway waits for
// sandboxd to report, so that a hung service cannot hang the MCP call.
const rpcGrace = 30 * time.Second

// localCapFactor bounds the output the gateway buffers per stream to this
// multiple of the configured cap, in case sandboxd's own cut fails.
const localCapFactor = 2

// Execute runs p in a sandbox session of tenant's: the one p.Session
// names; else the one that serves the caller's MCP session (over stdio the
// process is the session, in either protocol era); else, for a request
// without a protocol session (MCP 2026-07-28 over HTTP), a new one. Modern
// requests (and every call that names or starts a session by handle) get
// the handle back in the result; a legacy client's results are exactly as
// they were before handles existed.
func (t *Tool) Execute(ctx context.Context, tenant, mcpID string, modern bool, p params.RunPython, progress func(string)) result.Outcome {
	base := result.Outcome{TimeoutSeconds: p.TimeoutSeconds, Servers: p.Servers, OutputCapBytes: t.opts.OutputLimitBytes}
	if p.Session != "" || (mcpID == "" && modern) {
		return t.executeHandle(ctx, tenant, p, base, progress)
	}
	table := t.opts.Sessions
	var notices []string
	// An MCP session over HTTP has a handle derived from it, so that it
	// outlives this gateway; over stdio the process is the session.
	derived := sessions.IsOverHTTP(ctx) && mcpID != ""
	if mcpID == "" {
		// A legacy request without a session (a stateless client of the
		// older revisions): a throwaway sandbox, as before handles.
		mcpID = ephemeralPrefix + requestid.New()
		notices = append(notices, "no MCP session: this call ran in a fresh sandbox, and its state is not kept")
		defer table.End(ctx, mcpID)
	}
	e, err := table.Entry(tenant, mcpID, derived)
	if err != nil {
		base.Err = err
		return base
	}
	id, created, err := table.SandboxID(ctx, e)
	if err != nil {
		base.Err = err
		return base
	}
	if created && !table.IsKnown(mcpID) && !strings.HasPrefix(mcpID, ephemeralPrefix) {
		// The client's session began before this gateway process did,
		// and no sandbox session of it is left (over HTTP its derived
		// handle would have found it): whatever state it had is out of
		// reach.
		notices = append(notices, NoticeSessionLost)
	}
	out := t.runOnce(ctx, e.Tenant, id, p, base, progress)
	switch {
	case status.Code(out.Err) == codes.NotFound && out.Stdout == "" && out.Stderr == "":
		// NotFound before any output means sandboxd no longer knows the
		// session, typically because it restarted. Start over once.
		// sandboxd's message says why (reaped when idle, its replica went
		// away); the model and the user deserve the reason.
		why := status.Convert(out.Err).Message()
		if id, err = table.Replace(ctx, e, id); err != nil {
			base.Err = err
			return base
		}
		out = t.runOnce(ctx, e.Tenant, id, p, base, progress)
		notices = slices.DeleteFunc(notices, func(n string) bool { return n == NoticeSessionLost })
		notices = append(notices, NoticeSessionLost+" ("+why+")")
	case out.Err == nil && !out.Result.GetEnded() && e.Observe(id, out.Result):
		notices = append(notices, NoticeSilentReset)
	}
	if out.Err == nil && out.Result.GetEnded() {
		table.Ended(e, id) // also after a retry in a new session
	}
	out.Notices = append(notices, out.Notices...)
	if modern {
		out.Session, out.NewSession = id, created
	}
	return out
}

// executeHandle runs p in the session p.Session names, or in a new one.
// An unknown handle (another tenant's, an expired one, a made-up one) is
// one answer for all, with what to do.
func (t *Tool) executeHandle(ctx context.Context, tenant string, p params.RunPython, base result.Outcome, progress func(string)) result.Outcome {
	handle, created := p.Session, false
	if handle == "" {
		resp, err := t.opts.Sandbox.CreateSession(ctx, &sandboxv1.CreateSessionRequest{Tenant: tenant})
		if err != nil {
			base.Err = err
			return base
		}
		handle, created = resp.GetSession().GetId(), true
	}
	out := t.runOnce(ctx, tenant, handle, p, base, progress)
	if p.Session != "" && status.Code(out.Err) == codes.NotFound && out.Stdout == "" && out.Stderr == "" {
		out.Err = status.Errorf(codes.NotFound, "unknown session %q: it has ended or expired, or it belongs to another tenant; call run_python without a session to start a new one", handle)
		return out
	}
	out.Session, out.NewSession = handle, created
	return out
}

// runOnce makes one Execute call and gathers its stream. A session that is
// live on another replica is followed there.
func (t *Tool) runOnce(ctx context.Context, tenant, sandboxID string, p params.RunPython, base result.Outcome, progress func(string)) (out result.Outcome) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(p.TimeoutSeconds)*time.Second+rpcGrace)
	defer cancel()
	req := &sandboxv1.ExecuteRequest{
		SessionId: sandboxID,
		Tenant:    tenant,
		Code:      p.Code,
		Servers:   p.Servers,
		Timeout:   durationpb.New(time.Duration(p.TimeoutSeconds) * time.Second),
	}
	client, holder := t.opts.Sandbox, ""
	holderGone := time.Time{}
	for hop := 0; ; hop++ {
		out = t.stream(ctx, client, req, base, progress)
		if holder != "" && status.Code(out.Err) == codes.Unavailable && out.Stdout == "" && out.Stderr == "" {
			// The replica the store names as the session's holder does
			// not answer: once its lease lapses (seconds), any replica
			// takes the session over from its checkpoint. Ask again.
			if holderGone.IsZero() {
				holderGone = time.Now()
			}
			if time.Since(holderGone) < holderWait {
				select {
				case <-time.After(holderRetry):
				case <-ctx.Done():
					return out
				}
				client, holder, hop = t.opts.Sandbox, "", -1
				continue
			}
			out.Err = status.Errorf(codes.Unavailable, "the session is live on the sandbox replica at %s, which this gateway cannot reach, and its lease has not lapsed after %s: %v", holder, holderWait, status.Convert(out.Err).Message())
			return out
		}
		addr := replicas.ElsewhereAddress(out.Err)
		if addr == "" || hop >= replicas.MaxHops || t.opts.Elsewhere == nil {
			return out
		}
		c, err := t.opts.Elsewhere(addr)
		if err != nil {
			out.Err = status.Errorf(codes.Unavailable, "the session is live on the sandbox replica at %s, which this gateway cannot reach: %v", addr, err)
			return out
		}
		client, holder = c, addr
	}
}

// holderWait bounds how long a call waits for the lease of a session's
// unreachable holder to lapse (sandboxd's lease is 6s, plus 1s for clock
// skew), asking again every holderRetry.
const (
	holderWait  = 15 * time.Second
	holderRetry = 500 * time.Millisecond
)

// stream makes one Execute call on client and gathers its stream.
func (t *Tool) stream(ctx context.Context, client sandboxv1.SandboxServiceClient, req *sandboxv1.ExecuteRequest, base result.Outcome, progress func(string)) (out result.Outcome) {
	out = base
	stream, err := client.Execute(ctx, req)
	if err != nil {
		out.Err = err
		return out
	}
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
		switch ev := msg.GetEvent().(type) {
		case *sandboxv1.ExecuteResponse_Output:
			if ev.Output.GetStream() == sandboxv1.Stream_STREAM_STDERR {
				stderr.write(ev.Output.GetText())
			} else {
				stdout.write(ev.Output.GetText())
			}
			progress(ev.Output.GetText())
		case *sandboxv1.ExecuteResponse_Display:
			if im, ok := images.admit(ev.Display); ok {
				out.Images = append(out.Images, im)
			}
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
		if time.Since(last) < progressInterval || detach.Gone(ctx) {
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
