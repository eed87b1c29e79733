package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
)

// Restore is a checkpoint to restore into a fresh sandbox, and what serves
// the calls the restore makes.
type Restore struct {
	// Manifest names the checkpoint's values; IDs are the chunks it
	// names, in order, and Chunks their bytes.
	Manifest json.RawMessage
	IDs      []string
	Chunks   map[string][]byte
	// Tools are the saved tools fetched for the exec the restore precedes
	// (nil: none fetched).
	Tools []channel.SavedTool
	// Tenant, Env and Calls serve the restore's calls, until Deadline.
	Tenant   string
	Env      *ExecEnv
	Calls    Caller
	Deadline time.Time
}

// ErrInterrupted marks a restore that ctx ended: the checkpoint is intact.
var ErrInterrupted = errors.New("restoring the session")

// Restore sends a checkpoint to the agent and returns its report on the
// restore, and how long calls the restore made were in flight. An error
// that ctx caused wraps ErrInterrupted and ctx's error.
func (sb *Sandbox) Restore(ctx context.Context, r Restore) (*channel.Restored, time.Duration, error) {
	if err := sb.sendRestore(r); err != nil {
		return nil, 0, fmt.Errorf("send the checkpoint to the sandbox: %w", err)
	}
	return sb.awaitRestored(ctx, r)
}

// awaitRestored waits for the agent's report on a restore, and serves the
// calls the restore makes meanwhile: a checkpoint that holds `user_tools`
// (imported, or a function taken from it) rebuilds the module, which asks
// for the saved tools with tool.list. Without an answer the agent would
// wait for it until the restore timed out, on every try, and the session
// could not come back at all. What the restore prints belongs to no exec
// and is dropped, as the exec loop drops output of other execs. The
// calls end by the deadline, the exec's, as the exec's own calls do: a
// class body or an unpickled value that calls a helper gets its error
// then, and the restore goes on. took is how long calls were in flight.
func (sb *Sandbox) awaitRestored(ctx context.Context, r Restore) (_ *channel.Restored, took time.Duration, _ error) {
	// Calls are taken in until the restore ends, so that each gets an
	// answer (one past the deadline, its error), and served until the
	// deadline.
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	serveCtx, cancelServe := context.WithDeadline(callCtx, r.Deadline)
	defer cancelServe()
	var inFlight busyClock
	// The agent's calls carry the id of the last exec it began: the
	// warm-up's in a pooled sandbox, else 0.
	sb.mu.Lock()
	c := call{caller: r.Calls, tenant: r.Tenant, env: r.Env, exec: sb.nextExec, late: channel.Errorf(channel.CodeDeadlineExceeded,
		"timed out: the run_python call's timeout ran out while its session was being restored from its checkpoint, before this call, made by the restore, was answered; pass a larger timeout")}
	sb.mu.Unlock()
	for {
		select {
		case got := <-sb.restored:
			return got, inFlight.total(), nil
		case msg := <-sb.msgs:
			f, ok := msg.(*channel.Call)
			if !ok {
				continue
			}
			sb.startCall(callCtx, func() {
				defer inFlight.begin()()
				sb.serve(serveCtx, c, f)
			})
		case <-sb.dead:
			return nil, 0, fmt.Errorf("the sandbox died while restoring the session: %s", sb.describeDeath())
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
		}
	}
}

// busyClock measures how long at least one of some concurrent tasks was
// running.
type busyClock struct {
	mu    sync.Mutex
	n     int
	since time.Time
	sum   time.Duration
}

// begin notes that a task starts; call what it returns when it ends.
func (c *busyClock) begin() (end func()) {
	c.mu.Lock()
	if c.n == 0 {
		c.since = time.Now()
	}
	c.n++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.n--; c.n == 0 {
			c.sum += time.Since(c.since)
		}
	}
}

// total is the time so far during which a task was running.
func (c *busyClock) total() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n > 0 {
		return c.sum + time.Since(c.since)
	}
	return c.sum
}

// restoreFrameBytes bounds the chunk bytes of one restore frame (blobs,
// raw), so that sandboxd and the agent each hold one modest frame at a
// time; one larger chunk (up to the agent's 32 MiB value cap) goes alone,
// under the channel's 64 MiB frame limit.
const restoreFrameBytes = 24 << 20

func (sb *Sandbox) sendRestore(r Restore) error {
	batch, size := map[string][]byte{}, 0
	for _, id := range r.IDs {
		c := r.Chunks[id]
		if len(batch) > 0 && size+len(c) > restoreFrameBytes {
			if err := sb.conn.Write(&channel.Restore{Chunks: batch}); err != nil {
				return err
			}
			batch, size = map[string][]byte{}, 0
		}
		batch[id], size = c, size+len(c)
	}
	msg := &channel.Restore{Chunks: batch, Last: true, Manifest: r.Manifest, SavedTools: r.Tools}
	err := sb.conn.Write(msg)
	if errors.Is(err, channel.ErrFrameTooLarge) && msg.SavedTools != nil {
		// As sendExec: the agent asks for the tools if it needs them.
		msg.SavedTools = nil
		err = sb.conn.Write(msg)
	}
	return err
}
