package sandbox

import (
	"fmt"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
)

// TakeRefused returns the reason the agent last refused a checkpoint for,
// once.
func (sb *Sandbox) TakeRefused() string {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	r := sb.refused
	sb.refused = ""
	return r
}

// SupersededBy reports whether the verdict on the checkpoint taken after
// exec is older than a refusal the reader has already seen.
func (sb *Sandbox) SupersededBy(exec int64) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return exec < sb.refusedExec
}

// expectCheckpoint notes that exec id, about to be sent, asks for a
// checkpoint after its done.
func (sb *Sandbox) expectCheckpoint(id int64) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.ckptDue = id
}

// checkpointAfter opens the checkpoint of the exec that d ends, if that
// exec asked for one and did not end its session.
func (sb *Sandbox) checkpointAfter(d *channel.Done) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if d.Exec != sb.ckptDue {
		return
	}
	sb.ckptDue = 0
	if !d.End {
		sb.ckptOpen = d.Exec
	}
}

// admitCheckpoint reports whether the reader passes checkpoint frame f on
// to the committer. The agent sends one checkpoint after the done of each
// exec that asks for one, and no other (PROTOCOL.md); code in the sandbox
// can reach the channel and write frames of its own, but those sent at any
// other time, or after the checkpoint's last frame, are dropped: an exec
// makes the store take one checkpoint at most.
func (sb *Sandbox) admitCheckpoint(f *channel.Checkpoint) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if f.Exec == 0 || f.Exec != sb.ckptOpen {
		if !sb.strayWarned {
			sb.strayWarned = true
			sb.logger.Warn("dropped a checkpoint frame that no exec asked for (code in the sandbox wrote it); later ones are dropped silently", "exec", f.Exec)
		}
		return false
	}
	if f.Last {
		sb.ckptOpen = 0
	}
	return true
}

// Save stores one whole checkpoint (its last frame, and the chunks of all
// its frames) and reports whether it is stored. A frame whose Error is
// set is the agent's refusal to take the checkpoint, and has no chunks.
type Save func(f *channel.Checkpoint, chunks map[string][]byte) bool

// Checkpoints hands each checkpoint the agent sends to save, one after
// the other, and answers the agent with save's verdict, until the sandbox
// ends; then it calls ended. Run it on a goroutine of its own;
// WaitCommitter waits for it to return.
//
// The agent keeps to limit, the cap on one checkpoint's bytes, but code
// in the sandbox can write frames of its own: no more than limit bytes of
// one checkpoint are held, and one over it is saved as refused.
func (sb *Sandbox) Checkpoints(limit int64, save Save, ended func()) {
	defer close(sb.committed)
	chunks := map[string][]byte{}
	size, most := 0, int(limit)
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
				ended()
				return
			}
		}
		for id, c := range f.Chunks {
			if size <= most {
				chunks[id] = c
				size += len(c)
			}
		}
		if size > most {
			clear(chunks)
		}
		if !f.Last {
			continue
		}
		if size > most {
			f = &channel.Checkpoint{Exec: f.Exec, Last: true,
				Error: fmt.Sprintf("the checkpoint sent was over the %d-byte cap (CODEEXEC_CHECKPOINT_BYTES)", most)}
		}
		ok := save(f, chunks)
		clear(chunks)
		size = 0
		_ = sb.conn.Write(&channel.Checkpointed{Exec: f.Exec, OK: ok})
	}
}

// WaitCommitter waits, at most d, for Checkpoints to return (the sandbox
// has stopped), so that nothing it still stores lands after what the
// caller writes next. It reports whether it returned.
func (sb *Sandbox) WaitCommitter(d time.Duration) bool {
	select {
	case <-sb.committed:
		return true
	case <-time.After(d):
		return false
	}
}
