package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/lease"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/services/logkeys"
)

// ensureSandbox returns the live sandbox, starting one if needed; a
// durable session's new sandbox gets the last checkpoint restored into it
// (env serves the restore's calls, until the call's deadline; saved is the
// exec's fetch of the saved tools), and the report says what came back.
func (s *Session) ensureSandbox(ctx context.Context, env *sandbox.ExecEnv, saved *savedTools, deadline time.Time) (*sandbox.Sandbox, *RestoreReport, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: session %s was destroyed", ErrNotFound, s.id)
	}
	sb := s.sb
	s.mu.Unlock()
	if sb != nil && sb.Alive() {
		return sb, nil, nil
	}
	if sb != nil {
		sb.Kill()
	}
	if s.lease != nil && s.m.cfg.Durable.Store.Replica().Fenced() {
		// No new sandbox while another replica may take the session.
		return nil, nil, fmt.Errorf("%w: this sandbox replica cannot reach the session store, so it starts no sandbox for the session until it does; retry the call", ErrPaused)
	}
	sb, err := s.newSandbox(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A fence that comes during the restore pauses this sandbox too.
	s.setStarting(sb)
	defer s.setStarting(nil)
	var report *RestoreReport
	if s.lease != nil {
		if sb, report, err = s.restoreInto(ctx, sb, env, saved, deadline); err != nil {
			return nil, nil, err
		}
	}
	return s.install(sb, report)
}

// newSandbox makes room for a sandbox and takes one.
func (s *Session) newSandbox(ctx context.Context) (*sandbox.Sandbox, error) {
	place, err := s.m.room.Make(ctx, s)
	if err != nil {
		return nil, err
	}
	sb, err := s.m.pool.Take(ctx, s.tenant)
	if err != nil {
		place(nil)
		return nil, err
	}
	place(sb)
	return sb, nil
}

// restoreInto starts the committer of sb, a durable session's new
// sandbox, and restores the session's checkpoint into it. A restore that
// fails for good leaves the session a fresh sandbox instead, and a report
// that says so; one that may work later fails the call.
func (s *Session) restoreInto(ctx context.Context, sb *sandbox.Sandbox, env *sandbox.ExecEnv, saved *savedTools, deadline time.Time) (*sandbox.Sandbox, *RestoreReport, error) {
	go s.commitLoop(sb)
	report, err := s.restore(ctx, sb, env, saved, deadline)
	switch {
	case err == nil:
		return sb, report, nil
	case errors.Is(err, errRestoreLater):
		sb.Kill()
		return nil, nil, fmt.Errorf("%w; its checkpoint is kept: retry the call", err)
	case s.lease.Held():
		// A fence paused the restore: starting fresh would overwrite
		// the checkpoint with nothing.
		sb.Kill()
		return nil, nil, fmt.Errorf("%w: this sandbox replica lost the session store while it restored the session (%w); its checkpoint is kept: retry the call", ErrPaused, err)
	}
	// A namespace half restored would mislead: start clean, and say what
	// happened. The checkpoint goes too: restored again (the next time the
	// sandbox stops before a checkpoint replaces it) it would fail again,
	// or block again.
	s.logger().WarnContext(ctx, "could not restore the session; it starts fresh", logkeys.Error, err)
	report = &RestoreReport{Reason: err.Error(), Fresh: true}
	sb.Kill() // its place goes once it is reaped
	s.waitCommitter(sb)
	if cerr := s.lease.Clear(ctx, s.Info().ExecCount); errors.Is(cerr, lease.ErrLost) {
		return nil, nil, fmt.Errorf("%w: the session was taken over by another replica while its restore failed here (%w)", ErrNotFound, err)
	} else if cerr != nil {
		s.logger().WarnContext(ctx, "could not clear the checkpoint that failed to restore; the next restore tries it again", logkeys.Error, cerr)
	}
	if sb, err = s.newSandbox(ctx); err != nil {
		return nil, nil, err
	}
	s.setStarting(sb)
	go s.commitLoop(sb)
	return sb, report, nil
}

// install makes sb the session's sandbox.
func (s *Session) install(sb *sandbox.Sandbox, report *RestoreReport) (*sandbox.Sandbox, *RestoreReport, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		go sb.Kill()
		return nil, nil, fmt.Errorf("%w: session %s was destroyed", ErrNotFound, s.id)
	}
	s.sb = sb
	s.generation++
	s.mu.Unlock()
	// A fence that came while the sandbox started holds it as the others:
	// the call waits in it for the store.
	if err := s.lease.PauseIfHeld(sb); err != nil {
		s.stopSandbox()
		return nil, nil, fmt.Errorf("%w: the session's sandbox started as this replica lost the session store, and it could not be paused (%w); retry the call", ErrPaused, err)
	}
	return sb, report, nil
}

// commitLoop stores the checkpoints the agent of sb sends, one after the
// other, until the sandbox ends.
func (s *Session) commitLoop(sb *sandbox.Sandbox) {
	// The store holds a session to its values' cap and its files' together.
	limit := s.m.cfg.Durable.storeCap()
	sb.Checkpoints(limit, func(f *channel.Checkpoint, chunks map[string][]byte) bool {
		ctx, cancel := context.WithTimeout(context.Background(), s.m.cfg.StartTimeout)
		defer cancel()
		ok, err := s.lease.Save(ctx, f, chunks, limit, sb.SupersededBy)
		if errors.Is(err, lease.ErrLost) {
			// Another replica took the session: this copy must not run on.
			go func() { sb.Kill(); s.m.forget(s) }()
		}
		return ok
	}, s.lease.FailCommits)
}

// waitCommitter waits (bounded) for the committer of sb, a sandbox of the
// durable session that was stopped, to return: so that nothing it still
// stores lands after what the caller writes next.
func (s *Session) waitCommitter(sb *sandbox.Sandbox) {
	if !sb.WaitCommitter(s.m.cfg.StartTimeout) {
		s.logger().Warn("the committer of a stopped sandbox did not return in time", "waited", s.m.cfg.StartTimeout)
	}
}
