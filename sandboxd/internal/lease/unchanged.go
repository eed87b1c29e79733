package lease

import (
	"bytes"
	"time"
)

// unchanged lets a checkpoint that equals the stored one go unwritten:
// most calls change nothing the checkpoint holds (a print, a read), and
// its record write, fsynced, is what the session's next call waits for.
// It is in checkpoints, on Lease.mu.
type unchanged struct {
	// manifest is the manifest last stored, and written when.
	manifest []byte
	written  time.Time
	// seq is the number of execs the latest checkpoint equal to it
	// reflects: a restore on this replica counts the calls up to it as
	// held, since they changed nothing.
	seq uint64
}

// maxUnwritten bounds how long equal checkpoints go unwritten, so that
// the record's expiry moves on while the session is used: a tenth of the
// TTL, and at most 10 minutes.
func (l *Lease) maxUnwritten() time.Duration {
	return min(10*time.Minute, l.store.TTL/10)
}

// skipSame reports whether a checkpoint of manifest, with no new chunks,
// reflecting seq execs, equals the one stored recently enough to go
// unwritten; it then notes seq. Called with mu held.
func (l *Lease) skipSame(manifest []byte, newChunks int, seq uint64) bool {
	u := &l.ck.same
	if newChunks > 0 || len(manifest) == 0 || !bytes.Equal(manifest, u.manifest) || time.Since(u.written) > l.maxUnwritten() {
		return false
	}
	u.seq = seq
	return true
}

// stored notes the checkpoint just written (nil manifest: none, or one
// that failed). Called with mu held.
func (l *Lease) stored(manifest []byte, seq uint64) {
	if manifest == nil {
		l.ck.same = unchanged{}
		return
	}
	l.ck.same = unchanged{manifest: manifest, written: time.Now(), seq: seq}
}

// HeldSeq is the number of execs a stored checkpoint of manifest and seq
// holds: more than seq when later checkpoints on this replica were equal
// to it and went unwritten.
func (l *Lease) HeldSeq(manifest []byte, seq uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := l.ck.same; u.seq > seq && bytes.Equal(manifest, u.manifest) {
		return u.seq
	}
	return seq
}
