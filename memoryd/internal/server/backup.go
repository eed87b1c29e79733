package server

import (
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/memoryd/internal/chunk"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// Backup implements memoryv1.MemoryServiceServer. It first copies the
// store into a spool file next to the database, then streams that file.
// The copy holds a read transaction only as long as a local disk copy
// takes, not as long as a slow client takes to download: a long read
// transaction keeps freed pages from being reused and can block a writer
// that needs to grow the memory map.
func (m *Memory) Backup(_ *memoryv1.BackupRequest, stream grpc.ServerStreamingServer[memoryv1.BackupResponse]) error {
	ctx := stream.Context()
	_, err := handle(ctx, m.h, "memory.backup", func() (int64, error) {
		spool, err := os.CreateTemp(m.h.spoolDir, ".memoryd-backup-*")
		if err != nil {
			return 0, fmt.Errorf("create backup spool file: %w", err)
		}
		defer func() {
			_ = spool.Close()
			_ = os.Remove(spool.Name())
		}()
		n, err := m.h.store.Backup(ctx, spool)
		if err != nil {
			return n, err
		}
		if _, err := spool.Seek(0, io.SeekStart); err != nil {
			return n, err
		}
		w := &chunk.Writer{Send: func(b []byte) error { return stream.Send(&memoryv1.BackupResponse{Chunk: b}) }}
		if _, err := io.CopyBuffer(w, spool, make([]byte, chunk.Size)); err != nil {
			return n, err
		}
		return n, w.Flush()
	})
	return err
}
