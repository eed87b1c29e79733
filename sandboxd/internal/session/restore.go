package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/durable"
)

// RestoreReport is what a fresh sandbox got back from a checkpoint.
type RestoreReport struct {
	// Reason says why the session needed a new sandbox.
	Reason string
	// Names are the names restored.
	Names []string
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
}

// restore rebuilds the session in sb from its last checkpoint, or returns
// nil when there is none. The calls the agent makes while it restores are
// served with env, the environment of the exec the restore precedes, and
// the saved tools fetched for that exec go with the checkpoint.
func (m *Manager) restore(ctx context.Context, s *Session, sb *sandbox, env *ExecEnv, saved *savedTools) (_ *RestoreReport, err error) {
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
	missed := missedCalls(s.Info().ExecCount, held.State.Seq, interrupted)
	if len(held.State.Manifest) == 0 {
		if reason == "" || missed == 0 {
			return nil, nil // nothing was lost, so there is nothing to say
		}
		// No checkpoint to restore, though calls ran: their effects are
		// gone, and the session must not look as if it went on.
		return &RestoreReport{Reason: reason, RolledBack: interrupted, Calls: held.State.Seq, Missed: missed, MissedWhy: why}, nil
	}
	chunks, err := m.cfg.Durable.Sessions.Chunks(ctx, held)
	if err != nil {
		return nil, fmt.Errorf("%w: read the session's checkpoint: %w", errRestoreLater, err)
	}
	if err := sendRestore(sb, held, chunks, saved.wait(ctx, s)); err != nil {
		return nil, fmt.Errorf("send the checkpoint to the sandbox: %w", err)
	}
	got, err := m.awaitRestored(ctx, s, sb, env)
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
	return &RestoreReport{Reason: reason, Names: r.Restored, Lost: lost, RolledBack: interrupted, Calls: held.State.Seq, Missed: missed, MissedWhy: why}, nil
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
// and is dropped, as the exec loop drops output of other execs.
func (m *Manager) awaitRestored(ctx context.Context, s *Session, sb *sandbox, env *ExecEnv) (*channel.Restored, error) {
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	// The agent's calls carry the id of the last exec it began: the
	// warm-up's in a pooled sandbox, else 0.
	sb.mu.Lock()
	last := sb.nextExec
	sb.mu.Unlock()
	for {
		select {
		case got := <-sb.restored:
			return got, nil
		case msg := <-sb.msgs:
			call, ok := msg.(*channel.Call)
			if !ok {
				continue
			}
			sb.startCall(callCtx, func() { m.serveCall(callCtx, sb, s.tenant, env, last, call) })
		case <-sb.dead:
			return nil, fmt.Errorf("the sandbox died while restoring the session: %s", sb.describeDeath())
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: restoring the session: %w", errRestoreLater, ctx.Err())
		}
	}
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

func sendRestore(sb *sandbox, held *durable.Held, chunks map[string][]byte, tools []channel.SavedTool) error {
	batch, size := map[string][]byte{}, 0
	for _, id := range durable.ChunkIDs(held.State.Manifest) {
		c := chunks[id]
		if len(batch) > 0 && size+len(c) > restoreFrameBytes {
			if err := sb.conn.Write(&channel.Restore{Chunks: batch}); err != nil {
				return err
			}
			batch, size = map[string][]byte{}, 0
		}
		batch[id], size = c, size+len(c)
	}
	msg := &channel.Restore{Chunks: batch, Last: true, Manifest: held.State.Manifest, SavedTools: tools}
	err := sb.conn.Write(msg)
	if errors.Is(err, channel.ErrFrameTooLarge) && msg.SavedTools != nil {
		// As sendExec: the agent asks for the tools if it needs them.
		msg.SavedTools = nil
		err = sb.conn.Write(msg)
	}
	return err
}
