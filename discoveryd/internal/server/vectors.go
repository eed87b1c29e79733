package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/codeexec/codeexec/discoveryd/internal/embed"
	"github.com/codeexec/codeexec/discoveryd/internal/search"
	catalogv1 "github.com/codeexec/codeexec/proto/gen/codeexec/catalog/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Ranking by meaning: the model's vector of every indexed tool, made in
// the background, kept here and in the catalogue under a hash of the
// model and the tools' texts, so that a restart, or another codeexec on
// the state dir, runs the model on nothing it has seen. Until every
// tool has its vector, searches rank by words and say so.

// vectorChunk is how many tools of a server share one stored entry.
const vectorChunk = 256

// maxKeysPerGet is the catalogue's limit on keys per GetEmbeddings.
const maxKeysPerGet = 100

// queryCacheSize is how many recent queries' vectors are kept.
const queryCacheSize = 512

// vectors holds the model and what it made.
type vectors struct {
	enc     *embed.Encoder
	queries *embed.QueryCache
	workers int

	mu      sync.Mutex
	known   map[string][]float32 // chunk key → its tools' vectors, dims each
	running bool                 // a background run is under way
	stop    chan struct{}        // closed by Close: runs end
	wg      sync.WaitGroup
}

func newVectors(enc *embed.Encoder) *vectors {
	return &vectors{enc: enc, queries: enc.NewQueryCache(queryCacheSize), known: map[string][]float32{},
		stop: make(chan struct{}), workers: max(1, min(4, runtime.NumCPU()/2))}
}

// close stops the background run and waits for it.
func (v *vectors) close() {
	v.mu.Lock()
	select {
	case <-v.stop:
	default:
		close(v.stop)
	}
	v.mu.Unlock()
	v.wg.Wait()
}

// chunk is a run of at most vectorChunk tools of one server, in the
// index's order.
type chunk struct {
	key   string
	texts []string
}

// chunksOf splits docs, grouped by server as searchIndex lists them, into
// chunks keyed by the model and their texts.
func chunksOf(model string, docs []search.Doc) []chunk {
	var out []chunk
	for i := 0; i < len(docs); {
		j := i + 1
		for j < len(docs) && j-i < vectorChunk && docs[j].Server == docs[i].Server {
			j++
		}
		h := sha256.New()
		fmt.Fprintf(h, "codeexec search vectors v1\x00%s\x00", model)
		c := chunk{}
		for k := i; k < j; k++ {
			t := search.ModelText(&docs[k])
			c.texts = append(c.texts, t)
			fmt.Fprintf(h, "%d\x00%s", len(t), t)
		}
		c.key = hex.EncodeToString(h.Sum(nil))
		out = append(out, c)
		i = j
	}
	return out
}

// semanticFor returns the model's view of docs when every tool's vector
// is known; else nil and a note for the hits, having asked the catalogue
// and started making the rest in the background.
func (s *Server) semanticFor(docs []search.Doc) (*search.Semantic, string) {
	v := s.vec
	chunks := chunksOf(v.enc.ID(), docs)
	missing := v.missing(chunks)
	if len(missing) > 0 {
		s.vectorsFromCatalog(missing)
		missing = v.missing(missing)
	}
	if len(missing) > 0 {
		n := 0
		for _, c := range missing {
			n += len(c.texts)
		}
		s.makeVectors(missing)
		return nil, fmt.Sprintf("by words only: the search model is still reading %d of %d tools", n, len(docs))
	}
	dims := v.enc.Dims()
	sem := &search.Semantic{Dims: dims, Vectors: make([]float32, 0, len(docs)*dims), Query: v.queries.Vector}
	keep := make(map[string]bool, len(chunks))
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range chunks {
		sem.Vectors = append(sem.Vectors, v.known[c.key]...)
		keep[c.key] = true
	}
	if !v.running {
		for k := range v.known {
			if !keep[k] {
				delete(v.known, k) // tools no longer listed
			}
		}
	}
	return sem, ""
}

// missing returns the chunks whose vectors are not known here.
func (v *vectors) missing(chunks []chunk) []chunk {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []chunk
	for _, c := range chunks {
		if _, ok := v.known[c.key]; !ok {
			out = append(out, c)
		}
	}
	return out
}

// vectorsFromCatalog asks the catalogue for chunks' vectors.
func (s *Server) vectorsFromCatalog(chunks []chunk) {
	if s.opts.Catalog == nil {
		return
	}
	v, dims := s.vec, s.vec.enc.Dims()
	size := map[string]int{}
	for _, c := range chunks {
		size[c.key] = len(c.texts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	for start := 0; start < len(chunks); start += maxKeysPerGet {
		var keys []string
		for _, c := range chunks[start:min(start+maxKeysPerGet, len(chunks))] {
			keys = append(keys, c.key)
		}
		resp, err := s.opts.Catalog.GetEmbeddings(ctx, &catalogv1.GetEmbeddingsRequest{Keys: keys})
		if err != nil {
			s.logger.Warn("cannot read search vectors from the catalogue; the model makes them", logkeys.Error, err)
			return
		}
		for _, e := range resp.GetEmbeddings() {
			b := e.GetVectors()
			if int(e.GetDims()) != dims || len(b) != 4*dims*size[e.GetKey()] {
				continue // not what this model makes of these texts
			}
			vec := make([]float32, len(b)/4)
			for i := range vec {
				vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
			v.mu.Lock()
			v.known[e.GetKey()] = vec
			v.mu.Unlock()
		}
	}
}

// makeVectors runs the model over chunks in the background, unless a run
// is under way, keeps the vectors, stores them in the catalogue, and has
// the index rebuilt when all are made. A later search starts a run for
// whatever this one did not cover.
func (s *Server) makeVectors(chunks []chunk) {
	v := s.vec
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-v.stop:
		return
	default:
	}
	if v.running {
		return
	}
	v.running = true
	work := make(chan chunk)
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		defer close(work)
		for _, c := range chunks {
			select {
			case work <- c:
			case <-v.stop:
				return
			}
		}
	}()
	var workers sync.WaitGroup
	for range v.workers {
		workers.Go(func() {
			for c := range work {
				s.makeChunk(c)
			}
		})
	}
	v.wg.Go(func() {
		workers.Wait()
		v.mu.Lock()
		v.running = false
		v.mu.Unlock()
		s.indexDirty.Store(true)
	})
}

// makeChunk runs the model over one chunk, one text at a time so that
// Close need not wait for a whole chunk, and stores the result.
func (s *Server) makeChunk(c chunk) {
	v := s.vec
	vec := make([]float32, 0, len(c.texts)*v.enc.Dims())
	for _, t := range c.texts {
		select {
		case <-v.stop:
			return
		default:
		}
		out, err := v.enc.Encode([]string{t})
		if err != nil {
			s.logger.Warn("search model failed; tool search ranks by words only", logkeys.Error, err)
			return
		}
		vec = append(vec, out[0]...)
	}
	v.mu.Lock()
	v.known[c.key] = vec
	v.mu.Unlock()
	if s.opts.Catalog == nil {
		return
	}
	b := make([]byte, 0, 4*len(vec))
	for _, f := range vec {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	e := &catalogv1.Embeddings{Key: c.key, Dims: int32(v.enc.Dims()), Vectors: b}
	s.catalogWrites.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
		defer cancel()
		if _, err := s.opts.Catalog.PutEmbeddings(ctx, &catalogv1.PutEmbeddingsRequest{Embeddings: e}); err != nil {
			s.logger.Warn("cannot store search vectors in the catalogue", logkeys.Error, err)
		}
	})
}
