package search

import "github.com/codeexec/codeexec/discoveryd/internal/search/internal/fuzzy"

// typoCandidates is how many of the best untiered matches by words are
// checked for being the tool the whole query misspells. The words find a
// misspelt name in their top five for all but one tool of the corpus
// (docs/SEARCH.md), so a few more suffice.
const typoCandidates = 10

// markMisspeltNames lifts to tierTypo the tools, among the typoCandidates
// best untiered matches by words that keep accepts, whose name the whole
// query spells within the typo budget once separators and case are
// dropped ("create isuse" for create_issue). A misspelt name is a name:
// like an exact one it must not be pushed down by what the model makes of
// a word it has never seen.
func (ix *Index) markMisspeltNames(s *scratch, q string, keep func(*Doc) bool) {
	sq := squash(q)
	if len(sq) < 4 || len(sq) > 63 {
		return
	}
	h := s.top[:0]
	for _, d := range s.touched {
		if s.tier[d] != tierNone || (keep != nil && !keep(&ix.docs[d])) {
			continue
		}
		h = pushBest(h, cand{doc: d, score: s.acc[d]}, typoCandidates)
	}
	for _, c := range h {
		doc := &ix.docs[c.doc]
		if fuzzy.Within(sq, squash(doc.Tool)) || fuzzy.Within(sq, squash(doc.ToolAlias)) {
			s.tier[c.doc] = tierTypo
		}
	}
	s.top = h[:0]
}
