package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
)

// Errors of ReadFile, besides ErrUnknown.
var (
	// ErrNoFile: the checkpoint holds no such file.
	ErrNoFile = errors.New("no such file in the session's checkpoint")
	// ErrFileTooLarge: the file is over the caller's bound.
	ErrFileTooLarge = errors.New("the file is too large to read")
	// ErrNotYet: the checkpoint of the call that named the file was not
	// stored in time.
	ErrNotYet = errors.New("the session's latest checkpoint is not stored yet")
)

// How long ReadFile waits for the checkpoint of the call that named a
// file, and how often it looks.
const (
	fileWait = 10 * time.Second
	filePoll = 100 * time.Millisecond
)

// ReadFile returns the content of the file at path (relative to
// /workspace) of a session of tenant's, as its latest stored checkpoint
// holds it, once that checkpoint reflects at least minSeq calls. It
// reads the record and the chunks without holding the session, so it
// serves any replica; a commit that drops the chunks between the two
// reads makes it read again.
func (s *Store) ReadFile(ctx context.Context, tenant, handle, path string, minSeq uint64, maxBytes int64) ([]byte, uint64, error) {
	deadline := time.Now().Add(fileWait)
	for attempt := 0; ; attempt++ {
		st, err := s.read(ctx, tenant, handle)
		if err != nil {
			return nil, 0, err
		}
		if st.Seq < minSeq {
			if time.Now().After(deadline) {
				return nil, st.Seq, fmt.Errorf("%w: it reflects %d calls, the file was named by call %d", ErrNotYet, st.Seq, minSeq)
			}
			select {
			case <-time.After(filePoll):
				continue
			case <-ctx.Done():
				return nil, st.Seq, ctx.Err()
			}
		}
		ids, size, err := fileChunks(st.Manifest, path)
		if err != nil {
			return nil, st.Seq, err
		}
		if maxBytes > 0 && size > maxBytes {
			return nil, st.Seq, fmt.Errorf("%w: it has %d bytes, over the %d a read returns", ErrFileTooLarge, size, maxBytes)
		}
		data, err := s.chunks(ctx, tenant, handle, ids, size)
		if status.Code(errors.Unwrap(err)) == codes.NotFound && attempt < 3 {
			continue // a newer checkpoint dropped them: read that one
		}
		return data, st.Seq, err
	}
}

// read returns a session's stored state.
func (s *Store) read(ctx context.Context, tenant, handle string) (State, error) {
	resp, err := s.client.GetSession(ctx, &sessionstorev1.GetSessionRequest{Tenant: tenant, Handle: handle})
	if status.Code(err) == codes.NotFound {
		return State{}, ErrUnknown
	}
	if err != nil {
		return State{}, fmt.Errorf("read session record: %w", err)
	}
	return decodeState(resp.GetSession().GetState())
}

// fileChunks returns the chunks and the size of the file at path in a
// manifest.
func fileChunks(manifest json.RawMessage, path string) ([]string, int64, error) {
	var m struct {
		Workspace struct {
			Files map[string]struct {
				Chunks []string `json:"chunks"`
				Bytes  int64    `json:"bytes"`
			} `json:"files"`
		} `json:"workspace"`
	}
	if len(manifest) > 0 {
		if err := json.Unmarshal(manifest, &m); err != nil {
			return nil, 0, fmt.Errorf("read the checkpoint's manifest: %w", err)
		}
	}
	f, ok := m.Workspace.Files[path]
	if !ok {
		return nil, 0, fmt.Errorf("%w: /workspace/%s", ErrNoFile, path)
	}
	return f.Chunks, f.Bytes, nil
}

// chunks reads ids in order and joins them.
func (s *Store) chunks(ctx context.Context, tenant, handle string, ids []string, size int64) ([]byte, error) {
	out := make([]byte, 0, max(size, 0))
	if len(ids) == 0 {
		return out, nil
	}
	stream, err := s.client.GetChunks(ctx, &sessionstorev1.GetChunksRequest{Tenant: tenant, Handle: handle, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("read the file's chunks: %w", err)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the file's chunks: %w", err)
		}
		out = append(out, m.GetChunk().GetData()...)
	}
}
