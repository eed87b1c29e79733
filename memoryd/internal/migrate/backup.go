package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

// BackupToFile asks a running memoryd for a consistent copy of its
// database and writes it to path (mode 0600). The copy goes to a temporary
// file in the same directory and is renamed into place only when complete
// and synced, so path never holds half a backup. It returns the number of
// bytes written. This is what `codeexec memoryd backup FILE` runs.
func BackupToFile(ctx context.Context, client memoryv1.MemoryServiceClient, path string) (int64, error) {
	stream, err := client.Backup(ctx, &memoryv1.BackupRequest{})
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // no-op after the rename
	n, err := copyChunks(stream, tmp)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, fmt.Errorf("backup to %s: %w", path, err)
	}
	return n, nil
}

func copyChunks(stream memoryv1.MemoryService_BackupClient, w io.Writer) (int64, error) {
	var n int64
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return 0, errors.New("memoryd sent an empty backup")
			}
			return n, nil
		}
		if err != nil {
			return n, err
		}
		m, err := w.Write(msg.GetChunk())
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
}
