package search

import "sort"

// cand is a matched document awaiting ranking.
type cand struct {
	doc   int32
	tier  uint8
	score float32
}

// better reports whether a ranks above b: higher tier, then higher score,
// then earlier document for a stable order.
func better(a, b cand) bool {
	if a.tier != b.tier {
		return a.tier > b.tier
	}
	if a.score != b.score {
		return a.score > b.score
	}
	return a.doc < b.doc
}

// collect picks the best limit candidates among s.touched. tierStep is
// added to the score once per tier so that Score alone orders the hits.
func (ix *Index) collect(s *scratch, limit int, tierStep float64) Result {
	total := len(s.touched)
	if limit <= 0 || limit > total {
		limit = total
	}
	// s.top is a min-heap (worst candidate at the root) of at most limit.
	top := s.top[:0]
	for _, d := range s.touched {
		c := cand{doc: d, tier: s.tier[d], score: s.acc[d]}
		if len(top) < limit {
			top = append(top, c)
			siftUp(top, len(top)-1)
			continue
		}
		if limit > 0 && better(c, top[0]) {
			top[0] = c
			siftDown(top, 0)
		}
	}
	sort.Slice(top, func(i, j int) bool { return better(top[i], top[j]) })
	hits := make([]Hit, len(top))
	for i, c := range top {
		hits[i] = Hit{Doc: &ix.docs[c.doc], Score: float64(c.score) + float64(c.tier)*tierStep}
	}
	s.top = top[:0]
	return Result{Hits: hits, Total: total, Truncated: total > len(hits)}
}

// all answers the empty query: every document in index order.
func (ix *Index) all(limit int) Result {
	n := len(ix.docs)
	if limit <= 0 || limit > n {
		limit = n
	}
	hits := make([]Hit, limit)
	for i := range hits {
		hits[i] = Hit{Doc: &ix.docs[i]}
	}
	return Result{Hits: hits, Total: n, Truncated: n > limit}
}

// siftUp restores the heap property after h[i] was appended.
func siftUp(h []cand, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !better(h[p], h[i]) {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

// siftDown restores the heap property after h[i] was replaced.
func siftDown(h []cand, i int) {
	for {
		l, worst := 2*i+1, i
		if l < len(h) && better(h[worst], h[l]) {
			worst = l
		}
		if r := l + 1; r < len(h) && better(h[worst], h[r]) {
			worst = r
		}
		if worst == i {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}
