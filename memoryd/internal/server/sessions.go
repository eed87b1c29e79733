package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
)

// Sessions implements sessionstorev1.SessionStoreServiceServer on the same store
// as memory and tools. A session is a record of KindSession whose Value is
// sandboxd's opaque state and whose Meta is its expiry (8 bytes of Unix
// nanoseconds); its chunks are records of the kind ChunkKind(handle), so
// that listing or deleting one session's chunks touches no other's.
// Replica heartbeats live under the reserved tenant replicaTenant, which no
// authenticated tenant name can spell (they may not contain '#').
type Sessions struct {
	sessionstorev1.UnimplementedSessionStoreServiceServer
	h   *handler
	now func() time.Time
}

const (
	// KindSession holds session records.
	KindSession store.Kind = "sessions"
	// replicaTenant holds replica heartbeats.
	replicaTenant = "#replicas"
	// kindReplica is their kind.
	kindReplica store.Kind = "replicas"
	// chunkKindPrefix starts the kind of a session's chunks.
	chunkKindPrefix = "chunks/"
	// MaxChunkBytes caps one chunk: half the suite's gRPC message limit,
	// as for memory values, so a chunk always fits in a message.
	MaxChunkBytes = 32 << 20
	// maxHandleBytes bounds a handle; sandboxd's are 32 hex digits.
	maxHandleBytes = 128
)

// ChunkKind is the kind of a session's checkpoint chunks.
func ChunkKind(handle string) store.Kind { return store.Kind(chunkKindPrefix + handle) }

// NewSessions returns the session store server on the handlers' store.
func NewSessions(m *Memory) *Sessions { return &Sessions{h: m.h, now: time.Now} }

// RegisterSessions adds SessionStoreService to g, under its name and
// under the name it had before it left codeexec.memory.v1.
func RegisterSessions(g *grpc.Server, s *Sessions) {
	sessionstorev1.RegisterSessionStoreServiceServer(g, s)
	former := sessionstorev1.SessionStoreService_ServiceDesc
	former.ServiceName = formerSessionStoreName
	g.RegisterService(&former, s)
}

// formerSessionStoreName is SessionStoreService's name while it was part
// of codeexec.memory.v1. memoryd answers to it too, so that a sandboxd of
// an earlier release keeps its sessions durable while a split deployment
// rolls over to this one. Delete it (and TestSessionStoreAnswersItsFormerName)
// one release later.
const formerSessionStoreName = "codeexec.memory.v1.SessionStoreService"

// tenantHandle checks a request's tenant and session handle together.
func tenantHandle(tenant, handle string) (string, error) {
	t, err := tenantOf(tenant)
	if err != nil {
		return "", err
	}
	if err := checkName("session handle", handle, maxHandleBytes); err != nil {
		return "", err
	}
	if strings.ContainsAny(handle, "/\x00") {
		return "", fmt.Errorf("%w: session handle %q holds '/' or NUL", store.ErrInvalid, handle)
	}
	return t, nil
}

func expiryOf(r store.Record) time.Time {
	if len(r.Meta) != 8 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(r.Meta))).UTC()
}

func expiryMeta(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano()))
}

// sessionRecords are records of KindSession. Only PutSession goes through
// it: the others also look at expiry or at the session's chunks.
var sessionRecords = records[*sessionstorev1.SessionRecord]{kind: KindSession, noun: "session", check: tenantHandle, encode: sessionOf}

func sessionOf(r store.Record) *sessionstorev1.SessionRecord {
	return &sessionstorev1.SessionRecord{
		Handle: r.Key, State: r.Value, ExpireTime: timestamppb.New(expiryOf(r)), Revision: r.Revision,
		CreateTime: timestamppb.New(r.Created), UpdateTime: timestamppb.New(r.Updated),
	}
}

// unknownSession is the one answer for a handle that is not this tenant's,
// has expired or never existed: none of them tells anything about the
// others.
func unknownSession(handle string) error {
	return fmt.Errorf("%w: unknown session %q", store.ErrNotFound, handle)
}

// current returns a tenant's session record while the session lasts, and
// unknownSession for one that expired or never existed.
func (s *Sessions) current(ctx context.Context, tenant, handle string) (store.Record, error) {
	tenant, err := tenantHandle(tenant, handle)
	if err != nil {
		return store.Record{}, err
	}
	rec, err := s.h.store.Get(ctx, tenant, KindSession, handle)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !expiryOf(rec).After(s.now())) {
		return store.Record{}, unknownSession(handle)
	}
	return rec, err
}

// GetSession implements sessionstorev1.SessionStoreServiceServer.
func (s *Sessions) GetSession(ctx context.Context, req *sessionstorev1.GetSessionRequest) (*sessionstorev1.GetSessionResponse, error) {
	return handle(ctx, s.h, "session.get", func() (*sessionstorev1.GetSessionResponse, error) {
		rec, err := s.current(ctx, req.GetTenant(), req.GetHandle())
		if err != nil {
			return nil, err
		}
		return &sessionstorev1.GetSessionResponse{Session: sessionOf(rec)}, nil
	})
}

// PutSession implements sessionstorev1.SessionStoreServiceServer.
func (s *Sessions) PutSession(ctx context.Context, req *sessionstorev1.PutSessionRequest) (*sessionstorev1.PutSessionResponse, error) {
	return handle(ctx, s.h, "session.put", func() (*sessionstorev1.PutSessionResponse, error) {
		tenant, err := tenantHandle(req.GetTenant(), req.GetHandle())
		if err != nil {
			return nil, err
		}
		var drop []string
		if req.GetChunks() != nil && s.h.quotas.CheckpointBytes > 0 {
			defer s.h.locks.lock(tenant)() // a commit's quota check and write (Quotas)
		}
		rec, err := sessionRecords.put(ctx, s.h.store, req.GetTenant(), req.GetHandle(), func() (store.Write, error) {
			if req.GetExpireTime() == nil {
				return store.Write{}, fmt.Errorf("%w: expire_time is missing; every session needs one", store.ErrInvalid)
			}
			if err := checkSize("state", len(req.GetState()), MaxChunkBytes); err != nil {
				return store.Write{}, err
			}
			if c := req.GetChunks(); c != nil {
				var err error
				if drop, err = s.unnamedChunks(ctx, tenant, req.GetHandle(), c); err != nil {
					return store.Write{}, err
				}
			}
			return store.Write{
				Value: req.GetState(), Meta: expiryMeta(req.GetExpireTime().AsTime()),
				CheckRevision: true, Revision: req.GetExpectedRevision(),
			}, nil
		})
		if err == nil && len(drop) > 0 {
			s.dropChunks(ctx, tenant, req.GetHandle(), drop)
		}
		return &sessionstorev1.PutSessionResponse{Session: rec}, err
	})
}

// DeleteSession implements sessionstorev1.SessionStoreServiceServer.
func (s *Sessions) DeleteSession(ctx context.Context, req *sessionstorev1.DeleteSessionRequest) (*sessionstorev1.DeleteSessionResponse, error) {
	return handle(ctx, s.h, "session.delete", func() (*sessionstorev1.DeleteSessionResponse, error) {
		tenant, err := tenantHandle(req.GetTenant(), req.GetHandle())
		if err != nil {
			return nil, err
		}
		deleted, err := s.deleteSession(ctx, tenant, req.GetHandle())
		return &sessionstorev1.DeleteSessionResponse{Deleted: deleted}, err
	})
}

// deleteSession removes the record first, so that a crash half-way leaves
// only chunks nobody refers to (and, once the record is gone, PutChunks
// adds none); deleting the handle again removes them.
func (s *Sessions) deleteSession(ctx context.Context, tenant, handle string) (bool, error) {
	deleted, err := s.h.store.Delete(ctx, tenant, KindSession, handle, nil)
	if err != nil {
		return false, err
	}
	chunks, err := s.h.store.List(ctx, tenant, ChunkKind(handle), false)
	if err != nil {
		return deleted, err
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.Key
	}
	return deleted, s.deleteChunks(ctx, tenant, handle, ids)
}

// deleteChunks deletes chunks of a session.
func (s *Sessions) deleteChunks(ctx context.Context, tenant, handle string, ids []string) error {
	return fanOut(ctx, len(ids), func(ctx context.Context, i int) error {
		_, err := s.h.store.Delete(ctx, tenant, ChunkKind(handle), ids[i], nil)
		return err
	})
}

// fanOut runs fn(0..n-1) with a few at a time. The store's group commit
// then puts concurrent writes into shared transactions, so a checkpoint of
// many chunks costs a few fsyncs rather than one each.
func fanOut(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(32)
	for i := range n {
		eg.Go(func() error { return fn(ctx, i) })
	}
	return eg.Wait()
}

// PutChunks implements sessionstorev1.SessionStoreServiceServer.
func (s *Sessions) PutChunks(ctx context.Context, req *sessionstorev1.PutChunksRequest) (*sessionstorev1.PutChunksResponse, error) {
	return handle(ctx, s.h, "session.put_chunks", func() (*sessionstorev1.PutChunksResponse, error) {
		tenant, err := tenantHandle(req.GetTenant(), req.GetHandle())
		if err != nil {
			return nil, err
		}
		for _, c := range req.GetChunks() {
			if err := checkChunk(c); err != nil {
				return nil, err
			}
		}
		// Chunks belong to a session: ones stored for a session that has
		// ended (its holder not yet told) would never be removed.
		if _, err := s.current(ctx, req.GetTenant(), req.GetHandle()); err != nil {
			return nil, err
		}
		chunks := req.GetChunks()
		err = fanOut(ctx, len(chunks), func(ctx context.Context, i int) error {
			_, err := s.h.store.Put(ctx, tenant, ChunkKind(req.GetHandle()), chunks[i].GetId(), store.Write{Value: chunks[i].GetData()})
			return err
		})
		if err != nil {
			return nil, err
		}
		return &sessionstorev1.PutChunksResponse{}, nil
	})
}

func checkChunk(c *sessionstorev1.Chunk) error {
	if err := checkName("chunk id", c.GetId(), maxHandleBytes); err != nil {
		return err
	}
	return checkSize("chunk "+c.GetId(), len(c.GetData()), MaxChunkBytes)
}

// GetChunks implements sessionstorev1.SessionStoreServiceServer.
func (s *Sessions) GetChunks(req *sessionstorev1.GetChunksRequest, stream grpc.ServerStreamingServer[sessionstorev1.GetChunksResponse]) error {
	ctx := stream.Context()
	_, err := handle(ctx, s.h, "session.get_chunks", func() (struct{}, error) {
		tenant, err := tenantHandle(req.GetTenant(), req.GetHandle())
		if err != nil {
			return struct{}{}, err
		}
		for _, id := range req.GetIds() {
			rec, err := s.h.store.Get(ctx, tenant, ChunkKind(req.GetHandle()), id)
			if errors.Is(err, store.ErrNotFound) {
				return struct{}{}, fmt.Errorf("%w: chunk %q of session %q is missing", store.ErrNotFound, id, req.GetHandle())
			}
			if err != nil {
				return struct{}{}, err
			}
			if err := stream.Send(&sessionstorev1.GetChunksResponse{Chunk: &sessionstorev1.Chunk{Id: id, Data: rec.Value}}); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	return err
}

// DeleteChunks implements sessionstorev1.SessionStoreServiceServer.
func (s *Sessions) DeleteChunks(ctx context.Context, req *sessionstorev1.DeleteChunksRequest) (*sessionstorev1.DeleteChunksResponse, error) {
	return handle(ctx, s.h, "session.delete_chunks", func() (*sessionstorev1.DeleteChunksResponse, error) {
		tenant, err := tenantHandle(req.GetTenant(), req.GetHandle())
		if err != nil {
			return nil, err
		}
		ids := req.GetIds()
		var n atomic.Uint32
		err = fanOut(ctx, len(ids), func(ctx context.Context, i int) error {
			deleted, err := s.h.store.Delete(ctx, tenant, ChunkKind(req.GetHandle()), ids[i], nil)
			if deleted {
				n.Add(1)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		return &sessionstorev1.DeleteChunksResponse{Deleted: n.Load()}, nil
	})
}

// ExpireSessions implements sessionstorev1.SessionStoreServiceServer.
func (s *Sessions) ExpireSessions(ctx context.Context, _ *sessionstorev1.ExpireSessionsRequest) (*sessionstorev1.ExpireSessionsResponse, error) {
	return handle(ctx, s.h, "session.expire", func() (*sessionstorev1.ExpireSessionsResponse, error) {
		tenants, err := s.h.store.Tenants(ctx)
		if err != nil {
			return nil, err
		}
		now := s.now()
		var n uint32
		for _, tenant := range tenants {
			recs, err := s.h.store.List(ctx, tenant, KindSession, false)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				if expiryOf(r).After(now) {
					continue
				}
				if deleted, err := s.deleteSession(ctx, tenant, r.Key); err != nil {
					return nil, err
				} else if deleted {
					n++
				}
			}
		}
		return &sessionstorev1.ExpireSessionsResponse{Expired: n}, nil
	})
}

// PutReplica implements sessionstorev1.SessionStoreServiceServer.
func (s *Sessions) PutReplica(ctx context.Context, req *sessionstorev1.PutReplicaRequest) (*sessionstorev1.PutReplicaResponse, error) {
	return handle(ctx, s.h, "session.put_replica", func() (*sessionstorev1.PutReplicaResponse, error) {
		r := req.GetReplica()
		if err := checkName("replica id", r.GetId(), maxHandleBytes); err != nil {
			return nil, err
		}
		data, err := proto.Marshal(r)
		if err != nil {
			return nil, err
		}
		if _, err := s.h.store.Put(ctx, replicaTenant, kindReplica, r.GetId(), store.Write{Value: data}); err != nil {
			return nil, err
		}
		return &sessionstorev1.PutReplicaResponse{}, nil
	})
}

// GetReplica implements sessionstorev1.SessionStoreServiceServer.
func (s *Sessions) GetReplica(ctx context.Context, req *sessionstorev1.GetReplicaRequest) (*sessionstorev1.GetReplicaResponse, error) {
	return handle(ctx, s.h, "session.get_replica", func() (*sessionstorev1.GetReplicaResponse, error) {
		rec, err := s.h.store.Get(ctx, replicaTenant, kindReplica, req.GetId())
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: no heartbeat from replica %q", store.ErrNotFound, req.GetId())
		}
		if err != nil {
			return nil, err
		}
		var r sessionstorev1.Replica
		if err := proto.Unmarshal(rec.Value, &r); err != nil {
			return nil, fmt.Errorf("decode heartbeat of replica %q: %w", req.GetId(), err)
		}
		return &sessionstorev1.GetReplicaResponse{Replica: &r}, nil
	})
}
