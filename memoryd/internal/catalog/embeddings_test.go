package catalog

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/codeexec/codeexec/proto/gen/codeexec/catalog/v1"
)

// floats encodes vectors as PutEmbeddings takes them.
func floats(fs ...float32) []byte {
	b := make([]byte, 0, 4*len(fs))
	for _, f := range fs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func TestEmbeddingsSurviveARestart(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, reopen func() catalogv1.CatalogServiceClient) {
		c := reopen()
		a := &catalogv1.Embeddings{Key: key("a"), Dims: 2, Vectors: floats(0.6, 0.8, -1, 0)}
		b := &catalogv1.Embeddings{Key: key("b"), Dims: 3, Vectors: floats(0, 0, 1)}
		for _, e := range []*catalogv1.Embeddings{a, b} {
			if _, err := c.PutEmbeddings(t.Context(), &catalogv1.PutEmbeddingsRequest{Embeddings: e}); err != nil {
				t.Fatal(err)
			}
		}
		c = reopen()
		got, err := c.GetEmbeddings(t.Context(), &catalogv1.GetEmbeddingsRequest{Keys: []string{key("b"), key("missing"), key("a")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GetEmbeddings()) != 2 || !proto.Equal(got.GetEmbeddings()[0], b) || !proto.Equal(got.GetEmbeddings()[1], a) {
			t.Fatalf("got %v, want b then a", got.GetEmbeddings())
		}
		// The tool lists are another kind: a list's key finds no vectors.
		cat := &catalogv1.Catalog{Key: key("c"), ToolsJson: "[]", ListedAt: timestamppb.Now()}
		if _, err := c.PutCatalog(t.Context(), &catalogv1.PutCatalogRequest{Catalog: cat}); err != nil {
			t.Fatal(err)
		}
		got, err = c.GetEmbeddings(t.Context(), &catalogv1.GetEmbeddingsRequest{Keys: []string{key("c")}})
		if err != nil || len(got.GetEmbeddings()) != 0 {
			t.Errorf("vectors under a tool list's key: %v, %v; want none", got, err)
		}
	})
}

func TestEmbeddingsRejectsBadEntries(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, reopen func() catalogv1.CatalogServiceClient) {
		c := reopen()
		for _, tt := range []struct {
			e    *catalogv1.Embeddings
			want string
		}{
			{nil, "embeddings are missing"},
			{&catalogv1.Embeddings{Key: "abc", Dims: 1, Vectors: floats(1)}, "64 lowercase hex digits"},
			{&catalogv1.Embeddings{Key: key("x"), Dims: 0, Vectors: floats(1)}, "dims is 0"},
			{&catalogv1.Embeddings{Key: key("x"), Dims: MaxDims + 1, Vectors: floats(1)}, "dims is 4097"},
			{&catalogv1.Embeddings{Key: key("x"), Dims: 2, Vectors: floats(1, 2, 3)}, "multiple of 4 × dims"},
			{&catalogv1.Embeddings{Key: key("x"), Dims: 2}, "vectors are 0 bytes"},
			{&catalogv1.Embeddings{Key: key("x"), Dims: 1, Vectors: make([]byte, MaxEmbeddingBytes+4)}, "at most"},
			{&catalogv1.Embeddings{Key: key("x"), Dims: 2, Vectors: floats(1, float32(math.NaN()))}, "component 1 is NaN"},
		} {
			_, err := c.PutEmbeddings(t.Context(), &catalogv1.PutEmbeddingsRequest{Embeddings: tt.e})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PutEmbeddings(%.60v) = %v, want InvalidArgument saying %q", tt.e, err, tt.want)
			}
		}
		many := make([]string, MaxEmbeddingKeys+1)
		for i := range many {
			many[i] = key("x")
		}
		if _, err := c.GetEmbeddings(t.Context(), &catalogv1.GetEmbeddingsRequest{Keys: many}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("GetEmbeddings(%d keys) = %v, want InvalidArgument", len(many), err)
		}
		got, err := c.GetEmbeddings(t.Context(), &catalogv1.GetEmbeddingsRequest{Keys: []string{key("x")}})
		if err != nil || len(got.GetEmbeddings()) != 0 {
			t.Errorf("after rejected writes: %v, %v; want nothing stored", got, err)
		}
	})
}
