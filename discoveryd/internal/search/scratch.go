package search

// scratch is per-query working memory, pooled so that a query allocates
// nothing proportional to the corpus.
type scratch struct {
	acc      []float32 // accumulated score by doc
	unit     []float32 // best score of the current unit by doc
	matched  []uint16  // units matched by doc
	named    []uint16  // units matched in the tool name, by doc
	uname    []bool    // the current unit matched the tool name, by doc
	tier     []uint8   // rank tier by doc
	touched  []int32   // docs with a non-zero acc or tier
	utouched []int32   // docs with a non-zero unit score
	runs     []string
	parts    []string
	seen     []int32 // terms of the query's words so far
	alts     []alt
	top      []cand
}

func newScratch(n int) *scratch {
	return &scratch{
		acc:     make([]float32, n),
		unit:    make([]float32, n),
		matched: make([]uint16, n),
		named:   make([]uint16, n),
		uname:   make([]bool, n),
		tier:    make([]uint8, n),
	}
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
}
