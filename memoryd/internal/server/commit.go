package server

import (
	"context"
	"fmt"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// A PutSession with chunks commits a checkpoint. Chunks are written by
// PutChunks before the record that names them, and a sandbox writes
// checkpoints with whatever chunks and manifest it likes; so the commit,
// not its writer, decides what a session keeps. It refuses a state that
// names more than its cap, and deletes every chunk of the session that the
// new state does not name, whether an older state named it or none ever
// did. A cleanup cut short (memoryd stopped between the two steps) leaves
// chunks that the next commit deletes, since it looks at all of them.

// unnamedChunks checks a commit's named chunks against its cap and returns
// the session's other chunks, which the commit deletes once the record is
// written.
func (s *Sessions) unnamedChunks(ctx context.Context, tenant, handle string, c *sessionstorev1.SessionChunks) ([]string, error) {
	named := make(map[string]bool, len(c.GetIds()))
	for _, id := range c.GetIds() {
		named[id] = true
	}
	recs, err := s.h.store.List(ctx, tenant, ChunkKind(handle), false)
	if err != nil {
		return nil, err
	}
	var drop []string
	var size uint64
	for _, r := range recs {
		if !named[r.Key] {
			drop = append(drop, r.Key)
			continue
		}
		size += uint64(r.ValueLen)
	}
	if limit := c.GetMaxBytes(); limit > 0 && size > limit {
		return nil, fmt.Errorf("%w: the chunks the session's new state names hold %d bytes; the cap is %d bytes", store.ErrTooLarge, size, limit)
	}
	if err := s.checkCheckpointQuota(ctx, tenant, handle, size); err != nil {
		return nil, err
	}
	return drop, nil
}

// dropChunks deletes a committed session's chunks that its state no
// longer names. The record is written by then, so a failure is logged
// rather than returned: the next commit deletes what is left.
func (s *Sessions) dropChunks(ctx context.Context, tenant, handle string, ids []string) {
	if err := s.deleteChunks(ctx, tenant, handle, ids); err != nil {
		s.h.logger.WarnContext(ctx, "could not delete the chunks a session's checkpoint no longer names; its next checkpoint deletes them",
			logKeyOp, "session.put", logkeys.Error, err)
	}
}
