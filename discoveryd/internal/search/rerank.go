package search

import (
	"strings"

	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/wordvec"
	"github.com/codeexec/codeexec/internal/porter"
)

// Dense reranking: the best-scored documents are rescored by how close
// their vector is to the query's (see internal/wordvec), so that a tool
// described in other words than the query's rises.
var (
	// denseWeight is the share of a reranked document's score that comes
	// from the cosine of its vector and the query's, against its BM25F
	// score as a share of the best one.
	denseWeight float32 = 0.4
	// densePool is how many of the best-scored documents are reranked.
	densePool = 30
	// denseUnknownIDF weighs a query word that the index lacks.
	denseUnknownIDF float32 = 3
)

// rerank mixes the cosine of the query's and each pooled document's
// vectors into s.acc: (1-denseWeight)·acc + denseWeight·best·cos, where
// best is the highest score of an untiered document; a document outside
// the pool counts as having cosine 0. A query word that the vectors lack
// and the index lacks too stands for its typo corrections.
func (ix *Index) rerank(s *scratch, keep func(*Doc) bool) {
	if denseWeight <= 0 || denseWeight >= 1 || len(s.touched) == 0 {
		return
	}
	wv := wordvec.Embedded()
	dims := wv.Dims()
	q := s.qvec[:dims]
	clear(q)
	for _, at := range s.content {
		w := strings.ToLower(s.runs[at])
		id, known := ix.words[w]
		t := ""
		if !known {
			t = porter.Stem(w)
			id, known = ix.terms[t]
		}
		if row := wv.Find(w); row >= 0 {
			idf := denseUnknownIDF
			if known {
				idf = ix.idf[id]
			}
			wv.AddTo(q, row, idf)
		} else if !known {
			// A word neither the index nor the vectors know is taken for
			// a misspelling, and stands for the words it corrects to, as
			// it does for BM25F.
			s.typos = ix.corrections(s.typos[:0], w, t)
			for _, a := range s.typos {
				if row := wv.Find(ix.surface[a.term]); row >= 0 {
					wv.AddTo(q, row, a.weight*ix.idf[a.term]/float32(len(s.typos)))
				}
			}
		}
	}
	if !wordvec.Unitize(q) {
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
		h = pushBest(h, cand{doc: d, score: s.acc[d]}, densePool)
	}
	// (1-w)·acc + w·best·cos orders documents as acc + w/(1-w)·best·cos
	// does, which leaves the documents outside the pool as they are.
	k := denseWeight / (1 - denseWeight) * best
	for _, c := range h {
		v := ix.docVec[int(c.doc)*dims : int(c.doc)*dims+dims]
		s.acc[c.doc] += k * wordvec.Dot(q, v)
	}
	s.lifted = liftedIn(s.lifted[:0], h, s.acc)
	s.top = h[:0]
}

// liftedIn appends to dst the documents of the pool h that the rerank put
// above a document of h that was above them before: h holds the scores
// from before, acc those from after. A hit's explanation says so
// (explain), since the words it shares with the query may be weak.
func liftedIn(dst []int32, h []cand, acc []float32) []int32 {
	for _, a := range h {
		for _, b := range h {
			if better(b, a) && better(cand{doc: a.doc, score: acc[a.doc]}, cand{doc: b.doc, score: acc[b.doc]}) {
				dst = append(dst, a.doc)
				break
			}
		}
	}
	return dst
}
