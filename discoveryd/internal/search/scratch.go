package search

import (
	"github.com/codeexec/codeexec/discoveryd/internal/search/internal/wordvec"
)

// scratch is per-query working memory, pooled so that a query allocates
// nothing proportional to the corpus.
type scratch struct {
	acc      []float32 // accumulated score by doc
	unit     []float32 // best score of the current unit by doc
	matched  []float32 // units matched by doc, each by its alternative's weight
	named    []float32 // the same for units matched in the tool name
	uweight  []float32 // weight of the current unit's best alternative, by doc
	uname    []float32 // the same among alternatives in the tool name
	tier     []uint8   // rank tier by doc
	touched  []int32   // docs with a non-zero acc or tier
	utouched []int32   // docs with a non-zero unit score
	runs     []string
	content  []int    // indices of the runs that are not stopwords
	phrases  []phrase // lexicon phrase starting at each run
	parts    []string
	seen     []int32 // terms of the query's words so far
	alts     []alt
	units    []unit // the query's scored units, for explaining hits
	ualts    []alt  // their alternatives: unit i's end at units[i].end
	top      []cand
	qvec     []float32 // the query's vector
	typos    []alt     // a query word's corrections, for its vector
	lifted   []int32   // docs the rerank moved up (rerank.go)
	// For the model (semantic.go):
	pre     []float32 // by doc: its score before the fusion
	near    []cand    // the docs nearest by sign bits
	nearTop []cand    // the nearest of them by cosine
	qbits   []uint64  // the signs of the query's vector's components
	semOnly []int32   // docs only the model found
}

// unit is one scored unit of the query: its words and where its
// alternatives end in scratch.ualts.
type unit struct {
	word string
	end  int
}

// newScratch makes working memory for n documents, and for vectors of
// dims when the index has a model.
func newScratch(n, dims int) *scratch {
	s := &scratch{
		acc:     make([]float32, n),
		unit:    make([]float32, n),
		matched: make([]float32, n),
		named:   make([]float32, n),
		uweight: make([]float32, n),
		uname:   make([]float32, n),
		tier:    make([]uint8, n),
		qvec:    make([]float32, wordvec.Embedded().Dims()),
	}
	if dims > 0 {
		s.qbits = make([]uint64, (dims+63)/64)
		s.pre = make([]float32, n)
	}
	return s
}

// touch marks doc as a match.
func (s *scratch) touch(doc int32) {
	if s.acc[doc] == 0 && s.tier[doc] == 0 && s.matched[doc] == 0 {
		s.touched = append(s.touched, doc)
	}
}

// reset clears the per-doc arrays for the docs this query touched.
func (s *scratch) reset() {
	for _, d := range s.touched {
		s.acc[d], s.matched[d], s.named[d], s.tier[d] = 0, 0, 0, 0
	}
	s.touched = s.touched[:0]
	s.lifted = s.lifted[:0]
	s.semOnly = s.semOnly[:0]
}
