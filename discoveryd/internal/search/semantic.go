package search

import (
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/codeexec/codeexec/discoveryd/internal/embed"
)

// Fusion with a sentence-embedding model (internal/embed): every tool's
// vector is made ahead of the search (discoveryd makes them in the
// background and keeps them in the catalogue); a query's vector is
// compared with all of them, the nearest join the words' matches, and
// each candidate's score becomes a mix of its words' score and its
// cosine. The settings were chosen on the tuned and dev sets
// (scripts/search-model-compare.py, TestSemanticGrid).
var (
	// semWeight is the share of a candidate's score that comes from its
	// cosine, against its word score as a share of the best one.
	semWeight float32 = 0.7
	// semFloor is the cosine that counts as no likeness at all: the
	// model's vectors of unrelated texts are still about this close.
	semFloor float32 = 0.2
	// semNearest is how many of the nearest tools by cosine join the
	// candidates although they share no word with the query.
	semNearest = 20
	// semPool is how many of the best untiered word matches get a cosine;
	// the others keep their word score, scaled as the pool's are.
	semPool = 50
	// semShortlist is how many documents, nearest the query by the signs
	// of their vectors' components, get an exact cosine when looking for
	// the semNearest: the sign bits are a cheap first cut.
	semShortlist = 200
)

// Options configure an index.
type Options struct {
	// Semantic, when set, ranks by meaning as well as by words.
	Semantic *Semantic
	// Pending, when set, says why an index ranks by words only although a
	// model is installed (its vectors are still being made); every
	// explained hit's Why ends with it.
	Pending string
}

// Semantic is what ranking by meaning needs: every document's vector, made
// by a sentence model from ModelText, and the same model for the query.
type Semantic struct {
	// Dims is the vectors' length.
	Dims int
	// Vectors holds each document's unit vector, Dims each, in the order
	// of the documents given to NewIndexWith.
	Vectors []float32
	// Query returns the query's unit vector. When it fails the search
	// ranks by words.
	Query func(string) ([]float32, error)
}

// modelDescChars bounds the description the model reads; it reads at
// most 128 tokens in all.
const modelDescChars = 600

// ModelText is what the model reads of a tool: its server's and its own
// name spelled as words, then the start of its description. The server's
// name says what a tool acts on ("github", "postgres"), which its
// description often leaves out.
func ModelText(d *Doc) string {
	desc := d.Description
	if len(desc) > modelDescChars {
		cut := modelDescChars
		for cut > 0 && !utf8.RuneStart(desc[cut]) {
			cut--
		}
		desc = desc[:cut]
	}
	return splitName(d.Server) + " " + splitName(d.Tool) + ". " + desc
}

// useSemantic takes sem's vectors for the index, or leaves the index
// ranking by words when they do not fit its documents.
func (ix *Index) useSemantic(sem *Semantic) {
	if sem == nil || sem.Dims < 1 || sem.Query == nil || len(sem.Vectors) != len(ix.docs)*sem.Dims {
		return
	}
	ix.semantic = sem
	ix.sem = sem.Vectors
	ix.semBits = signBits(ix.sem, sem.Dims)
}

// signBits packs the sign of each component of each dims-long vector in
// vecs, one bit a component, words per vector rounded up.
func signBits(vecs []float32, dims int) []uint64 {
	words := (dims + 63) / 64
	n := len(vecs) / dims
	out := make([]uint64, n*words)
	for d := range n {
		appendSigns(out[d*words:(d+1)*words], vecs[d*dims:(d+1)*dims])
	}
	return out
}

// appendSigns sets bit i of dst when v[i] is positive.
func appendSigns(dst []uint64, v []float32) {
	clear(dst)
	for i, x := range v {
		if x > 0 {
			dst[i/64] |= 1 << (i % 64)
		}
	}
}

// splitName spells an identifier as words: "listPullRequests" and
// "list_pull_requests" are both "list pull requests".
func splitName(s string) string {
	var b strings.Builder
	prevLower := false
	for _, r := range s {
		switch {
		case r == '_' || r == '-' || r == '.' || r == '/':
			b.WriteByte(' ')
			prevLower = false
			continue
		case r >= 'A' && r <= 'Z':
			if prevLower {
				b.WriteByte(' ')
			}
			prevLower = false
		default:
			prevLower = r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fuse mixes each candidate's cosine into s.acc. The candidates are the
// semPool best untiered documents by their words that keep accepts, and
// the semNearest
// documents nearest the query (among the semShortlist nearest by sign
// bits) that keep accepts. A candidate scores
// (1-semWeight)·acc + semWeight·best·g(cos), where best is the highest
// untiered word score (1 when no word matched) and g maps semFloor..1 to
// 0..1; any other document (1-semWeight)·acc. The documents only the
// model found are marked in s.semOnly.
func (ix *Index) fuse(s *scratch, q string, keep func(*Doc) bool) {
	dims := ix.semantic.Dims
	qv, err := ix.semantic.Query(q)
	if err != nil || len(qv) != dims {
		return // by words, as without a model
	}
	g := func(c float32) float32 { return max(0, (c-semFloor)/(1-semFloor)) }
	cos := func(d int32) float32 { return embed.Dot(qv, ix.sem[int(d)*dims:int(d+1)*dims]) }
	// The pool of word matches, by a min-heap.
	h := s.top[:0]
	var best float32
	for _, d := range s.touched {
		if s.tier[d] != tierNone || (keep != nil && !keep(&ix.docs[d])) {
			continue
		}
		best = max(best, s.acc[d])
		h = pushBest(h, cand{doc: d, score: s.acc[d]}, semPool)
	}
	if best == 0 {
		best = 1
	}
	for _, d := range s.touched {
		if s.tier[d] == tierNone {
			s.acc[d] *= 1 - semWeight
		}
	}
	for _, c := range h {
		s.acc[c.doc] += semWeight * best * g(cos(c.doc))
	}
	s.top = h[:0]
	for _, c := range ix.nearest(s, qv, cos, keep) {
		d := c.doc
		if s.acc[d] != 0 || s.tier[d] != tierNone || g(c.score) == 0 {
			continue // a word match, pooled above or not
		}
		s.touch(d)
		s.acc[d] = semWeight * best * g(c.score)
		s.pre[d] = 0
		s.semOnly = append(s.semOnly, d)
	}
}

// nearest returns the semNearest documents that keep accepts with the
// highest cosine, among the semShortlist whose sign bits differ least
// from the query's.
func (ix *Index) nearest(s *scratch, qv []float32, cos func(int32) float32, keep func(*Doc) bool) []cand {
	words := len(s.qbits)
	appendSigns(s.qbits, qv)
	short := s.near[:0]
	for d := range ix.docs {
		dist := 0
		for i, w := range ix.semBits[d*words : (d+1)*words] {
			dist += bits.OnesCount64(w ^ s.qbits[i])
		}
		short = pushBest(short, cand{doc: int32(d), score: -float32(dist)}, semShortlist)
	}
	top := s.nearTop[:0]
	for _, c := range short {
		if keep != nil && !keep(&ix.docs[c.doc]) {
			continue
		}
		top = pushBest(top, cand{doc: c.doc, score: cos(c.doc)}, semNearest)
	}
	s.near, s.nearTop = short[:0], top[:0]
	return top
}

// pushBest adds c to the min-heap h of at most n best candidates.
func pushBest(h []cand, c cand, n int) []cand {
	if len(h) < n {
		h = append(h, c)
		if len(h) == n {
			for i := len(h)/2 - 1; i >= 0; i-- {
				siftDown(h, i)
			}
		}
		return h
	}
	if n > 0 && better(c, h[0]) {
		h[0] = c
		siftDown(h, 0)
	}
	return h
}

// liftedByModel appends to s.lifted the hits of top that the fusion put
// above a hit of top that ranked above them by words.
func (ix *Index) liftedByModel(s *scratch, top []cand) {
	for i, a := range top {
		if a.tier != tierNone {
			continue
		}
		for _, b := range top[i+1:] {
			if b.tier == tierNone && s.pre[b.doc] > s.pre[a.doc] {
				s.lifted = append(s.lifted, a.doc)
				break
			}
		}
	}
}
