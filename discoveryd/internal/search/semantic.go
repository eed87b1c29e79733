package search

import (
	"strings"

	"github.com/codeexec/codeexec/discoveryd/internal/embed"
)

// Fusion with a sentence-embedding model (internal/embed): every tool's
// vector is computed at build time; a query's vector is compared with
// all of them, the nearest join the words' matches, and each candidate's
// score becomes a mix of its words' score and its cosine.
var (
	// semWeight is the share of a candidate's score that comes from its
	// cosine, against its word score as a share of the best one.
	semWeight float32 = 0.3
	// semFloor is the cosine that counts as no likeness at all; the
	// static model's vectors of unrelated texts are still this close.
	semFloor float32 = 0.2
	// semNearest is how many of the nearest tools by cosine join the
	// candidates although they share no word with the query.
	semNearest = 20
	// semDescTokens bounds the tokens of a description that count, as the
	// model itself reads at most 256 (and its training pairs were short).
	semDescTokens = 256
	// semNameWeight weighs the tool name's tokens against the
	// description's: a name says what a tool does.
	semNameWeight float32 = 2
	// semParamWeight weighs the parameter names' tokens.
	semParamWeight float32 = 0.3
)

// Options configure an index.
type Options struct {
	// Model, when set, ranks by meaning as well as by words.
	Model *embed.Model
}

// embedDocs computes each document's unit vector into ix.sem.
func (ix *Index) embedDocs(m *embed.Model) {
	dims := m.Dims()
	ix.sem = make([]float32, len(ix.docs)*dims)
	var ids []int32
	for i := range ix.docs {
		d := &ix.docs[i]
		v := ix.sem[i*dims : (i+1)*dims]
		ids = m.AppendTokens(ids[:0], splitName(d.Tool))
		for _, id := range ids {
			m.Add(v, id, semNameWeight)
		}
		ids = m.AppendTokens(ids[:0], d.Description)
		for _, id := range ids[:min(len(ids), semDescTokens)] {
			m.Add(v, id, 1)
		}
		if semParamWeight > 0 {
			ids = m.AppendTokens(ids[:0], splitName(strings.Join(d.Params, " ")))
			for _, id := range ids {
				m.Add(v, id, semParamWeight)
			}
		}
		embed.Unitize(v)
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
// untiered documents the words matched and the semNearest documents
// nearest the query that keep accepts; a candidate's score becomes
// (1-semWeight)·acc + semWeight·best·g(cos), where best is the highest
// untiered word score (1 when no word matched) and g maps semFloor..1
// to 0..1. The documents only the model found are marked in s.semOnly.
func (ix *Index) fuse(s *scratch, q string, keep func(*Doc) bool) {
	m := ix.model
	dims := m.Dims()
	qv := s.svec[:dims]
	clear(qv)
	s.ids = m.AppendTokens(s.ids[:0], q)
	for _, id := range s.ids {
		m.Add(qv, id, 1)
	}
	if !embed.Unitize(qv) {
		return
	}
	var best float32
	for _, d := range s.touched {
		if s.tier[d] == tierNone {
			best = max(best, s.acc[d])
		}
	}
	if best == 0 {
		best = 1
	}
	// The nearest documents, by a min-heap of semNearest.
	h := s.near[:0]
	for d := range ix.docs {
		c := cand{doc: int32(d), score: embed.Dot(qv, ix.sem[d*dims:(d+1)*dims])}
		s.cos[d] = c.score
		if len(h) < semNearest {
			h = append(h, c)
			if len(h) == semNearest {
				for i := len(h)/2 - 1; i >= 0; i-- {
					siftDown(h, i)
				}
			}
		} else if better(c, h[0]) {
			h[0] = c
			siftDown(h, 0)
		}
	}
	s.near = h[:0]
	g := func(c float32) float32 { return max(0, (c-semFloor)/(1-semFloor)) }
	for _, d := range s.touched {
		if s.tier[d] == tierNone {
			s.acc[d] = (1-semWeight)*s.acc[d] + semWeight*best*g(s.cos[d])
		}
	}
	for _, c := range h {
		d := c.doc
		if s.acc[d] != 0 || s.tier[d] != tierNone || g(c.score) == 0 || (keep != nil && !keep(&ix.docs[d])) {
			continue
		}
		s.touch(d)
		s.acc[d] = semWeight * best * g(c.score)
		s.pre[d] = 0
		s.semOnly = append(s.semOnly, d)
	}
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
