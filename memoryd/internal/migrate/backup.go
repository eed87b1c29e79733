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
// database and writes it to path, once CheckBackupTarget has accepted
// path (knowing no database to compare it with; a caller that knows one
// calls CheckBackupTarget and Write itself). It returns the number of
// bytes written.
func BackupToFile(ctx context.Context, client memoryv1.MemoryServiceClient, path string) (int64, error) {
	t, err := CheckBackupTarget(path, "")
	if err != nil {
		return 0, err
	}
	return t.Write(ctx, client)
}

// Write asks a running memoryd for a consistent copy of its database and
// writes it to the target. A file gets it through a temporary file in the
// same directory (mode 0600), renamed into place only when complete and
// synced, so that it never holds half a backup; a stream gets it as it
// comes. It returns the number of bytes written. This is what `codeexec
// memoryd backup FILE` runs.
func (t *BackupTarget) Write(ctx context.Context, client memoryv1.MemoryServiceClient) (int64, error) {
	if t.stream {
		return t.writeStream(ctx, client)
	}
	stream, err := client.Backup(ctx, &memoryv1.BackupRequest{})
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(t.file), "."+filepath.Base(t.file)+".*.tmp")
	if err != nil {
		return 0, fmt.Errorf("backup to %s: %w", t.path, err)
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
		err = os.Rename(tmp.Name(), t.file)
	}
	if err == nil {
		err = syncDir(filepath.Dir(t.file))
	}
	if err != nil {
		return 0, fmt.Errorf("backup to %s: %w", t.path, err)
	}
	return n, nil
}

// syncDir makes a rename in dir durable: until the directory is synced, a
// power loss may leave the old file, or none, under the name.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeStream writes the backup to a device, a pipe or an open descriptor
// as it comes. It opens the target first, so that a FIFO waits for its
// reader before memoryd is asked. What a failure leaves there is not a
// whole backup, and the error says so.
func (t *BackupTarget) writeStream(ctx context.Context, client memoryv1.MemoryServiceClient) (int64, error) {
	flags := os.O_WRONLY
	if t.regular {
		// A file behind a descriptor (a shell's > or >>) keeps what it
		// holds, as the descriptor would.
		flags |= os.O_APPEND
	}
	f, err := os.OpenFile(t.file, flags, 0)
	if err != nil {
		return 0, fmt.Errorf("backup to %s: %w", t.path, err)
	}
	stream, err := client.Backup(ctx, &memoryv1.BackupRequest{})
	if err != nil {
		_ = f.Close()
		return 0, fmt.Errorf("backup: %w", err)
	}
	n, err := copyChunks(stream, f)
	if err == nil && t.regular {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil && n > 0 {
		return n, fmt.Errorf("backup to %s stopped after %d bytes, which are not a whole backup: %w", t.path, n, err)
	}
	if err != nil {
		return 0, fmt.Errorf("backup to %s: %w", t.path, err)
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
