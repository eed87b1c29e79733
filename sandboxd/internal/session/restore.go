package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/lease"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
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
	// Environment says what changed when the checkpoint was made in
	// another environment than the one it is restored into, or "".
	Environment string
	// Fresh is set when the checkpoint could not be restored (Reason says
	// why) and the session started fresh: nothing came back.
	Fresh bool
	// callsTook is how long calls the restore made were in flight: the
	// call's time, not the restore's.
	callsTook time.Duration
}

// restoreGrace is how long a restore may take past its call's deadline,
// at which the calls it makes end: to finish without what they failed to
// get (a class body that catches the error goes on).
const restoreGrace = 5 * time.Second

// errRestoreLater marks a restore that failed for a reason of the moment
// (the store, the time left): the checkpoint is intact and is kept, and
// the call fails rather than start the session afresh.
var errRestoreLater = errors.New("the session could not be restored now")

// restore rebuilds the durable session in sb from its last checkpoint, or
// returns nil when there is none. The calls the agent makes while it
// restores are served with env, the environment of the exec the restore
// precedes, and the saved tools fetched for that exec go with the
// checkpoint. Those calls end by the exec's deadline.
func (s *Session) restore(ctx context.Context, sb *sandbox.Sandbox, env *sandbox.ExecEnv, saved *savedTools, deadline time.Time) (_ *RestoreReport, err error) {
	started := time.Now()
	s.lease.WaitCommits(s.m.cfg.StartTimeout)
	loss := s.lease.TakeLoss()
	defer func() {
		if errors.Is(err, errRestoreLater) { // the next try reports them
			s.lease.Lost(loss.Reason, loss.Interrupted)
		}
	}()
	st, chunks, err := s.lease.Checkpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: read the session's checkpoint: %w", errRestoreLater, err)
	}
	st.Seq = s.lease.HeldSeq(st.Manifest, st.Seq) // equal checkpoints went unwritten
	report := &RestoreReport{Reason: loss.Reason, RolledBack: loss.Interrupted, Calls: st.Seq, MissedWhy: loss.RefusedWhy,
		Missed: missedCalls(s.Info().ExecCount, st.Seq, loss.Interrupted)}
	if len(st.Manifest) == 0 {
		if loss.Reason == "" || report.Missed == 0 {
			return nil, nil // nothing was lost, so there is nothing to say
		}
		// No checkpoint to restore, though calls ran: their effects are
		// gone, and the session must not look as if it went on.
		return report, nil
	}
	// The restore ends with the call's time: code that the checkpoint runs
	// as it loads (an unpickled value, a class body) may block, and would
	// otherwise hold every call of the session until the start's own
	// bound, and again on the next. Its calls end at the deadline; it gets
	// restoreGrace more to finish without them.
	rctx, cancel := context.WithDeadline(ctx, deadline.Add(restoreGrace))
	defer cancel()
	got, took, err := sb.Restore(rctx, sandbox.Restore{
		Manifest: st.Manifest, IDs: lease.ChunkIDs(st.Manifest), Chunks: chunks, Tools: saved.wait(ctx, s),
		Tenant: s.tenant, Env: env, Calls: s.m.cfg.Broker, Deadline: deadline,
	})
	if errors.Is(err, sandbox.ErrInterrupted) && ctx.Err() == nil {
		return nil, fmt.Errorf("the session's checkpoint did not finish restoring within the call's timeout of %s (and %s more): code it runs as it loads (an unpickled value, a class body) blocked or was too slow",
			deadline.Sub(started).Round(time.Second), restoreGrace)
	}
	if errors.Is(err, sandbox.ErrInterrupted) {
		return nil, fmt.Errorf("%w: %w", errRestoreLater, err)
	}
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
	report.Names, report.Files, report.Lost, report.callsTook = r.Restored, r.Files, lost, took
	report.Environment = s.m.envChange(st.Env)
	return report, nil
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
