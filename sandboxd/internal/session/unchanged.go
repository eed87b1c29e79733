package session

import (
	"bytes"
	"time"
)

// unchanged lets a checkpoint that equals the stored one go unwritten:
// most calls change nothing the checkpoint holds (a print, a read), and
// its record write, fsynced, is what the session's next call waits for.
// It is on Session.dmu, in dstate.
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
func (d *Durability) maxUnwritten() time.Duration {
	return min(10*time.Minute, d.Sessions.TTL/10)
}

// skipSame reports whether a checkpoint of manifest, with no new chunks,
// reflecting seq execs, equals the one stored recently enough to go
// unwritten; it then notes seq. Called with dmu held.
func (s *Session) skipSame(manifest []byte, newChunks int, seq uint64, maxAge time.Duration) bool {
	u := &s.d.same
	if newChunks > 0 || len(manifest) == 0 || !bytes.Equal(manifest, u.manifest) || time.Since(u.written) > maxAge {
		return false
	}
	u.seq = seq
	return true
}

// stored notes the checkpoint just written (nil manifest: none, or one
// that failed), with dmu held.
func (s *Session) stored(manifest []byte, seq uint64) {
	if manifest == nil {
		s.d.same = unchanged{}
		return
	}
	s.d.same = unchanged{manifest: manifest, written: time.Now(), seq: seq}
}

// heldSeq is the number of execs a stored checkpoint of manifest and seq
// holds: more than seq when later checkpoints were equal to it and went
// unwritten. Called with dmu held.
func (s *Session) heldSeq(manifest []byte, seq uint64) uint64 {
	if u := s.d.same; u.seq > seq && bytes.Equal(manifest, u.manifest) {
		return u.seq
	}
	return seq
}
