package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/durable"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Durability makes sessions outlive their sandboxes (see package durable):
// each exec is followed by a checkpoint of the session's namespace, taken
// by the agent after the result is out and stored in the session store;
// a session whose sandbox is gone gets a fresh one with the checkpoint
// restored into it, on this replica or any other.
type Durability struct {
	Sessions *durable.Sessions
	Replica  *durable.Replica
	// CheckpointBytes caps one checkpoint; a larger state is reported as
	// not durable.
	CheckpointBytes int64
	// WorkspaceBytes caps the bytes of /workspace's files a checkpoint
	// holds on top of CheckpointBytes; files over it are named, not
	// kept. Zero keeps no files.
	WorkspaceBytes int64
}

// storeCap is the most bytes of chunks one session holds in the store:
// its values and its files.
func (d *Durability) storeCap() int64 { return d.CheckpointBytes + d.WorkspaceBytes }

// DefaultCheckpointBytes is the default cap on a checkpoint. It is the
// suite's gRPC message limit: far above what a notebook-style session
// holds (a checkpoint keeps only what changed, and values once), an eighth
// of the default sandbox memory, and small enough that storing and
// restoring it stays under a second.
const DefaultCheckpointBytes = 64 << 20

// ElsewhereError says that the session is live on another replica.
type ElsewhereError struct {
	Replica, Address string
}

func (e *ElsewhereError) Error() string {
	return fmt.Sprintf("the session is live on sandbox replica %s (%s)", e.Replica, e.Address)
}

// dstate is a session's durable part, guarded by Session.dmu. Its held
// record is written only by the sandbox's committer goroutine, and by
// release and claim, which wait for the committer first.
type dstate struct {
	held *durable.Held
	// seqs are the checkpoints on their way, oldest first: each the number
	// of execs it reflects. idle (on Session.dmu) is signalled when the
	// list empties.
	seqs []uint64
	idle *sync.Cond
	// notDurable is why the last checkpoint failed ("" when it was
	// stored); reported is what the caller was last told.
	notDurable, reported string
	// refusedWhy is why the last checkpoint was not stored, as the agent
	// or the store said it ("" once one is): a restore says it when the
	// calls since the stored checkpoint are lost with the sandbox.
	refusedWhy string
	// unsaved are the names the last stored checkpoint could not hold;
	// unsavedReported is what the caller was last told of them.
	unsaved         []channel.LostName
	unsavedReported string
	// reason says why the session's sandbox went away, for the next
	// restore's report; interrupted that the exec it was running did not
	// finish, so its effects are lost.
	reason      string
	interrupted bool
	// same lets a checkpoint equal to the stored one go unwritten.
	same unchanged
}

// durableReason says why a session just claimed from the store needs a
// new sandbox.
func durableReason(h *durable.Held) string {
	switch {
	case h.Before.Owner != "":
		return "the sandbox service that held it went away"
	case h.Before.Stopped != "":
		return h.Before.Stopped
	}
	return "its sandbox was gone"
}

// cancelCheckpoint drops the checkpoint beginCheckpoint noted last: its
// exec will not be followed by one.
func (s *Session) cancelCheckpoint() {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if n := len(s.d.seqs); n > 0 {
		s.d.seqs = s.d.seqs[:n-1]
	}
	if len(s.d.seqs) == 0 {
		s.d.idle.Broadcast()
	}
}

// beginCheckpoint notes that the exec about to be sent will be followed by
// a checkpoint reflecting seq execs.
func (s *Session) beginCheckpoint(seq uint64) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.d.seqs = append(s.d.seqs, seq)
}

// waitCommit waits (at most d) for the checkpoints on their way to be
// stored.
func (s *Session) waitCommit(d time.Duration) {
	timer := time.AfterFunc(d, func() {
		s.dmu.Lock()
		defer s.dmu.Unlock()
		if len(s.d.seqs) > 0 {
			s.logger().Warn("a checkpoint did not finish in time; the session goes on from the one before", "waited", d)
			s.d.seqs = nil
			s.d.idle.Broadcast()
		}
	})
	defer timer.Stop()
	s.dmu.Lock()
	defer s.dmu.Unlock()
	for len(s.d.seqs) > 0 {
		s.d.idle.Wait()
	}
}

// doneCommit ends the oldest checkpoint on its way.
func (s *Session) doneCommit() {
	if len(s.d.seqs) > 0 {
		s.d.seqs = s.d.seqs[1:]
	}
	if len(s.d.seqs) == 0 {
		s.d.idle.Broadcast()
	}
}

// commitLoop stores the checkpoints the agent of sb sends, one after the
// other, until the sandbox ends.
func (m *Manager) commitLoop(s *Session, sb *sandbox) {
	defer close(sb.committed)
	chunks := map[string][]byte{}
	// The agent keeps to the cap, but code in the sandbox can write frames
	// of its own: sandboxd holds no more than the cap for one checkpoint.
	size, limit := 0, int(m.cfg.Durable.storeCap())
	for {
		var f *channel.Checkpoint
		select {
		case f = <-sb.ckpts:
		case <-sb.dead:
			// The reader sent every frame it read before the channel
			// ended: a checkpoint that arrived whole is stored even
			// though its sandbox is gone, since it is the state to
			// restore.
			select {
			case f = <-sb.ckpts:
			default:
				m.failCommit(s)
				return
			}
		}
		for id, c := range f.Chunks {
			if size <= limit {
				chunks[id] = c
				size += len(c)
			}
		}
		if size > limit {
			clear(chunks)
		}
		if !f.Last {
			continue
		}
		if size > limit {
			f = &channel.Checkpoint{Exec: f.Exec, Last: true,
				Error: fmt.Sprintf("the checkpoint sent was over the %d-byte cap (CODEEXEC_CHECKPOINT_BYTES)", limit)}
		}
		ok := m.commit(s, sb, f, chunks)
		clear(chunks)
		size = 0
		_ = sb.conn.Write(&channel.Checkpointed{Exec: f.Exec, OK: ok})
	}
}

// commit stores one checkpoint and reports whether it is stored.
func (m *Manager) commit(s *Session, sb *sandbox, f *channel.Checkpoint, chunks map[string][]byte) bool {
	s.dmu.Lock()
	held := s.d.held
	var seq uint64
	if len(s.d.seqs) > 0 {
		seq = s.d.seqs[0]
	}
	// A checkpoint equal to the stored one needs no write (unchanged.go).
	skip := f.Error == "" && s.skipSame(f.Manifest, len(chunks), seq, m.cfg.Durable.maxUnwritten())
	s.dmu.Unlock()
	ok, notDurable, why := true, "", ""
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StartTimeout)
	defer cancel()
	if skip { //nolint:revive // the equal checkpoint is stored already: nothing to write
	} else if f.Error != "" {
		ok, notDurable, why = false, refusedText(f.Error), f.Error
		_ = m.cfg.Durable.Sessions.NotDurable(ctx, held, f.Error)
	} else if err := m.cfg.Durable.Sessions.Commit(ctx, held, f.Manifest, chunks, seq, m.cfg.Durable.storeCap()); errors.Is(err, durable.ErrLost) {
		// Another replica took the session: this copy must not run on.
		s.logger().Warn("the session was taken over by another replica, or ended there; stopping this replica's sandbox for it")
		go func() { sb.kill(); m.forget(s) }()
		ok = false
	} else if err != nil {
		s.logger().Warn("could not store the session's checkpoint", logkeys.Error, err)
		why = "the checkpoint could not be stored (" + err.Error() + ")"
		ok, notDurable = false, why
	}
	s.dmu.Lock()
	defer s.dmu.Unlock()
	switch {
	case skip:
	case ok:
		s.stored(f.Manifest, seq)
	default:
		s.stored(nil, 0)
	}
	if !sb.supersededBy(f.Exec) {
		s.d.notDurable, s.d.refusedWhy = notDurable, why
		if ok {
			s.d.unsaved = unsavedOf(f.Manifest)
		}
	}
	s.doneCommit()
	return ok
}

// failCommit ends the checkpoints that their sandbox's death cut short.
func (m *Manager) failCommit(s *Session) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.d.seqs = nil
	s.d.idle.Broadcast()
}

// refusedText is what a caller is told when the agent refused to take a
// checkpoint.
func refusedText(why string) string {
	return why + "; the session goes on, but if its sandbox stops it comes back from its last stored checkpoint"
}

// noteRefused records a refusal the sandbox's reader saw before its
// checkpoint frame reached the committer, so that the result that follows
// it reports it.
func (s *Session) noteRefused(why string) {
	if why == "" {
		return
	}
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.d.notDurable, s.d.refusedWhy = refusedText(why), why
}

// unsavedOf returns the names a checkpoint's manifest lists as not held
// (the agent could not pickle them). A manifest that does not parse lists
// none: the restore, which reads it whole, reports what it finds.
func unsavedOf(manifest []byte) []channel.LostName {
	var m struct {
		Unsaved []channel.LostName `json:"unsaved"`
	}
	if json.Unmarshal(manifest, &m) != nil {
		return nil
	}
	return m.Unsaved
}

// takeUncheckpointed returns the names the latest stored checkpoint could
// not hold, to report with a result: once per change of the list, and
// nothing once it is empty again.
func (s *Session) takeUncheckpointed() []channel.LostName {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	var key strings.Builder
	for _, u := range s.d.unsaved {
		key.WriteString(u.Name + "\x00" + u.Type + "\x00")
	}
	if key.String() == s.d.unsavedReported {
		return nil
	}
	s.d.unsavedReported = key.String()
	return slices.Clone(s.d.unsaved)
}

// takeNotDurable returns the not-durable reason to report with a result:
// once per change.
func (s *Session) takeNotDurable() string {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.d.notDurable == s.d.reported {
		return ""
	}
	s.d.reported = s.d.notDurable
	return s.d.notDurable
}

// lost records why the session's sandbox went away.
func (s *Session) lost(reason string, interrupted bool) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.d.reason, s.d.interrupted = reason, interrupted
}

// release stops a durable session's sandbox and gives the session up, so
// that any replica may take it; why is told on its next restore.
func (m *Manager) release(ctx context.Context, s *Session, why string) {
	s.waitCommit(m.cfg.StartTimeout)
	s.stopSandbox()
	s.dmu.Lock()
	held := s.d.held
	s.dmu.Unlock()
	if held != nil {
		if err := m.cfg.Durable.Sessions.Release(ctx, held, why); err != nil && !errors.Is(err, durable.ErrLost) {
			s.logger().Warn("could not give the session up; other replicas take it once this one's lease lapses", logkeys.Error, err)
		}
	}
	m.forget(s)
}

// waitCommitter waits (bounded) for the committer of sb, a sandbox of
// durable session s that was stopped, to return: so that nothing it still
// stores lands after what the caller writes next.
func (m *Manager) waitCommitter(s *Session, sb *sandbox) {
	select {
	case <-sb.committed:
	case <-time.After(m.cfg.StartTimeout):
		s.logger().Warn("the committer of a stopped sandbox did not return in time", "waited", m.cfg.StartTimeout)
	}
}

// clearCheckpoint stores an empty checkpoint for s, whose sandbox is
// stopped: its next sandbox starts fresh, with nothing to report.
func (m *Manager) clearCheckpoint(ctx context.Context, s *Session) error {
	s.dmu.Lock()
	held := s.d.held
	s.dmu.Unlock()
	// The session's turn is held and its committer gone: nothing else
	// writes held now.
	// It reflects every exec so far: none of them is missed by it.
	err := m.cfg.Durable.Sessions.Commit(ctx, held, nil, nil, s.Info().ExecCount, 0)
	if errors.Is(err, durable.ErrLost) {
		m.forget(s)
		return fmt.Errorf("%w: session %s was taken over by another sandbox replica meanwhile; reset it again", ErrNotFound, s.id)
	}
	if err != nil {
		return fmt.Errorf("clear the session's checkpoint: %w", err)
	}
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.d.reason, s.d.interrupted, s.d.notDurable, s.d.reported, s.d.refusedWhy = "", false, "", "", ""
	s.d.unsaved, s.d.unsavedReported = nil, ""
	s.stored(nil, 0)
	return nil
}

// current reports whether s is still the manager's session of its ID.
func (m *Manager) current(s *Session) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[s.id] == s
}

// forget drops s from the manager, if it is still the session of its ID.
func (m *Manager) forget(s *Session) {
	m.mu.Lock()
	if m.sessions[s.id] == s {
		delete(m.sessions, s.id)
	}
	m.mu.Unlock()
	// Calls held by a fence go on, and take the session from the store.
	s.mu.Lock()
	s.releaseHoldLocked()
	s.mu.Unlock()
}
