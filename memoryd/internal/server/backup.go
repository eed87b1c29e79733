package server

import (
	"google.golang.org/grpc"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// backupChunk is the size of one Backup message, well under the suite's
// gRPC message limit.
const backupChunk = 1 << 20

// Backup implements memoryv1.MemoryServiceServer: it streams the store's
// consistent copy in chunks.
func (m *Memory) Backup(_ *memoryv1.BackupRequest, stream grpc.ServerStreamingServer[memoryv1.BackupResponse]) error {
	ctx := stream.Context()
	_, err := handle(ctx, m.h, "memory.backup", func() (int64, error) {
		w := &chunkWriter{send: stream.Send, buf: make([]byte, 0, backupChunk)}
		n, err := m.h.store.Backup(ctx, w)
		if err != nil {
			return n, err
		}
		return n, w.flush()
	})
	return err
}

// chunkWriter buffers the copy into backupChunk-sized messages.
type chunkWriter struct {
	send func(*memoryv1.BackupResponse) error
	buf  []byte
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := backupChunk - len(w.buf)
		take := min(room, len(p))
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

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	// gRPC may still read a sent message (stats handlers), so every chunk
	// gets a fresh buffer.
	err := w.send(&memoryv1.BackupResponse{Chunk: w.buf})
	w.buf = make([]byte, 0, backupChunk)
	return err
}
