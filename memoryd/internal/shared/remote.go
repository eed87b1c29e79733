package shared

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	sharedstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sharedstore/v1"
)

// remote is a store.Store served by the owner of the database over its
// socket. Each call makes one attempt; an answer that means "no owner got
// this" comes back as errRetry, and Store retries it, on the owner that
// comes next, which may be this very process.
type remote struct {
	client sharedstorev1.StoreServiceClient
}

var _ store.Store = (*remote)(nil)

// errRetry means no owner answered the call: the owner went away, or none
// listens yet. A write that gets it may have committed; its retry carries
// the same request ID.
var errRetry = errors.New("no owner answered")

func fromProto(r *sharedstorev1.StoreRecord) store.Record {
	return store.Record{
		Key: r.GetKey(), Value: r.GetValue(), ValueLen: int(r.GetValueBytes()), Meta: r.GetMeta(),
		Created: r.GetCreateTime().AsTime(), Updated: r.GetUpdateTime().AsTime(), Revision: r.GetRevision(),
	}
}

// Get implements store.Store.
func (r *remote) Get(ctx context.Context, tenant string, kind store.Kind, key string) (store.Record, error) {
	resp, err := r.client.GetRecord(ctx, &sharedstorev1.GetRecordRequest{Tenant: tenant, Kind: string(kind), Key: key})
	if err != nil {
		return store.Record{}, answer(err)
	}
	return fromProto(resp.GetRecord()), nil
}

// Put implements store.Store; Store gives every write through it a
// request ID.
func (r *remote) Put(ctx context.Context, tenant string, kind store.Kind, key string, w store.Write) (store.Record, error) {
	resp, err := r.client.PutRecord(ctx, &sharedstorev1.PutRecordRequest{
		Tenant: tenant, Kind: string(kind), Key: key, Value: w.Value, Meta: w.Meta, KeepMeta: w.KeepMeta,
		CheckRevision: w.CheckRevision, Revision: w.Revision, RequestId: w.RequestID,
		CreateTime: timestampOf(w.Created), UpdateTime: timestampOf(w.Updated),
	})
	if err != nil {
		return store.Record{}, answer(err)
	}
	return fromProto(resp.GetRecord()), nil
}

// Delete implements store.Store.
func (r *remote) Delete(ctx context.Context, tenant string, kind store.Kind, key string, requestID []byte) (bool, error) {
	resp, err := r.client.DeleteRecord(ctx, &sharedstorev1.DeleteRecordRequest{Tenant: tenant, Kind: string(kind), Key: key, RequestId: requestID})
	if err != nil {
		return false, answer(err)
	}
	return resp.GetDeleted(), nil
}

// List implements store.Store.
func (r *remote) List(ctx context.Context, tenant string, kind store.Kind, withValues bool) ([]store.Record, error) {
	resp, err := r.client.ListRecords(ctx, &sharedstorev1.ListRecordsRequest{Tenant: tenant, Kind: string(kind), WithValues: withValues})
	if err != nil {
		return nil, answer(err)
	}
	var out []store.Record
	for _, rec := range resp.GetRecords() {
		out = append(out, fromProto(rec))
	}
	return out, nil
}

// Tenants implements store.Store.
func (r *remote) Tenants(ctx context.Context) ([]string, error) {
	resp, err := r.client.ListTenants(ctx, &sharedstorev1.ListTenantsRequest{})
	if err != nil {
		return nil, answer(err)
	}
	return resp.GetTenants(), nil
}

// errBackupInterrupted means the owner changed after part of a backup was
// written; a backup cannot resume, so the caller must start again.
var errBackupInterrupted = errors.New("the database's owner went away during the backup; run the backup again")

// Backup implements store.Store. An owner that goes away before the first
// byte is retried like any call; after it, the backup fails.
func (r *remote) Backup(ctx context.Context, w io.Writer) (int64, error) {
	stream, err := r.client.BackupStore(ctx, &sharedstorev1.BackupStoreRequest{})
	if err != nil {
		return 0, answer(err)
	}
	var n int64
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			if n > 0 && status.Code(err) == codes.Unavailable {
				return n, errBackupInterrupted
			}
			return n, answer(err)
		}
		m, err := w.Write(msg.GetChunk())
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
}

// Close implements store.Store; the connection belongs to Store.
func (r *remote) Close() error { return nil }
