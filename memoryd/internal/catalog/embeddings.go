package catalog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	catalogv1 "github.com/codeexec/codeexec/proto/gen/codeexec/catalog/v1"
)

// The search model's vectors live beside the tool lists, in a kind of
// their own; a record's Value is the vectors as sent, its Meta the dims.
const embeddingKind = store.Kind("embeddings")

// Limits of the vectors.
const (
	// MaxEmbeddingKeys bounds the keys of one GetEmbeddings, so that an
	// answer stays far below the suite's message limit.
	MaxEmbeddingKeys = 100
	// MaxEmbeddingBytes bounds one entry's vectors: some 2,700 vectors
	// of 384 dims.
	MaxEmbeddingBytes = 4 << 20
	// MaxDims bounds the length of a vector.
	MaxDims = 4096
)

// GetEmbeddings returns the stored vectors among req's keys.
func (s *Server) GetEmbeddings(ctx context.Context, req *catalogv1.GetEmbeddingsRequest) (*catalogv1.GetEmbeddingsResponse, error) {
	if len(req.GetKeys()) > MaxEmbeddingKeys {
		return nil, status.Errorf(codes.InvalidArgument, "%d keys asked for; at most %d are allowed in one call", len(req.GetKeys()), MaxEmbeddingKeys)
	}
	out := &catalogv1.GetEmbeddingsResponse{}
	for _, k := range req.GetKeys() {
		if err := checkKey(k); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		rec, err := s.st.Get(ctx, tenant, embeddingKind, k)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, toStatus(err)
		}
		var dims int32
		if _, err := fmt.Sscan(string(rec.Meta), &dims); err != nil || checkEmbeddings(k, dims, rec.Value) != nil {
			// Unreadable vectors are as good as none: they are made
			// again and replaced.
			s.logger.WarnContext(ctx, "unreadable embeddings entry", "key", k)
			continue
		}
		out.Embeddings = append(out.Embeddings, &catalogv1.Embeddings{Key: k, Dims: dims, Vectors: rec.Value})
	}
	return out, nil
}

// PutEmbeddings stores req's vectors under their key.
func (s *Server) PutEmbeddings(ctx context.Context, req *catalogv1.PutEmbeddingsRequest) (*catalogv1.PutEmbeddingsResponse, error) {
	e := req.GetEmbeddings()
	if e == nil {
		return nil, status.Error(codes.InvalidArgument, "embeddings are missing")
	}
	if err := checkEmbeddings(e.GetKey(), e.GetDims(), e.GetVectors()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	w := store.Write{Value: e.GetVectors(), Meta: fmt.Appendf(nil, "%d", e.GetDims())}
	if _, err := s.st.Put(ctx, tenant, embeddingKind, e.GetKey(), w); err != nil {
		return nil, toStatus(err)
	}
	return &catalogv1.PutEmbeddingsResponse{}, nil
}

// checkEmbeddings says what is wrong with an entry's fields, if anything.
func checkEmbeddings(key string, dims int32, vecs []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if dims < 1 || dims > MaxDims {
		return fmt.Errorf("dims is %d; use 1 to %d", dims, MaxDims)
	}
	if len(vecs) == 0 || len(vecs) > MaxEmbeddingBytes || len(vecs)%(4*int(dims)) != 0 {
		return fmt.Errorf("vectors are %d bytes; want a positive multiple of 4 × dims (%d), at most %d", len(vecs), 4*dims, MaxEmbeddingBytes)
	}
	for i := 0; i < len(vecs); i += 4 {
		f := math.Float32frombits(binary.LittleEndian.Uint32(vecs[i:]))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return fmt.Errorf("vector component %d is %v; only finite numbers are accepted", i/4, f)
		}
	}
	return nil
}
