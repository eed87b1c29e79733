package search

import "strings"

// Dense reranking: the best-scored documents are rescored by how close
// their vector is to the query's (see vectors.go), so that a tool
// described in other words than the query's rises.
var (
	// denseWeight is the share of a reranked document's score that comes
	// from the cosine of its vector and the query's, against its BM25F
	// score as a share of the best one.
	denseWeight float32 = 0.5
	// densePool is how many of the best-scored documents are reranked.
	densePool = 30
	// denseUnknownIDF weighs a query word that the index lacks.
	denseUnknownIDF float32 = 3
)

// rerank mixes the cosine of the query's and each pooled document's
// vectors into s.acc: (1-denseWeight)·acc + denseWeight·best·cos, where
// best is the highest score of an untiered document. Documents outside the
// pool keep (1-denseWeight)·acc.
func (ix *Index) rerank(s *scratch, keep func(*Doc) bool) {
	if denseWeight <= 0 || len(s.touched) == 0 {
		return
	}
	wv := theVectors()
	q := s.qvec[:wv.dims]
	clear(q)
	for _, at := range s.content {
		w := strings.ToLower(s.runs[at])
		row := wv.find(w)
		if row < 0 {
			continue
		}
		idf := denseUnknownIDF
		if id, ok := ix.words[w]; ok {
			idf = ix.idf[id]
		}
		wv.addTo(q, row, idf)
	}
	if !unitize(q) {
		return
	}
	// The pool: the densePool best untiered documents, by a min-heap.
	h := s.top[:0]
	var best float32
	for _, d := range s.touched {
		if s.tier[d] != tierNone || (keep != nil && !keep(&ix.docs[d])) {
			continue
		}
		best = max(best, s.acc[d])
		c := cand{doc: d, score: s.acc[d]}
		if len(h) < densePool {
			h = append(h, c)
			if len(h) == densePool {
				for i := len(h)/2 - 1; i >= 0; i-- {
					siftDown(h, i)
				}
			}
		} else if better(c, h[0]) {
			h[0] = c
			siftDown(h, 0)
		}
	}
	for _, d := range s.touched {
		s.acc[d] *= 1 - denseWeight
	}
	for _, c := range h {
		v := ix.docVec[int(c.doc)*wv.dims : int(c.doc)*wv.dims+wv.dims]
		s.acc[c.doc] += denseWeight * best * dot(q, v)
	}
	s.top = h[:0]
}
