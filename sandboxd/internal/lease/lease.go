// Package lease keeps a session's hold on the session store (memoryd's
// SessionStoreService), which lets the session outlive its sandbox: a
// record per session naming the replica that holds it live and the
// manifest of its last checkpoint, the checkpoint's chunks, and this
// replica's heartbeat.
//
// Ownership is a lease. A replica takes a session by a compare-and-swap on
// its record (bumping its epoch), and keeps it while its own heartbeat is
// fresh (Replica). Another replica may take the session over only when
// that heartbeat has expired, or when the owner is on the same host and
// its process is gone; the owner, for its part, stops running its sessions
// before its heartbeat could expire (Fence). So there is never more than
// one live sandbox for a session, and a replica that lost a session cannot
// commit a checkpoint for it: the compare-and-swap fails.
//
// A Lease is one session's: it owns holding the session (pausing its
// sandbox while the store is out of reach), settling (rewriting the record
// once the store is back, and learning whether a write whose answer was
// lost was stored), committing checkpoints, and releasing the session for
// any replica to take. The Store makes leases: it creates and claims
// sessions, and finds their holders.
package lease

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Lease is a session this replica holds: its record as this replica last
// wrote it, and what the session does with it.
type Lease struct {
	Tenant, Handle string
	// State is the record as this replica last wrote it; read it only in
	// the write turn (or before the lease is shared).
	State State
	// Before is the session as it was when this replica took it: the
	// replica that had held it (Before.Owner, "" when it had been given
	// up) and why it stopped (Before.Stopped).
	Before State

	store  *Store
	logger *slog.Logger
	owner  Owner

	// turn makes this replica's writes of the record one at a time (each
	// is a compare-and-swap on revision, the one the last wrote), and a
	// writer waiting for it gives up when its context ends.
	turn     chan struct{}
	revision uint64
	// doubt is this replica's last write of the record when its answer
	// did not come (its deadline ran out, the connection broke): the
	// store may have stored it or not. The next read of the record tells
	// (settleDoubt).
	doubt *doubtfulWrite

	// mu guards the checkpoints on their way and what is to be reported
	// of them (checkpoints.go).
	mu sync.Mutex
	ck checkpoints

	// holdMu orders a hold's pause and its settling's resume; hmu guards
	// held and paused (hold.go).
	holdMu sync.Mutex
	hmu    sync.Mutex
	held   chan struct{}
	paused Pausable
}

// Owner is the session a lease belongs to, as the lease's fence needs it.
type Owner interface {
	// Sandbox returns the session's sandbox to pause: its live one, else
	// the one starting for it; nil when it has none.
	Sandbox() Pausable
	// Drop ends the session on this replica (its record stays, for the
	// replica that took it): its sandbox stops, and why, when set, is what
	// a call in flight there is told.
	Drop(why string)
	// StopSandbox stops the session's sandbox; the session stays.
	StopSandbox()
}

// Pausable is a sandbox as a fence pauses it.
type Pausable interface {
	Pause() error
	Resume() error
	Alive() bool
}

// newLease makes the lease of a record this replica wrote at revision.
func (s *Store) newLease(tenant, handle string, st, before State, revision uint64) *Lease {
	l := &Lease{
		Tenant: tenant, Handle: handle, State: st, Before: before,
		store: s, turn: make(chan struct{}, 1), revision: revision,
		logger: s.replica.logger.With(logkeys.SessionID, handle, logkeys.Tenant, tenant),
	}
	l.ck.idle = sync.NewCond(&l.mu)
	l.ck.reason = stoppedReason(before)
	if before.Running != nil && before.Epoch != 0 {
		// A run that outlived its call was in flight when its holder
		// stopped: it was interrupted, and is rolled back.
		l.ck.reason = fmt.Sprintf("the run in flight since %s was interrupted: %s",
			before.Running.UTC().Format(time.RFC3339), l.ck.reason)
		l.ck.interrupted = true
	}
	return l
}

// stoppedReason says why a session just taken from the store needs a new
// sandbox: "" for one made just now.
func stoppedReason(before State) string {
	switch {
	case before.Epoch == 0:
		return ""
	case before.Owner != "":
		return "the sandbox service that held it went away"
	case before.Stopped != "":
		return before.Stopped
	}
	return "its sandbox was gone"
}

// SetOwner gives the lease the session it belongs to; call it before the
// session is shared.
func (l *Lease) SetOwner(o Owner) { l.owner = o }

// doubtfulWrite is a write whose answer did not come: the state it wrote,
// and its encoding as stored.
type doubtfulWrite struct {
	state   State
	encoded []byte
}

// adopt takes the record read from the store for l's doubtful write when
// it holds that write's state at a later revision than l's: the write
// was stored, so its state is l's, at the record's revision. Another
// replica's write cannot hold that state (taking a session over changes
// its owner and epoch).
func (l *Lease) adopt(rec *sessionstorev1.SessionRecord) bool {
	d := l.doubt
	if d == nil || rec.GetRevision() <= l.revision || !bytes.Equal(rec.GetState(), d.encoded) {
		return false
	}
	l.State, l.revision, l.doubt = d.state, rec.GetRevision(), nil
	return true
}

// lock waits for l's turn to write, until ctx ends. A turn that is free
// is taken even when ctx has ended (select would pick either at random):
// taking it costs nothing, and what is done in it is bounded by ctx.
func (l *Lease) lock(ctx context.Context) error {
	select {
	case l.turn <- struct{}{}:
		return nil
	default:
	}
	select {
	case l.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for this replica's previous write of the session record: %w", ctx.Err())
	}
}

func (l *Lease) unlock() { <-l.turn }
