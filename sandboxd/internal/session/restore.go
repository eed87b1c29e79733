package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/durable"
)

// RestoreReport is what a fresh sandbox got back from a checkpoint.
type RestoreReport struct {
	// Reason says why the session needed a new sandbox.
	Reason string
	// Names are the names restored.
	Names []string
	// Files are the paths of the workspace's files restored.
	Files []string
	// Lost are the names that did not come back.
	Lost []channel.LostName
	// RolledBack is set when the call before did not finish.
	RolledBack bool
	// Calls counts the calls the checkpoint reflects.
	Calls uint64
	// Missed counts the calls that finished after the checkpoint but are
	// not in it (their checkpoints were refused or not stored), so their
	// effects are gone; MissedWhy is why the last of them was not stored.
	Missed    uint64
	MissedWhy string
	// callsTook is how long calls the restore made were in flight: the
	// call's time, not the restore's.
	callsTook time.Duration
}

// restore rebuilds the session in sb from its last checkpoint, or returns
// nil when there is none. The calls the agent makes while it restores are
// served with env, the environment of the exec the restore precedes, and
// the saved tools fetched for that exec go with the checkpoint. Those
// calls end by the exec's deadline.
func (m *Manager) restore(ctx context.Context, s *Session, sb *sandbox, env *ExecEnv, saved *savedTools, deadline time.Time) (_ *RestoreReport, err error) {
	s.waitCommit(m.cfg.StartTimeout)
	s.dmu.Lock()
	held, reason, interrupted, why := s.d.held, s.d.reason, s.d.interrupted, s.d.refusedWhy
	s.d.reason, s.d.interrupted = "", false
	s.dmu.Unlock()
	defer func() {
		if errors.Is(err, errRestoreLater) { // the next try reports them
			s.lost(reason, interrupted)
		}
	}()
	if held == nil {
		return nil, nil
	}
	st, chunks, err := m.cfg.Durable.Sessions.Checkpoint(ctx, held)
	if err != nil {
		return nil, fmt.Errorf("%w: read the session's checkpoint: %w", errRestoreLater, err)
	}
	s.dmu.Lock()
	st.Seq = s.heldSeq(st.Manifest, st.Seq) // equal checkpoints went unwritten
	s.dmu.Unlock()
	missed := missedCalls(s.Info().ExecCount, st.Seq, interrupted)
	if len(st.Manifest) == 0 {
		if reason == "" || missed == 0 {
			return nil, nil // nothing was lost, so there is nothing to say
		}
		// No checkpoint to restore, though calls ran: their effects are
		// gone, and the session must not look as if it went on.
		return &RestoreReport{Reason: reason, RolledBack: interrupted, Calls: st.Seq, Missed: missed, MissedWhy: why}, nil
	}
	if err := sendRestore(sb, st.Manifest, chunks, saved.wait(ctx, s)); err != nil {
		return nil, fmt.Errorf("send the checkpoint to the sandbox: %w", err)
	}
	got, took, err := m.awaitRestored(ctx, s, sb, env, deadline)
	if err != nil {
		return nil, err
	}
	r := got.Report
	if r.Error != "" {
		return nil, fmt.Errorf("the checkpoint could not be restored: %s", r.Error)
	}
	lost := append(append([]channel.LostName{}, r.Unsaved...), r.Failed...)
	for i := range lost[len(r.Unsaved):] {
		lost[len(r.Unsaved)+i].Type = "not restored"
	}
	return &RestoreReport{Reason: reason, Names: r.Restored, Files: r.Files, Lost: lost, RolledBack: interrupted, Calls: st.Seq, Missed: missed, MissedWhy: why, callsTook: took}, nil
}

// missedCalls counts the calls a checkpoint reflecting seq of the
// session's execs finished calls does not hold, leaving out the last one
// when it was interrupted (it is rolled back, and reported as such).
func missedCalls(execs, seq uint64, interrupted bool) uint64 {
	if interrupted && execs > 0 {
		execs--
	}
	if execs <= seq {
		return 0
	}
	return execs - seq
}

// awaitRestored waits for the agent's report on a restore, and serves the
// calls the restore makes meanwhile: a checkpoint that holds `user_tools`
// (imported, or a function taken from it) rebuilds the module, which asks
// for the saved tools with tool.list. Without an answer the agent would
// wait for it until the restore timed out, on every try, and the session
// could not come back at all. What the restore prints belongs to no exec
// and is dropped, as the exec loop drops output of other execs. The
// calls end by deadline, the exec's, as the exec's own calls do: a class
// body or an unpickled value that calls a helper gets its error then, and
// the restore goes on. took is how long calls were in flight.
func (m *Manager) awaitRestored(ctx context.Context, s *Session, sb *sandbox, env *ExecEnv, deadline time.Time) (_ *channel.Restored, took time.Duration, _ error) {
	// Calls are taken in until the restore ends, so that each gets an
	// answer (one past the deadline, its error), and served until the
	// deadline.
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	serveCtx, cancelServe := context.WithDeadline(callCtx, deadline)
	defer cancelServe()
	late := channel.Errorf(channel.CodeDeadlineExceeded,
		"timed out: the run_python call's timeout ran out while its session was being restored from its checkpoint, before this call, made by the restore, was answered; pass a larger timeout")
	var inFlight busyClock
	// The agent's calls carry the id of the last exec it began: the
	// warm-up's in a pooled sandbox, else 0.
	sb.mu.Lock()
	last := sb.nextExec
	sb.mu.Unlock()
	for {
		select {
		case got := <-sb.restored:
			return got, inFlight.total(), nil
		case msg := <-sb.msgs:
			call, ok := msg.(*channel.Call)
			if !ok {
				continue
			}
			sb.startCall(callCtx, func() {
				defer inFlight.begin()()
				m.serveCall(serveCtx, sb, s.tenant, env, last, call, late)
			})
		case <-sb.dead:
			return nil, 0, fmt.Errorf("the sandbox died while restoring the session: %s", sb.describeDeath())
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("%w: restoring the session: %w", errRestoreLater, ctx.Err())
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

// errRestoreLater marks a restore that failed for a reason of the moment
// (the store, the time left): the checkpoint is intact and is kept, and
// the call fails rather than start the session afresh.
var errRestoreLater = errors.New("the session could not be restored now")

// restoreFrameBytes bounds the chunk bytes of one restore frame (blobs,
// raw), so that sandboxd and the agent each hold one modest frame at a
// time; one larger chunk (up to the agent's 32 MiB value cap) goes alone,
// under the channel's 64 MiB frame limit.
const restoreFrameBytes = 24 << 20

func sendRestore(sb *sandbox, manifest json.RawMessage, chunks map[string][]byte, tools []channel.SavedTool) error {
	batch, size := map[string][]byte{}, 0
	for _, id := range durable.ChunkIDs(manifest) {
		c := chunks[id]
		if len(batch) > 0 && size+len(c) > restoreFrameBytes {
			if err := sb.conn.Write(&channel.Restore{Chunks: batch}); err != nil {
				return err
			}
			batch, size = map[string][]byte{}, 0
		}
		batch[id], size = c, size+len(c)
	}
	msg := &channel.Restore{Chunks: batch, Last: true, Manifest: manifest, SavedTools: tools}
	err := sb.conn.Write(msg)
	if errors.Is(err, channel.ErrFrameTooLarge) && msg.SavedTools != nil {
		// As sendExec: the agent asks for the tools if it needs them.
		msg.SavedTools = nil
		err = sb.conn.Write(msg)
	}
	return err
}
