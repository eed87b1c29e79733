package server

import (
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// backupChunk is the size of one Backup message, well under the suite's
// gRPC message limit.
const backupChunk = 1 << 20

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
		w := &chunkWriter{send: stream.Send}
		if _, err := io.CopyBuffer(w, spool, make([]byte, backupChunk)); err != nil {
			return n, err
		}
		return n, w.flush()
	})
	return err
}

// chunkWriter cuts the copy into backupChunk-sized messages.
type chunkWriter struct {
	send func(*memoryv1.BackupResponse) error
	buf  []byte
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if w.buf == nil {
			w.buf = make([]byte, 0, backupChunk)
		}
		take := min(backupChunk-len(w.buf), len(p))
		w.buf = append(w.buf, p[:take]...)
		p = p[take:]
		if len(w.buf) == backupChunk {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// flush sends what is buffered. gRPC may still read a sent message (stats
// handlers), so the next chunk gets a fresh buffer.
func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.send(&memoryv1.BackupResponse{Chunk: w.buf})
	w.buf = nil
	return err
}
