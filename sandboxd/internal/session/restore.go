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
}

// restore rebuilds the session in sb from its last checkpoint, or returns
// nil when there is none.
func (m *Manager) restore(ctx context.Context, s *Session, sb *sandbox) (_ *RestoreReport, err error) {
	s.waitCommit(m.cfg.StartTimeout)
	s.dmu.Lock()
	held, reason, interrupted := s.d.held, s.d.reason, s.d.interrupted
	s.d.reason, s.d.interrupted = "", false
	s.dmu.Unlock()
	defer func() {
		if errors.Is(err, errRestoreLater) { // the next try reports them
			s.lost(reason, interrupted)
		}
	}()
	if held == nil || len(held.State.Manifest) == 0 {
		return nil, nil
	}
	chunks, err := m.cfg.Durable.Sessions.Chunks(ctx, held)
	if err != nil {
		return nil, fmt.Errorf("%w: read the session's checkpoint: %w", errRestoreLater, err)
	}
	if err := sendRestore(sb, held, chunks); err != nil {
		return nil, fmt.Errorf("send the checkpoint to the sandbox: %w", err)
	}
	var got *channel.Restored
	select {
	case got = <-sb.restored:
	case <-sb.dead:
		return nil, fmt.Errorf("the sandbox died while restoring the session: %s", sb.describeDeath())
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: restoring the session: %w", errRestoreLater, ctx.Err())
	}
	r := got.Report
	if r.Error != "" {
		return nil, fmt.Errorf("the checkpoint could not be restored: %s", r.Error)
	}
	lost := append(append([]channel.LostName{}, r.Unsaved...), r.Failed...)
	for i := range lost[len(r.Unsaved):] {
		lost[len(r.Unsaved)+i].Type = "not restored"
	}
	return &RestoreReport{Reason: reason, Names: r.Restored, Lost: lost, RolledBack: interrupted, Calls: held.State.Seq}, nil
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

func sendRestore(sb *sandbox, held *durable.Held, chunks map[string][]byte) error {
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
	return sb.conn.Write(&channel.Restore{Chunks: batch, Last: true, Manifest: held.State.Manifest})
}
