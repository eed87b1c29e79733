package search

import (
	"slices"
	"strings"

	"github.com/codeexec/codeexec/internal/porter"
)

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

// collect picks the best limit candidates among the documents in
// s.touched that keep accepts (all when keep is nil). tierStep is added to
// the score once per tier so that Score alone orders the hits.
func (ix *Index) collect(s *scratch, limit int, tierStep float64, keep func(*Doc) bool) Result {
	c := s.top[:0]
	for _, d := range s.touched {
		if keep == nil || keep(&ix.docs[d]) {
			c = append(c, cand{doc: d, tier: s.tier[d], score: s.acc[d]})
		}
	}
	s.top = c[:0]
	total := len(c)
	if limit <= 0 || limit > total {
		limit = total
	}
	if limit < total {
		// Select the best limit with a min-heap (worst at the root) over
		// c[:limit], so the cost is n log limit rather than a full sort.
		h := c[:limit]
		for i := limit/2 - 1; i >= 0; i-- {
			siftDown(h, i)
		}
		for _, x := range c[limit:] {
			if better(x, h[0]) {
				h[0] = x
				siftDown(h, 0)
			}
		}
	}
	top := c[:limit]
	slices.SortFunc(top, func(a, b cand) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
	if ix.semantic != nil {
		ix.liftedByModel(s, top[:min(len(top), maxExplained)])
	}
	hits := make([]Hit, len(top))
	for i, x := range top {
		hits[i] = Hit{Doc: &ix.docs[x.doc], Score: float64(x.score) + float64(x.tier)*tierStep}
		if i < maxExplained {
			hits[i].Why = ix.explain(s, x.doc, x.tier)
			if ix.pending != "" {
				hits[i].Why += "; " + ix.pending
			}
		}
	}
	return Result{Hits: hits, Total: total, Truncated: total > len(hits)}
}

// maxExplained bounds the hits that get an explanation, so that asking
// for every match does not cost one explanation per document.
const maxExplained = 50

// all answers the empty query: every document keep accepts, in index order.
func (ix *Index) all(limit int, keep func(*Doc) bool) Result {
	var res Result
	for i := range ix.docs {
		d := &ix.docs[i]
		if keep != nil && !keep(d) {
			continue
		}
		res.Total++
		if limit <= 0 || len(res.Hits) < limit {
			res.Hits = append(res.Hits, Hit{Doc: d})
		}
	}
	if res.Hits == nil {
		res.Hits = []Hit{}
	}
	res.Truncated = res.Total > len(res.Hits)
	return res
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

// termFields records the fields of one document that contain a term, as a
// bit set over the field constants.
type termFields struct {
	term   int32
	fields uint8
}

// fieldsOf turns a document's term frequencies into its sorted termFields.
func fieldsOf(tfs []termFreq) []termFields {
	out := make([]termFields, 0, len(tfs))
	for _, t := range tfs {
		var m uint8
		for f := range numFields {
			if t.tf[f] > 0 {
				m |= 1 << f
			}
		}
		out = append(out, termFields{t.term, m})
	}
	slices.SortFunc(out, func(a, b termFields) int { return int(a.term - b.term) })
	return out
}

// fieldLabels name the fields in explanations.
var fieldLabels = [numFields]string{
	fieldName:       "name",
	fieldServer:     "server",
	fieldDesc:       "description",
	fieldParam:      "parameter",
	fieldParamText:  "parameter description",
	fieldServerDesc: "server description",
}

// explain says in a few words why document d matched the query whose units
// s holds: the kind of name match for a lifted tier, else for each field
// the words that matched there, each with the query's word when the tool
// uses another ("image (for picture)"), and "ranked up by meaning" when
// the rerank put it above a hit that its words had ranked higher.
func (ix *Index) explain(s *scratch, d int32, tier uint8) string {
	switch tier {
	case tierName:
		return "exact name"
	case tierExact:
		return "exact alias or server-qualified name"
	case tierLoose:
		return "tool name in the query"
	case tierTypo:
		return "misspelt tool name"
	}
	var byField [numFields][]string
	var seen []int32 // terms already explained
	start := 0
	for _, u := range s.units {
		best, bestW := termFields{term: -1}, float32(0)
		for _, a := range s.ualts[start:u.end] {
			if a.weight <= bestW {
				continue
			}
			if k, ok := slices.BinarySearchFunc(ix.fields[d], a.term, func(tf termFields, t int32) int { return int(tf.term - t) }); ok {
				best, bestW = ix.fields[d][k], a.weight
			}
		}
		start = u.end
		if best.term < 0 || slices.Contains(seen, best.term) {
			continue
		}
		seen = append(seen, best.term)
		f := 0
		for best.fields&(1<<f) == 0 {
			f++
		}
		word := ix.surface[best.term]
		if q := strings.ToLower(u.word); porter.Stem(q) != porter.Stem(word) && q != word {
			word += " (for " + u.word + ")"
		}
		byField[f] = append(byField[f], word)
	}
	if slices.Contains(s.semOnly, d) {
		return "meaning only: no word in common with the query"
	}
	var b strings.Builder
	for f, words := range byField {
		if len(words) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(fieldLabels[f])
		b.WriteString(": ")
		b.WriteString(strings.Join(words, ", "))
	}
	if slices.Contains(s.lifted, d) {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString("ranked up by meaning")
	}
	return b.String()
}
