package shared

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/codeexec/codeexec/memoryd/internal/chunk"
	"github.com/codeexec/codeexec/memoryd/internal/store"
	sharedstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sharedstore/v1"
)

// server serves StoreService from the owner's bbolt store.
type server struct {
	sharedstorev1.UnimplementedStoreServiceServer
	st     store.Store
	logger *slog.Logger
}

// optionalTime is the zero time for an unset timestamp.
func optionalTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// timestampOf is nil for the zero time.
func timestampOf(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func toProto(r store.Record) *sharedstorev1.StoreRecord {
	return &sharedstorev1.StoreRecord{
		Key: r.Key, Value: r.Value, ValueBytes: uint64(r.ValueLen), Meta: r.Meta,
		CreateTime: timestamppb.New(r.Created), UpdateTime: timestamppb.New(r.Updated), Revision: r.Revision,
	}
}

func (s *server) GetRecord(ctx context.Context, req *sharedstorev1.GetRecordRequest) (*sharedstorev1.GetRecordResponse, error) {
	rec, err := s.st.Get(ctx, req.GetTenant(), store.Kind(req.GetKind()), req.GetKey())
	if err != nil {
		return nil, storeStatus(ctx, s.logger, err)
	}
	return &sharedstorev1.GetRecordResponse{Record: toProto(rec)}, nil
}

func (s *server) PutRecord(ctx context.Context, req *sharedstorev1.PutRecordRequest) (*sharedstorev1.PutRecordResponse, error) {
	rec, err := s.st.Put(ctx, req.GetTenant(), store.Kind(req.GetKind()), req.GetKey(), store.Write{
		Value: req.GetValue(), Meta: req.GetMeta(), KeepMeta: req.GetKeepMeta(),
		CheckRevision: req.GetCheckRevision(), Revision: req.GetRevision(), RequestID: req.GetRequestId(),
		Created: optionalTime(req.GetCreateTime()), Updated: optionalTime(req.GetUpdateTime()),
	})
	if err != nil {
		return nil, storeStatus(ctx, s.logger, err)
	}
	return &sharedstorev1.PutRecordResponse{Record: toProto(rec)}, nil
}

func (s *server) DeleteRecord(ctx context.Context, req *sharedstorev1.DeleteRecordRequest) (*sharedstorev1.DeleteRecordResponse, error) {
	deleted, err := s.st.Delete(ctx, req.GetTenant(), store.Kind(req.GetKind()), req.GetKey(), req.GetRequestId())
	if err != nil {
		return nil, storeStatus(ctx, s.logger, err)
	}
	return &sharedstorev1.DeleteRecordResponse{Deleted: deleted}, nil
}

func (s *server) ListRecords(ctx context.Context, req *sharedstorev1.ListRecordsRequest) (*sharedstorev1.ListRecordsResponse, error) {
	recs, err := s.st.List(ctx, req.GetTenant(), store.Kind(req.GetKind()), req.GetWithValues())
	if err != nil {
		return nil, storeStatus(ctx, s.logger, err)
	}
	out := make([]*sharedstorev1.StoreRecord, len(recs))
	for i, r := range recs {
		out[i] = toProto(r)
	}
	return &sharedstorev1.ListRecordsResponse{Records: out}, nil
}

func (s *server) ListTenants(ctx context.Context, _ *sharedstorev1.ListTenantsRequest) (*sharedstorev1.ListTenantsResponse, error) {
	tenants, err := s.st.Tenants(ctx)
	if err != nil {
		return nil, storeStatus(ctx, s.logger, err)
	}
	return &sharedstorev1.ListTenantsResponse{Tenants: tenants}, nil
}

func (s *server) BackupStore(_ *sharedstorev1.BackupStoreRequest, stream grpc.ServerStreamingServer[sharedstorev1.BackupStoreResponse]) error {
	ctx := stream.Context()
	w := &chunk.Writer{Send: func(b []byte) error { return stream.Send(&sharedstorev1.BackupStoreResponse{Chunk: b}) }}
	if _, err := s.st.Backup(ctx, w); err != nil {
		return storeStatus(ctx, s.logger, err)
	}
	return storeStatus(ctx, s.logger, w.Flush())
}
