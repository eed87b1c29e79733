package lease

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/services/logkeys"
)

// checkpoints is what a lease knows of its session's checkpoints: those
// on their way to the store, and what the session's results are to say of
// them. It is guarded by Lease.mu. The record itself is written only in
// the write turn, by the sandbox's committer (Save), and by Release and
// Clear, whose callers wait for the committer first.
type checkpoints struct {
	// seqs are the checkpoints on their way, oldest first: each the number
	// of execs it reflects. idle (on Lease.mu) is signalled when the list
	// empties.
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
	// unsavedReported are those the caller was told of (name and kind),
	// so that each is said once, not again with every change of the list.
	unsaved         []channel.LostName
	unsavedReported map[[2]string]bool
	// reason says why the session's sandbox went away, for the next
	// restore's report; interrupted that the exec it was running did not
	// finish, so its effects are lost.
	reason      string
	interrupted bool
	// same lets a checkpoint equal to the stored one go unwritten
	// (unchanged.go).
	same unchanged
}

// BeginCheckpoint notes that the exec about to be sent will be followed
// by a checkpoint reflecting seq execs.
func (l *Lease) BeginCheckpoint(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ck.seqs = append(l.ck.seqs, seq)
}

// CancelCheckpoint drops the checkpoint BeginCheckpoint noted last: its
// exec will not be followed by one.
func (l *Lease) CancelCheckpoint() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.ck.seqs); n > 0 {
		l.ck.seqs = l.ck.seqs[:n-1]
	}
	if len(l.ck.seqs) == 0 {
		l.ck.idle.Broadcast()
	}
}

// WaitCommits waits (at most d) for the checkpoints on their way to be
// stored.
func (l *Lease) WaitCommits(d time.Duration) {
	timer := time.AfterFunc(d, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.ck.seqs) > 0 {
			l.logger.Warn("a checkpoint did not finish in time; the session goes on from the one before", "waited", d)
			l.ck.seqs = nil
			l.ck.idle.Broadcast()
		}
	})
	defer timer.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.ck.seqs) > 0 {
		l.ck.idle.Wait()
	}
}

// doneCommit ends the oldest checkpoint on its way. On l.mu.
func (l *Lease) doneCommit() {
	if len(l.ck.seqs) > 0 {
		l.ck.seqs = l.ck.seqs[1:]
	}
	if len(l.ck.seqs) == 0 {
		l.ck.idle.Broadcast()
	}
}

// FailCommits ends the checkpoints that their sandbox's death cut short.
func (l *Lease) FailCommits() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ck.seqs = nil
	l.ck.idle.Broadcast()
}

// Save stores one checkpoint the agent sent (f, its last frame, and the
// chunks of all its frames; a frame whose Error is set is the agent's
// refusal, which is recorded) and reports whether it is stored. limit is
// the cap on a checkpoint; superseded reports whether the reader has seen
// a refusal since f's exec, which is then the news. ErrLost means that
// another replica took the session over: this one must not run on.
func (l *Lease) Save(ctx context.Context, f *channel.Checkpoint, chunks map[string][]byte, limit int64, superseded func(exec int64) bool) (bool, error) {
	l.mu.Lock()
	var seq uint64
	if len(l.ck.seqs) > 0 {
		seq = l.ck.seqs[0]
	}
	// A checkpoint equal to the stored one needs no write (unchanged.go).
	skip := f.Error == "" && l.skipSame(f.Manifest, len(chunks), seq)
	l.mu.Unlock()
	ok, notDurable, why := true, "", ""
	var lost error
	if skip { //nolint:revive // the equal checkpoint is stored already: nothing to write
	} else if f.Error != "" {
		ok, notDurable, why = false, refusedText(f.Error), f.Error
		_ = l.store.NotDurable(ctx, l, f.Error)
	} else if err := l.store.Commit(ctx, l, f.Manifest, chunks, seq, limit); errors.Is(err, ErrLost) {
		l.logger.Warn("the session was taken over by another replica, or ended there; stopping this replica's sandbox for it")
		ok, lost = false, err
	} else if err != nil {
		l.logger.Warn("could not store the session's checkpoint", logkeys.Error, err)
		why = "the checkpoint could not be stored (" + err.Error() + ")"
		ok, notDurable = false, why
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case skip:
	case ok:
		l.stored(f.Manifest, seq)
	default:
		l.stored(nil, 0)
	}
	if !superseded(f.Exec) {
		l.ck.notDurable, l.ck.refusedWhy = notDurable, why
		if ok {
			l.ck.unsaved = unsavedOf(f.Manifest)
		}
	}
	l.doneCommit()
	return ok, lost
}

// refusedText is what a caller is told when the agent refused to take a
// checkpoint.
func refusedText(why string) string {
	return why + "; the session goes on, but if its sandbox stops it comes back from its last stored checkpoint"
}

// NoteRefused records a refusal the sandbox's reader saw before its
// checkpoint frame reached the committer, so that the result that follows
// it reports it.
func (l *Lease) NoteRefused(why string) {
	if why == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ck.notDurable, l.ck.refusedWhy = refusedText(why), why
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

// TakeUncheckpointed returns the names the latest stored checkpoint could
// not hold that the caller has not been told of, to report with a
// result: each once, until it is saved again (or deleted) and comes back.
func (l *Lease) TakeUncheckpointed() []channel.LostName {
	l.mu.Lock()
	defer l.mu.Unlock()
	var fresh []channel.LostName
	now := make(map[[2]string]bool, len(l.ck.unsaved))
	for _, u := range l.ck.unsaved {
		k := [2]string{u.Name, u.Type}
		now[k] = true
		if !l.ck.unsavedReported[k] {
			fresh = append(fresh, u)
		}
	}
	l.ck.unsavedReported = now
	return fresh
}

// TakeNotDurable returns the not-durable reason to report with a result:
// once per change.
func (l *Lease) TakeNotDurable() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ck.notDurable == l.ck.reported {
		return ""
	}
	l.ck.reported = l.ck.notDurable
	return l.ck.notDurable
}

// Loss is why a session's sandbox went away, as its next restore reports
// it.
type Loss struct {
	// Reason says why; Interrupted that the exec the sandbox was running
	// did not finish, so its effects are lost.
	Reason      string
	Interrupted bool
	// RefusedWhy is why the last checkpoint was not stored ("" when it
	// was): the calls since the stored one are lost too.
	RefusedWhy string
}

// Lost records why the session's sandbox went away. A nil lease (a
// session the store does not hold) records nothing.
func (l *Lease) Lost(reason string, interrupted bool) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ck.reason, l.ck.interrupted = reason, interrupted
}

// LossReason says why the session's sandbox went away ("" when it did
// not), as the next restore will.
func (l *Lease) LossReason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ck.reason
}

// Interrupted reports whether the session's sandbox went away in the
// middle of a run (Lost with interrupted, or a run the store says was in
// flight when its holder stopped), as the next restore will report.
func (l *Lease) Interrupted() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ck.interrupted
}

// TakeLoss returns why the session's sandbox went away, for the restore
// about to run, and forgets it (Lost notes it again for a restore that
// could not be made now).
func (l *Lease) TakeLoss() Loss {
	l.mu.Lock()
	defer l.mu.Unlock()
	loss := Loss{Reason: l.ck.reason, Interrupted: l.ck.interrupted, RefusedWhy: l.ck.refusedWhy}
	l.ck.reason, l.ck.interrupted = "", false
	return loss
}

// Checkpoint returns the session's last stored checkpoint (Store.Checkpoint).
func (l *Lease) Checkpoint(ctx context.Context) (State, map[string][]byte, error) {
	return l.store.Checkpoint(ctx, l)
}

// Release gives the session up, so that any replica may take it; why is
// told on its next restore. Its sandbox must be stopped, and its
// committer gone.
func (l *Lease) Release(ctx context.Context, why string) {
	if err := l.store.Release(ctx, l, why); err != nil && !errors.Is(err, ErrLost) {
		l.logger.Warn("could not give the session up; other replicas take it once this one's lease lapses", logkeys.Error, err)
	}
}

// Clear stores an empty checkpoint, which reflects the execs so far
// (none of them is missed by it), and forgets what was to be reported:
// the session's next sandbox starts fresh, with nothing to say. Its
// sandbox must be stopped, and its committer gone. ErrLost means another
// replica took the session over meanwhile.
func (l *Lease) Clear(ctx context.Context, execs uint64) error {
	if err := l.store.Commit(ctx, l, nil, nil, execs, 0); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ck = checkpoints{seqs: l.ck.seqs, idle: l.ck.idle}
	return nil
}
